package state

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helper processes: the test binary re-executes itself with helperEnv set to a mode, and TestMain runs that mode
// instead of the tests. Crash and multi-process tests need a real second process holding its own file handles.
const (
	helperEnv    = "E2B_MCP_STATE_TEST_HELPER"
	helperDirEnv = "E2B_MCP_STATE_TEST_DIR"
	helperArgEnv = "E2B_MCP_STATE_TEST_ARG"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode, os.Getenv(helperDirEnv), os.Getenv(helperArgEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, DataKeySize) }

// fakeClock is an injected clock that tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openTestStore(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	if opts.Keys == nil {
		opts.Keys = StaticKeySource(testKey(1))
	}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTestStore(t testing.TB) (*Store, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	return openTestStore(t, t.TempDir(), Options{Now: clock.Now}), clock
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantErr fails unless err is non-nil and its text contains every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func statePath(dir string) string { return filepath.Join(dir, FileName) }
