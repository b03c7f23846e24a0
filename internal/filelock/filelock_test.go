package filelock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Helper processes: the test binary re-executes itself with helperEnv set to a mode, and TestMain runs that mode
// instead of the tests, so that a lock is held by a real second process.
const (
	helperEnv     = "E2B_MCP_FILELOCK_TEST_HELPER"
	helperPathEnv = "E2B_MCP_FILELOCK_TEST_PATH"
)

// blockedFor is how long a lock call must go on waiting to count as blocked. A broken lock returns within
// microseconds, so a short wait is enough, and a slow machine can only make the check pass, never fail.
const blockedFor = 50 * time.Millisecond

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode, os.Getenv(helperPathEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper is the second process. "hold" and "hold-shared" take the lock, say "locked" and keep it until stdin is
// closed; "try" prints the result of TryLock.
func runHelper(mode, path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	switch mode {
	case "hold", "hold-shared":
		take := Lock
		if mode == "hold-shared" {
			take = RLock
		}
		if err := take(f); err != nil {
			return err
		}
		fmt.Println("locked")
		if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
			return err
		}
		return Unlock(f)
	case "try":
		ok, err := TryLock(f)
		if err != nil {
			return err
		}
		fmt.Println(ok)
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// lockPath returns a lock file in a fresh directory, skipping the test where this platform has no locks.
func lockPath(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := TryLock(f); errors.Is(err, ErrUnsupported) {
		optional.Skip(t, err.Error())
	} else if err != nil {
		t.Fatal(err)
	}
	if err := Unlock(f); err != nil {
		t.Fatal(err)
	}
	return path
}

func openFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// inBackground runs a lock call on its own goroutine; the channel gets its result.
func inBackground(take func(*os.File) error, f *os.File) <-chan error {
	done := make(chan error, 1)
	go func() { done <- take(f) }()
	return done
}

func expectBlocked(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while the lock was held", what, err)
	case <-time.After(blockedFor):
	}
}

func expectAcquired(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still waiting 10s after the lock was released", what)
	}
}

func expectTry(t *testing.T, f *os.File, want bool) {
	t.Helper()
	ok, err := TryLock(f)
	if err != nil || ok != want {
		t.Fatalf("TryLock = %v, %v; want %v, nil", ok, err, want)
	}
}

func TestExclusiveLockBlocksEveryOther(t *testing.T) {
	for _, tc := range []struct {
		name string
		take func(*os.File) error
	}{
		{"Lock", Lock},
		{"RLock", RLock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := lockPath(t)
			holder, waiter, prober := openFile(t, path), openFile(t, path), openFile(t, path)
			if err := Lock(holder); err != nil {
				t.Fatal(err)
			}
			expectTry(t, prober, false)
			done := inBackground(tc.take, waiter)
			expectBlocked(t, done, tc.name)
			if err := Unlock(holder); err != nil {
				t.Fatal(err)
			}
			expectAcquired(t, done, tc.name)
			expectTry(t, prober, false) // now held by the waiter
			if err := Unlock(waiter); err != nil {
				t.Fatal(err)
			}
			expectTry(t, prober, true)
		})
	}
}

func TestSharedLocksGoSideBySide(t *testing.T) {
	path := lockPath(t)
	r1, r2, w, prober := openFile(t, path), openFile(t, path), openFile(t, path), openFile(t, path)
	if err := RLock(r1); err != nil {
		t.Fatal(err)
	}
	expectAcquired(t, inBackground(RLock, r2), "second RLock")
	expectTry(t, prober, false)

	done := inBackground(Lock, w)
	expectBlocked(t, done, "Lock against two shared locks")
	if err := Unlock(r1); err != nil {
		t.Fatal(err)
	}
	expectBlocked(t, done, "Lock against one shared lock")
	if err := Unlock(r2); err != nil {
		t.Fatal(err)
	}
	expectAcquired(t, done, "Lock")
}

func TestTryLock(t *testing.T) {
	path := lockPath(t)
	a, b := openFile(t, path), openFile(t, path)
	expectTry(t, a, true)
	expectTry(t, b, false)
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	expectTry(t, b, true)
	if err := Unlock(b); err != nil {
		t.Fatal(err)
	}
}

func TestCloseReleases(t *testing.T) {
	path := lockPath(t)
	a, b := openFile(t, path), openFile(t, path)
	if err := Lock(a); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	expectAcquired(t, inBackground(Lock, b), "Lock after the holder closed its file")
}

