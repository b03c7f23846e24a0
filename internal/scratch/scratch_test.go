package scratch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

const childEnv = "SCRATCH_TEST_CHILD"

// TestMain lets the test binary play a process that makes a directory and then lives until it is killed.
func TestMain(m *testing.M) {
	if prefix := os.Getenv(childEnv); prefix != "" {
		d, err := New(prefix)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString(d.Path + "\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startChild starts a process that makes a directory under parent and holds it; it returns the process and
// the directory.
func startChild(t *testing.T, parent, prefix string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+prefix, "TMPDIR="+parent)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child made no directory: %v", err)
	}
	return cmd, line[:len(line)-1]
}

func TestSweepRemovesWhatAKilledProcessLeftAndSparesTheLiving(t *testing.T) {
	parent := t.TempDir()
	const prefix = "scratch-test-"
	killed, leftover := startChild(t, parent, prefix)
	_, alive := startChild(t, parent, prefix)
	if err := killed.Process.Kill(); err != nil { // SIGKILL: no chance to clean up
		t.Fatal(err)
	}
	killed.Wait()

	// Not a directory of New's (no lock file), a symbolic link to one, and another prefix: all left alone.
	foreign := filepath.Join(parent, prefix+"foreign")
	if err := os.Mkdir(foreign, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, prefix+"link")
	if err := os.Symlink(leftover, link); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); err != nil {
		t.Fatalf("the killed process's directory is not there to sweep: %v", err)
	}

	// Within the grace period nothing goes, since a directory that young may not be locked yet.
	if got := Sweep(parent, prefix, time.Now()); len(got) != 0 {
		t.Fatalf("swept young directories: %v", got)
	}
	got := Sweep(parent, prefix, time.Now().Add(time.Minute))
	if !slices.Equal(got, []string{leftover}) {
		t.Fatalf("swept %v, want only the killed process's %s", got, leftover)
	}
	for _, kept := range []string{alive, foreign, link} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("%s was removed: %v", kept, err)
		}
	}
}

func TestNewAndRemove(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, err := New("scratch-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Fatalf("%s is still there: %v", d.Path, err)
	}
}
