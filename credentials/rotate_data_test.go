package credentials

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// dyingStore is a key store whose process dies (every write fails) from the write named by dieAt on: a crash
// between the steps of a rotation.
type dyingStore struct {
	SecretStore
	dieAt string // the account whose SetSecret is the first to fail
	dead  bool
}

func (d *dyingStore) SetSecret(account, secret string) error {
	if d.dead || account == d.dieAt {
		d.dead = true
		return errors.New("the process died")
	}
	return d.SecretStore.SetSecret(account, secret)
}

func (d *dyingStore) DeleteSecret(account string) error {
	if d.dead {
		return errors.New("the process died")
	}
	return d.SecretStore.DeleteSecret(account)
}

// openState opens the state store in dir with the data key in keys, as a server does, until the test ends.
func openState(t *testing.T, dir string, keys SecretStore, exclusive bool) *state.Bolt {
	t.Helper()
	st, err := state.Open(dir, state.Options{Keys: StateKeys(keys), Exclusive: exclusive})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func putTokens(t *testing.T, dir string, keys SecretStore, ids ...string) {
	t.Helper()
	st := openState(t, dir, keys, false)
	defer st.Close()
	for _, id := range ids {
		err := st.PutSandbox(state.SandboxRecord{ID: id, Owner: "alice", AccessToken: "envd-token-" + id,
			State: state.StateRunning, Created: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// wantTokens fails unless a server opening dir with keys (as a restarted one would) reads every token.
func wantTokens(t *testing.T, dir string, keys SecretStore, ids ...string) {
	t.Helper()
	st := openState(t, dir, keys, false)
	defer st.Close()
	for _, id := range ids {
		if got, err := st.Sandbox("alice", id); err != nil || got.AccessToken != "envd-token-"+id {
			t.Fatalf("token of %s: %q, %v", id, got.AccessToken, err)
		}
	}
}

func rotateData(t *testing.T, dir string, keys SecretStore) (DataKeyRotation, error) {
	t.Helper()
	st := openState(t, dir, keys, true)
	defer st.Close()
	return RotateDataKey(keys, st)
}

func TestRotateDataKeyReplacesTheKey(t *testing.T) {
	keys, _, _ := newFileStore(t)
	dir := t.TempDir()
	putTokens(t, dir, keys, "sbx1", "sbx2")
	before, _ := keys.Secret(DataKeyAccount)
	done, err := rotateData(t, dir, keys)
	if err != nil || done.Resealed != 2 || done.Finished {
		t.Fatalf("RotateDataKey = %+v, %v", done, err)
	}
	after, _ := keys.Secret(DataKeyAccount)
	if after == before || after == "" {
		t.Fatal("the data key was not replaced")
	}
	if _, err := keys.Secret(NextDataKeyAccount); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the pending key was left behind: %v", err)
	}
	wantTokens(t, dir, keys, "sbx1", "sbx2")
}

// Stopped at either step, every token stays readable to a restarted server, and the next run finishes.
func TestRotateDataKeyCrashBetweenTheSteps(t *testing.T) {
	for _, dieAt := range []string{NextDataKeyAccount, DataKeyAccount} {
		t.Run("dies storing "+dieAt, func(t *testing.T) {
			keys, _, _ := newFileStore(t)
			dir := t.TempDir()
			putTokens(t, dir, keys, "sbx1", "sbx2")
			_, err := rotateData(t, dir, &dyingStore{SecretStore: keys, dieAt: dieAt})
			if err == nil {
				t.Fatal("the rotation reported success although the key store failed")
			}
			if dieAt == DataKeyAccount && !strings.Contains(err.Error(), "run the rotation again") {
				t.Fatalf("the error does not say how to finish: %v", err)
			}
			wantTokens(t, dir, keys, "sbx1", "sbx2")
			putTokens(t, dir, keys, "sbx3") // a server writes meanwhile
			done, err := rotateData(t, dir, keys)
			if err != nil || done.Finished != (dieAt == DataKeyAccount) {
				t.Fatalf("the run after the crash: %+v, %v", done, err)
			}
			if _, err := keys.Secret(NextDataKeyAccount); !errors.Is(err, ErrNotFound) {
				t.Fatalf("the pending key was left behind: %v", err)
			}
			// Only the current key opens the store now.
			wantTokens(t, dir, keys, "sbx1", "sbx2", "sbx3")
			current, _ := keys.Secret(DataKeyAccount)
			only := newMemStore()
			_ = only.SetSecret(DataKeyAccount, current)
			wantTokens(t, dir, only, "sbx1", "sbx2", "sbx3")
		})
	}
}

func TestPendingDataKeyAccountIsNoOwner(t *testing.T) {
	// An owner of that name would overwrite, with `auth login`, the key a stopped rotation sealed the store under.
	if err := CheckOwner(NextDataKeyAccount); !errors.Is(err, ErrOwnerName) {
		t.Fatalf("CheckOwner(%q) = %v, want ErrOwnerName", NextDataKeyAccount, err)
	}
	if err := SetAPIKey(newMemStore(), NextDataKeyAccount, "e2b_0123456789abcdef"); err == nil {
		t.Fatal("an E2B key was stored under the pending data key's account")
	}
}

func TestRotateDataKeyWithoutAKey(t *testing.T) {
	keys, _, _ := newFileStore(t)
	if _, err := rotateData(t, t.TempDir(), keys); err == nil || !strings.Contains(err.Error(), "nothing to rotate") {
		t.Fatalf("rotation with no data key: %v", err)
	}
}

// memStore is a SecretStore in memory.
type memStore map[string]string

func newMemStore() memStore { return memStore{} }

func (m memStore) Secret(account string) (string, error) {
	if v, ok := m[account]; ok {
		return v, nil
	}
	return "", ErrNotFound
}
func (m memStore) SetSecret(account, secret string) error { m[account] = secret; return nil }
func (m memStore) DeleteSecret(account string) error {
	if _, ok := m[account]; !ok {
		return ErrNotFound
	}
	delete(m, account)
	return nil
}
func (m memStore) String() string { return "memory" }
