package optional

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSkipIsRecorded(t *testing.T) {
	log := filepath.Join(t.TempDir(), "skips")
	t.Setenv(LogEnv, log)
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