func TestClosedFileIsAnError(t *testing.T) {
	path := lockPath(t)
	f := openFile(t, path)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Lock":    func() error { return Lock(f) },
		"RLock":   func() error { return RLock(f) },
		"TryLock": func() error { _, err := TryLock(f); return err },
		"Unlock":  func() error { return Unlock(f) },
	} {
		if err := call(); err == nil {
			t.Errorf("%s on a closed file returned nil", name)
		}
	}
}

// child is a helper process holding a lock.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *bytes.Buffer
}

func helperCommand(mode, path string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// A race-enabled binary waits a second on exit unless told otherwise.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperPathEnv+"="+path, "GORACE="+gorace)
	return cmd
}

// startHolder starts a helper that takes the lock (mode "hold" or "hold-shared") and returns once it holds it.
func startHolder(t *testing.T, path, mode string) *child {
	t.Helper()
	c := &child{cmd: helperCommand(mode, path), stderr: new(bytes.Buffer)}
	c.cmd.Stderr = c.stderr
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		t.Fatalf("helper said %q (%v), stderr: %s", line, err, c.stderr)
	}
	return c
}

// release has the helper unlock and exit.
func (c *child) release(t *testing.T) {
	t.Helper()
	_ = c.stdin.Close()
	var err error
	waitfor.Return(t, time.Minute, "the helper to unlock and exit", func() { err = c.cmd.Wait() })
	if err != nil {
		t.Fatalf("helper: %v, stderr: %s", err, c.stderr)
	}
}

// tryInChild reports what TryLock says in another process.
func tryInChild(t *testing.T, path string) bool {
	t.Helper()
	out, err := helperCommand("try", path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helper: %v, stderr: %s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	switch s := strings.TrimSpace(string(out)); s {
	case "true":
		return true
	case "false":
		return false
	default:
		t.Fatalf("helper printed %q", s)
		return false
	}
}

func TestAcrossProcesses(t *testing.T) {
	t.Run("other process holds it exclusively", func(t *testing.T) {
		path := lockPath(t)
		c := startHolder(t, path, "hold")
		f := openFile(t, path)
		expectTry(t, f, false)
		done := inBackground(RLock, f)
		expectBlocked(t, done, "RLock")
		c.release(t)
		expectAcquired(t, done, "RLock")
	})
	t.Run("this process holds it", func(t *testing.T) {
		path := lockPath(t)
		f := openFile(t, path)
		for _, take := range []func(*os.File) error{Lock, RLock} {
			if err := take(f); err != nil {
				t.Fatal(err)
			}
			if tryInChild(t, path) {
				t.Fatal("another process took the lock while this one held it")
			}
			if err := Unlock(f); err != nil {
				t.Fatal(err)
			}
		}
		if !tryInChild(t, path) {
			t.Fatal("another process could not take the lock after it was released")
		}
	})
	t.Run("shared in both", func(t *testing.T) {
		path := lockPath(t)
		c := startHolder(t, path, "hold-shared")
		r, w := openFile(t, path), openFile(t, path)
		expectAcquired(t, inBackground(RLock, r), "RLock beside another process's shared lock")
		expectTry(t, w, false)
		done := inBackground(Lock, w)
		if err := Unlock(r); err != nil {
			t.Fatal(err)
		}
		expectBlocked(t, done, "Lock against another process's shared lock")
		c.release(t)
		expectAcquired(t, done, "Lock")
	})
	t.Run("holder dies", func(t *testing.T) {
		path := lockPath(t)
		c := startHolder(t, path, "hold")
		f := openFile(t, path)
		done := inBackground(Lock, f)
		expectBlocked(t, done, "Lock")
		if err := c.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		expectAcquired(t, done, "Lock after the holding process was killed")
	})
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%s): %v", dir, err)
	}
}

func TestTryRLock(t *testing.T) {
	path := lockPath(t)
	a, b, c := openFile(t, path), openFile(t, path), openFile(t, path)
	for _, f := range []*os.File{a, b} {
		if ok, err := TryRLock(f); err != nil || !ok {
			t.Fatalf("TryRLock beside shared locks = %v, %v; want true", ok, err)
		}
	}
	expectTry(t, c, false) // no exclusive lock beside shared ones
	for _, f := range []*os.File{a, b} {
		if err := Unlock(f); err != nil {
			t.Fatal(err)
		}
	}
	expectTry(t, c, true)
	if ok, err := TryRLock(a); err != nil || ok {
		t.Fatalf("TryRLock beside an exclusive lock = %v, %v; want false", ok, err)
	}
}
