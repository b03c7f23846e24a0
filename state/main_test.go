package state

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
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
	code := m.Run()
	if pgServer != nil {
		if err := pgServer.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping PostgreSQL:", err)
		}
	}
	os.Exit(code)
}

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, DataKeySize) }

// newFakeClock is an injected clock that tests move by hand.
func newFakeClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

func openTestStore(t testing.TB, dir string, opts Options) *Bolt {
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

func newBoltStore(t testing.TB) (*Bolt, *clocktest.Clock) {
	t.Helper()
	clock := newFakeClock()
	return openTestStore(t, t.TempDir(), Options{Now: clock.Now}), clock
}

// A storeKind makes stores of one kind for the tests every Store must pass.
type storeKind struct {
	name string
	// fresh returns where a new, empty store is: a directory or a database URL.
	fresh func(t testing.TB) string
}

// testStore is a Store and where it is, so that a test can open it again.
type testStore struct {
	Store
	where string
}

// forEachStore runs test against the bbolt store and against the PostgreSQL store (a real server, started once
// for the package; the test is skipped when PostgreSQL is not installed).
func forEachStore(t *testing.T, test func(t *testing.T, k storeKind)) {
	t.Helper()
	for _, k := range storeKinds() {
		t.Run(k.name, func(t *testing.T) { test(t, k) })
	}
}

// forEachStoreB is forEachStore for benchmarks.
func forEachStoreB(b *testing.B, bench func(b *testing.B, k storeKind)) {
	b.Helper()
	for _, k := range storeKinds() {
		b.Run(k.name, func(b *testing.B) { bench(b, k) })
	}
}

func storeKinds() []storeKind {
	return []storeKind{
		{name: "bolt", fresh: func(t testing.TB) string { return t.TempDir() }},
		{name: "postgres", fresh: freshDatabase},
	}
}

// open opens the store at where with the test key unless opts has keys, and closes it when the test ends.
func (k storeKind) open(t testing.TB, where string, opts Options) *testStore {
	t.Helper()
	if opts.Keys == nil {
		opts.Keys = StaticKeySource(testKey(1))
	}
	s, err := OpenAt(where, opts)
	if err != nil {
		t.Fatalf("opening the %s store: %v", k.name, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &testStore{Store: s, where: where}
}

func (k storeKind) newTestStore(t testing.TB) (*testStore, *clocktest.Clock) {
	t.Helper()
	clock := newFakeClock()
	return k.open(t, k.fresh(t), Options{Now: clock.Now}), clock
}

// reopen opens a second Store on s's records, as a restarted server (or another replica) would.
func (k storeKind) reopen(t testing.TB, s *testStore, opts Options) *testStore {
	t.Helper()
	return k.open(t, s.where, opts)
}

var (
	pgOnce   sync.Once
	pgServer *pgtest.Server
	pgErr    error
)

// freshDatabase returns the URL of a new database on the package's PostgreSQL server, starting the server on
// first use (TestMain stops it).
func freshDatabase(t testing.TB) string {
	t.Helper()
	pgOnce.Do(func() { pgServer, pgErr = pgtest.Start() })
	if errors.Is(pgErr, pgtest.ErrNotInstalled) {
		optional.Missing(t, "no PostgreSQL store tests: "+pgErr.Error())
	}
	if pgErr != nil {
		t.Fatalf("starting PostgreSQL: %v", pgErr)
	}
	url, err := pgServer.NewDatabase()
	if err != nil {
		t.Fatalf("creating a database: %v", err)
	}
	return url
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
