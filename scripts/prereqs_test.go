// Package scripts holds the tests of the repository's shell scripts.
package scripts

import (
	"context"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// pathWithout makes a folder of links to every program on this machine's PATH except the named ones, and
// returns it as a PATH, so the script sees a machine where those programs were never installed. Extra programs
// (name → shell script) stand in for the system's own where a test needs a different machine (uname on macOS).
func pathWithout(t *testing.T, drop []string, extra map[string]string) string {
	t.Helper()
	dir := openTempDir(t)
	skip := map[string]bool{}
	for _, name := range drop {
		skip[name] = true
	}
	for name, script := range extra {
		skip[name] = true
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, from := range filepath.SplitList(os.Getenv("PATH") + ":/usr/local/go/bin:/usr/bin:/bin:/usr/sbin:/sbin") {
		if !searchableByAll(from) {
			continue // root's own folders (~/.pyenv/shims): the user nobody, who runs the script, finds nothing there
		}
		entries, _ := os.ReadDir(from)
		for _, e := range entries {
			if skip[e.Name()] {
				continue
			}
			link := filepath.Join(dir, e.Name())
			if _, err := os.Lstat(link); err == nil {
				continue // the first folder on PATH wins, as in a shell
			}
			_ = os.Symlink(filepath.Join(from, e.Name()), link)
		}
	}
	return dir
}

// searchableByAll reports whether every user may look up names in dir: it and each folder above it let others
// search them.
func searchableByAll(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == filepath.Dir(d) {
			return true
		}
	}
}

// runPrereqs runs scripts/prereqs.sh TARGET with the given PATH as an unprivileged user without sudo, and returns
// its exit code and what it printed. A newcomer without rights must be told at once what to run: the script asks
// for nothing, so it fails the test if it reads its standard input (a line is waiting there, and must still be
// there when the script ends). sudo is not on PATH, so no password prompt can come either.
func runPrereqs(t *testing.T, target, path string) (int, string) {
	t.Helper()
	if os.Getuid() != 0 {
		optional.Missing(t, "runs the script as the user nobody, which needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		optional.Skip(t, "no user nobody on this machine")
	}
	script, err := filepath.Abs("prereqs.sh")
	if err != nil {
		t.Fatal(err)
	}
	home := openTempDir(t)
	if err := os.Chmod(home, 0o777); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", "-u", nobody.Username, "--", "/bin/sh", script, target)
	cmd.Env = []string{"PATH=" + path, "HOME=" + home, "GOCACHE=" + filepath.Join(home, "cache"), "GOTOOLCHAIN=local"}
	stdin, answer, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer answer.Close()
	// The line stays open while the script runs: a read of it waits for more rather than ending at EOF.
	const typed = "y\n"
	if _, err := answer.WriteString(typed); err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = stdin
	cmd.WaitDelay = time.Second // a process the script left behind must not hold its output open past the bound
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("prereqs.sh %s did not finish within 30s (it waits for something): %s", target, out)
	}
	// With its only writer closed, the pipe gives what is left in it and ends.
	answer.Close()
	if left, _ := io.ReadAll(stdin); string(left) != typed {
		t.Errorf("prereqs.sh %s read its standard input (%q of %q is left): it must ask for nothing", target, left, typed)
	}
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// openTempDir is a temporary folder the user nobody can reach (t.TempDir's parents are root's alone).
func openTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "e2b-mcp-prereqs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func requireApt(t *testing.T) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		optional.Skip(t, "the commands checked here are apt-get's; this machine has none")
	}
}

// Without bubblewrap and without sudo, the demo stops at once and names the one command that installs it.
func TestPrereqsDemoWithoutBubblewrapNamesTheCommand(t *testing.T) {
	requireApt(t)
	code, out := runPrereqs(t, "demo", pathWithout(t, []string{"bwrap", "sudo"}, nil))
	want := "run: sudo apt-get update && sudo apt-get install -y --no-install-recommends bubblewrap\n"
	if code == 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant it to fail and contain %q", code, out, want)
	}
}

// The tests need more than the demo; every missing package is in the one command, each once.
func TestPrereqsTestNamesEveryMissingPackageOnce(t *testing.T) {
	requireApt(t)
	drop := []string{"sudo", "bwrap", "gnome-keyring-daemon", "secret-tool", "dbus-run-session", "dbus-send", "python3"}
	code, out := runPrereqs(t, "test", pathWithout(t, drop, nil))
	want := "sudo apt-get install -y --no-install-recommends bubblewrap dbus gnome-keyring libsecret-tools python3\n"
	if code == 0 || !strings.Contains(out, want) {
		t.Fatalf("exit %d, output:\n%s\nwant it to fail and contain %q", code, out, want)
	}
}

// With everything there, the script passes without asking for anything.
func TestPrereqsPassWhenAllIsInstalled(t *testing.T) {
	for _, program := range []string{"bwrap", "node", "npm", "dbus-run-session", "gnome-keyring-daemon", "secret-tool"} {
		if _, err := exec.LookPath(program); err != nil {
			optional.Missing(t, program+" is not installed here")
		}
	}
	if code, out := runPrereqs(t, "test", pathWithout(t, []string{"sudo"}, nil)); code != 0 {
		t.Fatalf("exit %d with everything installed:\n%s", code, out)
	}
}

// On macOS the demo says what to do instead of failing inside.
func TestPrereqsDemoOnMacOSSaysWhatToDoInstead(t *testing.T) {
	code, out := runPrereqs(t, "demo", pathWithout(t, nil, map[string]string{"uname": "echo Darwin"}))
	if code == 0 || !strings.Contains(out, "needs Linux") || !strings.Contains(out, "e2b-mcp auth login") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}
