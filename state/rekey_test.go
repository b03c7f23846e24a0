package state

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// rotatedDump is what lies at rest in the store: the bbolt file's bytes, or the sandboxes table as pg_dump
// would see its text.
func rotatedDump(t *testing.T, k storeKind, s *testStore) []byte {
	t.Helper()
	if k.name == "bolt" {
		return readFile(t, statePath(s.where))
	}
	return []byte(queryValue[string](t, s.where, "SELECT string_agg(record::text, '') FROM e2b_mcp_sandboxes"))
}

func TestRotateDataKeyResealsEveryToken(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		for _, id := range []string{"sbx1", "sbx2", "sbx3"} {
			if err := s.PutSandbox(sampleSandbox("alice", id, "main", clock.Now())); err != nil {
				t.Fatal(err)
			}
		}
		bare := sampleSandbox("bob", "sbx4", "main", clock.Now())
		bare.AccessToken = ""
		if err := s.PutSandbox(bare); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Store.(Rekeyer).SealedUnder(testKey(1)); err != nil || !ok {
			t.Fatalf("SealedUnder(old key) before = %v, %v", ok, err)
		}
		n, err := s.Store.(Rekeyer).RotateDataKey(testKey(2))
		if err != nil || n != 3 {
			t.Fatalf("RotateDataKey = %d, %v; want 3 tokens", n, err)
		}
		if ok, err := s.Store.(Rekeyer).SealedUnder(testKey(1)); err != nil || ok {
			t.Fatalf("SealedUnder(old key) after = %v, %v", ok, err)
		}
		if dump := rotatedDump(t, k, s); bytes.Contains(dump, []byte("envd-token-")) {
			t.Fatal("a token is in the clear after the rotation")
		}
		fresh := k.reopen(t, s, Options{Keys: StaticKeySource(testKey(2))})
		for _, id := range []string{"sbx1", "sbx2", "sbx3"} {
			if got, err := fresh.Sandbox("alice", id); err != nil || got.AccessToken != "envd-token-"+id {
				t.Fatalf("under the new key: %q, %v", got.AccessToken, err)
			}
		}
		if got, err := fresh.Sandbox("bob", "sbx4"); err != nil || got.AccessToken != "" || got.Title != bare.Title {
			t.Fatalf("the record without a token: %+v, %v", got, err)
		}
		old := k.reopen(t, s, Options{Keys: StaticKeySource(testKey(1))})
		if _, err := old.Sandbox("alice", "sbx1"); err == nil || !strings.Contains(err.Error(), "not the one") {
			t.Fatalf("the old key still opens a token: %v", err)
		}
	})
}

// A process (a replica, or a second local server) that read the old key before the rotation must not seal a
// token under it afterwards: nothing would open that token again.
func TestStaleDataKeyRefusedAfterRotation(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		stale, clock := k.newTestStore(t)
		if err := stale.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		if _, err := stale.Sandbox("alice", "sbx1"); err != nil { // the key is cached now
			t.Fatal(err)
		}
		rotator := k.reopen(t, stale, Options{})
		if _, err := rotator.Store.(Rekeyer).RotateDataKey(testKey(2)); err != nil {
			t.Fatal(err)
		}
		err := stale.PutSandbox(sampleSandbox("alice", "sbx2", "main", clock.Now()))
		if !errors.Is(err, ErrDataKeyChanged) || !strings.Contains(err.Error(), "restart") {
			t.Fatalf("a write under the old key: %v, want ErrDataKeyChanged saying to restart", err)
		}
		_, err = stale.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error { r.Steps++; return nil })
		if !errors.Is(err, ErrDataKeyChanged) {
			t.Fatalf("an update under the old key: %v", err)
		}
		if _, err := stale.Sandbox("alice", "sbx1"); !errors.Is(err, ErrDataKeyChanged) {
			t.Fatalf("a read under the old key: %v", err)
		}
		fresh := k.reopen(t, stale, Options{Keys: StaticKeySource(testKey(2))})
		if _, err := fresh.Sandbox("alice", "sbx2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the refused write left a record: %v", err)
		}
		if got, err := fresh.Sandbox("alice", "sbx1"); err != nil || got.Steps != 3 {
			t.Fatalf("sbx1 under the new key: %+v, %v", got, err)
		}
	})
}

// pendingKeys is a key source in the middle of a rotation: DataKey is the old key, the pending key the new one.
type pendingKeys struct{ current, pending []byte }

