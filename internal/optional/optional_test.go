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

// helperEnv makes the test binary, run again by TestMissing, the test of a half whose PostgreSQL is missing.
const helperEnv = "E2B_MCP_OPTIONAL_HELPER"

// What the suite provides itself fails its test in CI and names what is missing; elsewhere it is a recorded skip.
func TestMissing(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		Missing(t, "PostgreSQL is not installed")
		t.Fatal("the test went on after Missing")
	}
	for _, ci := range []string{"", "1"} {
		log := filepath.Join(t.TempDir(), "skips")
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMissing$", "-test.v")
		cmd.Env = append(os.Environ(), helperEnv+"=1", CIEnv+"="+ci, LogEnv+"="+log)
		out, err := cmd.CombinedOutput()
		skips, _ := os.ReadFile(log)
		if ci == "" {
			if err != nil || !strings.Contains(string(out), "--- SKIP: TestMissing") ||
				string(skips) != "TestMissing: PostgreSQL is not installed; `make test` provides it\n" {
				t.Errorf("outside CI: %v\n%s\nskip log %q; want a recorded skip", err, out, skips)
			}
			continue
		}
		if err == nil || !strings.Contains(string(out), "--- FAIL: TestMissing") ||
			!strings.Contains(string(out), "PostgreSQL is not installed (CI must provide it") || len(skips) != 0 {
			t.Errorf("in CI: %v\n%s\nskip log %q; want a failure naming PostgreSQL", err, out, skips)
		}
	}
}
