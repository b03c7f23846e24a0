package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

const (
	execAllowed = "default_action: deny\nrules:\n  - id: exec\n    when: { target: e2b_exec }\n    then: { decision: allow }\n"
	execDenied  = "default_action: deny\nrules:\n  - id: exec\n    when: { target: e2b_exec }\n    then: { decision: deny  }\n" // padded to the size of execAllowed
	badPolicy   = "default_action: deny\nrules:\n  - id: exec\n    when: { target: e2b_exec }\n    then: { decision: maybe }\n"
)

var execCall = Call{Tool: toolExec, Args: map[string]any{"command": "ls"}}

// writePolicy replaces the file atomically, as editors save, so that a concurrent
// poll never reads half a file.
func writePolicy(t *testing.T, path, src string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestHolderReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, execAllowed)
	h, err := NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Path() != path {
		t.Errorf("Path() = %q", h.Path())
	}
	if got := h.Current().Evaluate(execCall).Action; got != Allow {
		t.Fatalf("initial policy decided %s", got)
	}

	writePolicy(t, path, execDenied)
	if err := h.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := h.Current().Evaluate(execCall).Action; got != Deny {
		t.Fatalf("after reload decided %s, want deny", got)
	}

	// A bad version is refused and the one in force stays.
	before := h.Current()
	writePolicy(t, path, badPolicy)
	err = h.Reload()
	if err == nil || !strings.Contains(err.Error(), path+":5: unknown decision") {
		t.Fatalf("Reload of a bad version: %v", err)
	}
	if h.Current() != before {
		t.Error("a refused version replaced the policy in force")
	}
	// Asked again (another SIGHUP), it is still refused, still reported.
	if err := h.Reload(); err == nil {
		t.Error("second Reload of the same bad version returned nil")
	}

	// A missing file is an error, and the policy stays.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := h.Reload(); err == nil {
		t.Error("Reload of a missing file returned nil")
	}
	if h.Current() != before {
		t.Error("a missing file replaced the policy in force")
	}
}

func TestNewHolderRefusesBadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.yaml")
	writePolicy(t, path, badPolicy)
	if _, err := NewHolder(path); err == nil || !strings.Contains(err.Error(), ":5: unknown decision") {
		t.Errorf("NewHolder(bad) = %v", err)
	}
	if _, err := NewHolder(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("NewHolder(missing) returned nil error")
	}
}

func TestHolderBuiltIn(t *testing.T) {
	h, err := NewHolder("")
	if err != nil {
		t.Fatal(err)
	}
	if h.Current().Name() != DefaultName {
		t.Errorf("holder without a file holds %q", h.Current().Name())
	}
	if err := h.Reload(); err != nil {
		t.Errorf("Reload without a file: %v", err)
	}
	done := make(chan struct{})
	go func() {
		h.Watch(context.Background(), time.Millisecond, nil)
		close(done)
	}()
	waitfor.Recv(t, done, 30*time.Second, "Watch without a file to return")
}

// TestHolderCheck drives Watch's poll step directly, so every transition is checked
// without timing.
func TestHolderCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, execAllowed)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	onError := func(err error) { errs = append(errs, err) }

	// Unchanged: nothing happens.
	first := h.Current()
	h.check(onError)
	if h.Current() != first || len(errs) != 0 {
		t.Fatal("an unchanged file was reloaded or reported")
	}

	// Same size, same modification time, different content: still seen.
	writePolicy(t, path, execDenied)
	if len(execDenied) != len(execAllowed) {
		t.Fatal("test policies must have the same size")
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	h.check(onError)
	if got := h.Current().Evaluate(execCall).Action; got != Deny {
		t.Fatalf("same-size change not picked up: %s", got)
	}

	// A touch without a change does not reload.
	second := h.Current()
	if err := os.Chtimes(path, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	h.check(onError)
	if h.Current() != second {
		t.Error("a touch reloaded the policy")
	}

	// A bad version: reported once, old policy kept.
	writePolicy(t, path, badPolicy)
	h.check(onError)
	h.check(onError)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), ":5: unknown decision") {
		t.Fatalf("bad version reported %d times: %v", len(errs), errs)
	}
	if h.Current() != second {
		t.Error("bad version replaced the policy in force")
	}

	// Removing the file is a new problem, reported once.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	h.check(onError)
	h.check(onError)
	if len(errs) != 2 {
		t.Fatalf("missing file reported %d times in all: %v", len(errs), errs)
	}

	// Fixed: reloaded, and a later problem is reported again.
	writePolicy(t, path, execAllowed)
	h.check(onError)
	if got := h.Current().Evaluate(execCall).Action; got != Allow {
		t.Fatalf("fixed file not reloaded: %s", got)
	}
	writePolicy(t, path, badPolicy)
	h.check(onError)
	if len(errs) != 3 {
		t.Errorf("new bad version after a good one: %d reports", len(errs))
	}
}

func TestHolderWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, execAllowed)
	h, err := NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var errs []error
	done := make(chan struct{})
	go func() {
		h.Watch(ctx, time.Millisecond, func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
		close(done)
	}()

	writePolicy(t, path, execDenied)
	waitfor.Until(t, 30*time.Second, "Watch to load the changed file", func() bool { return h.Current().Evaluate(execCall).Action == Deny })

	writePolicy(t, path, badPolicy)
	waitfor.Until(t, 30*time.Second, "Watch to report the broken file", func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 })
	if got := h.Current().Evaluate(execCall).Action; got != Deny {
		t.Errorf("bad version changed the decision to %s", got)
	}
	mu.Lock()
	if !strings.Contains(errs[0].Error(), ":5: unknown decision") {
		t.Errorf("reported %v", errs[0])
	}
	mu.Unlock()

	cancel()
	waitfor.Recv(t, done, 30*time.Second, "Watch to stop when its context ended")
}

func TestHolderConcurrentUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, path, execAllowed)
	h, err := NewHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if a := h.Current().Evaluate(execCall).Action; a != Allow && a != Deny {
					t.Errorf("decision %q", a)
				}
				if i == 0 {
					_ = h.Reload()
				}
			}
		}()
	}
	for j := range 20 {
		if j%2 == 0 {
			writePolicy(t, path, execDenied)
		} else {
			writePolicy(t, path, execAllowed)
		}
		h.check(nil)
	}
	waitfor.Return(t, time.Minute, "the readers and the reloader", wg.Wait)
}
