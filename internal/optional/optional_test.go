package optional

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSkipIsRecorded(t *testing.T) {
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(LogEnv, log)
	t.Setenv(CIEnv, "1") // a Skip is no failure, in CI either
	ran := false
	t.Run("half", func(t *testing.T) {
		Skip(t, "the real envd is absent")
		ran = true
	})
	if ran {
		t.Fatal("the test went on after Skip")
	}
	got, err := os.ReadFile(log)
	if err != nil || string(got) != "TestSkipIsRecorded/half: the real envd is absent\n" {
		t.Fatalf("skip log %q, %v", got, err)
	}
}

// helperEnv makes the test binary, run again by TestMissing, the test of a half that lacks something: its value
// says whether `make test` or `make release-check` provides it.
const helperEnv = "E2B_MCP_OPTIONAL_HELPER"

// What the suite provides itself fails its test in CI and names what is missing and who provides it; elsewhere it
// is a recorded skip saying who provides it.
func TestMissing(t *testing.T) {
	switch os.Getenv(helperEnv) {
	case "test":
		Missing(t, "PostgreSQL is not installed")
		t.Fatal("the test went on after Missing")
	case "release":
		MissingFromRelease(t, "no release build in dist/")
		t.Fatal("the test went on after MissingFromRelease")
	}
	for _, c := range []struct{ helper, skip, fail string }{
		{"test", "TestMissing: PostgreSQL is not installed; `make test` provides it\n",
			"PostgreSQL is not installed (CI must provide it: `make test` installs it"},
		{"release", "TestMissing: no release build in dist/; `make release-check` makes it and runs this\n",
			"no release build in dist/ (CI must provide it: .ci/run runs `make release-check`"},
	} {
		for _, ci := range []string{"", "1"} {
			log := filepath.Join(t.TempDir(), "skips")
			cmd := exec.Command(os.Args[0], "-test.run", "^TestMissing$", "-test.v")
			cmd.Env = append(os.Environ(), helperEnv+"="+c.helper, CIEnv+"="+ci, LogEnv+"="+log)
			out, err := cmd.CombinedOutput()
			skips, _ := os.ReadFile(log)
			if ci == "" {
				if err != nil || !strings.Contains(string(out), "--- SKIP: TestMissing") || string(skips) != c.skip {
					t.Errorf("%s, outside CI: %v\n%s\nskip log %q; want a recorded skip", c.helper, err, out, skips)
				}
				continue
			}
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestMissing") ||
				!strings.Contains(string(out), c.fail) || len(skips) != 0 {
				t.Errorf("%s, in CI: %v\n%s\nskip log %q; want a failure saying %q", c.helper, err, out, skips, c.fail)
			}
		}
	}
}