func (p pendingKeys) DataKey() ([]byte, error)        { return bytes.Clone(p.current), nil }
func (p pendingKeys) PendingDataKey() ([]byte, error) { return bytes.Clone(p.pending), nil }

func TestPendingDataKeyOpensAStoreRotatedToIt(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		// Before the rotation the current key is the one; after it, the pending one.
		both := k.reopen(t, s, Options{Keys: pendingKeys{current: testKey(1), pending: testKey(2)}})
		if got, err := both.Sandbox("alice", "sbx1"); err != nil || got.AccessToken != "envd-token-sbx1" {
			t.Fatalf("before: %q, %v", got.AccessToken, err)
		}
		if _, err := s.Store.(Rekeyer).RotateDataKey(testKey(2)); err != nil {
			t.Fatal(err)
		}
		both = k.reopen(t, s, Options{Keys: pendingKeys{current: testKey(1), pending: testKey(2)}})
		if got, err := both.Sandbox("alice", "sbx1"); err != nil || got.AccessToken != "envd-token-sbx1" {
			t.Fatalf("after: %q, %v", got.AccessToken, err)
		}
		if err := both.PutSandbox(sampleSandbox("alice", "sbx2", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		fresh := k.reopen(t, s, Options{Keys: StaticKeySource(testKey(2))})
		if got, err := fresh.Sandbox("alice", "sbx2"); err != nil || got.AccessToken != "envd-token-sbx2" {
			t.Fatalf("written under the pending key: %q, %v", got.AccessToken, err)
		}
		// A pending key that is not the store's does not open it either.
		other := k.reopen(t, s, Options{Keys: pendingKeys{current: testKey(1), pending: testKey(3)}})
		if _, err := other.Sandbox("alice", "sbx1"); err == nil {
			t.Fatal("a wrong pending key opened the store")
		}
	})
}

func TestExclusiveOpenRefusedWhileTheStoreIsOpen(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{})
	_, err := Open(dir, Options{Keys: StaticKeySource(testKey(1)), Exclusive: true})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "stop every server") {
		t.Fatalf("exclusive open beside an open store: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ex, err := Open(dir, Options{Keys: StaticKeySource(testKey(1)), Exclusive: true})
	if err != nil {
		t.Fatalf("exclusive open once the store is closed: %v", err)
	}
	t.Cleanup(func() { _ = ex.Close() })
	if _, err := Open(dir, Options{Keys: StaticKeySource(testKey(1)), Exclusive: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("a second exclusive open: %v", err)
	}
	// A process starting meanwhile waits for the lock timeout, no longer, and says why.
	_, err = Open(dir, Options{Keys: StaticKeySource(testKey(1)), LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "rotate-data") {
		t.Fatalf("an open beside an exclusive one: %v, want ErrBusy", err)
	}
	if err := ex.Close(); err != nil {
		t.Fatal(err)
	}
	openTestStore(t, dir, Options{LockTimeout: 100 * time.Millisecond})
}

// Writers racing a rotation either land before it (and are sealed again) or are refused: no token is left
// sealed under the old key.
func TestRotationRacingWriters(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if err := s.PutSandbox(sampleSandbox("alice", "sbx0", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		const writers, each = 3, 15
		var wg sync.WaitGroup
		for w := range writers {
			stale := k.reopen(t, s, Options{Now: clock.Now})
			if _, err := stale.Sandbox("alice", "sbx0"); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					err := stale.PutSandbox(sampleSandbox("alice", fmt.Sprintf("w%d-%d", w, i), "main", clock.Now()))
					if err != nil && !errors.Is(err, ErrDataKeyChanged) {
						t.Errorf("a racing write: %v", err)
						return
					}
				}
			}()
		}
		rotator := k.reopen(t, s, Options{})
		if _, err := rotator.Store.(Rekeyer).RotateDataKey(testKey(2)); err != nil {
			t.Fatal(err)
		}
		waitfor.Return(t, time.Minute, "the writers racing the key rotation", wg.Wait)
		fresh := k.reopen(t, s, Options{Keys: StaticKeySource(testKey(2))})
		all, err := fresh.AllSandboxes()
		if err != nil {
			t.Fatalf("reading every record under the new key: %v", err)
		}
		for _, r := range all {
			if r.AccessToken != "envd-token-"+r.ID {
				t.Fatalf("sandbox %s: token %q", r.ID, r.AccessToken)
			}
		}
	})
}
