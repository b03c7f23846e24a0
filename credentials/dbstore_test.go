//go:build !windows

// pgtest starts PostgreSQL the Unix way (as another user, in a process group of its own), so these tests are left
// out where it does not build, and the package's other tests still vet there.

package credentials

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
)

func openDatabaseStore(t *testing.T, db, mk string) *DatabaseStore {
	t.Helper()
	s, err := OpenDatabaseStore(db, mk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// dumpSecrets reads every byte the database holds for the key store, behind its back.
func dumpSecrets(t *testing.T, db string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var dump string
	if err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(account || encode(sealed, 'escape'), ','), '') ||
		(SELECT string_agg(encode(value, 'escape'), ',') FROM e2b_mcp_meta) FROM e2b_mcp_secrets`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	return dump
}

// The key store in the database: what one host stores, another host (its own master key file with the same key)
// reads; sealed in the database, and sealed exactly as the key store file seals, so that the file's entries
// open from the database.
func TestDatabaseStoreSharedSealedAndBoundToItsOwner(t *testing.T) {
	pg, db := pgtest.Database(t)
	mk, key := masterKey(t, hexForm)
	hostA := openDatabaseStore(t, db, mk)
	mk2 := filepath.Join(t.TempDir(), "master.key")
	if err := os.WriteFile(mk2, key, 0o600); err != nil { // the same key, raw, on another host
		t.Fatal(err)
	}
	hostB := openDatabaseStore(t, db, mk2)

	const alice, bob = "e2b_0123456789abcdef0123456789abcdef01234567", "e2b_fedcba9876543210fedcba9876543210fedcba98"
	if err := SetAPIKey(hostA, "alice", alice); err != nil {
		t.Fatal(err)
	}
	if err := SetAPIKey(hostB, "bob", bob); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s          SecretStore
		owner, key string
	}{{hostB, "alice", alice}, {hostA, "bob", bob}} {
		if got, err := APIKey(c.s, c.owner); err != nil || got != c.key {
			t.Fatalf("%s's key from the other host: %v", c.owner, err)
		}
	}
	if dump := dumpSecrets(t, db); strings.Contains(dump, alice) || strings.Contains(dump, bob) || strings.Contains(dump, string(key)) {
		t.Fatal("the database holds a key in the clear")
	}
	if !strings.Contains(hostA.String(), "key store in postgres://") || strings.Contains(hostA.String(), pg.Password()) {
		t.Fatalf("String() = %q", hostA.String())
	}

	// Someone who can write to the database copies alice's sealed key into bob's entry: it does not open as bob's.
	if err := pg.Exec(db, `UPDATE e2b_mcp_secrets SET sealed = (SELECT sealed FROM e2b_mcp_secrets WHERE account = 'alice')
		WHERE account = 'bob'`); err != nil {
		t.Fatal(err)
	}
	got, err := APIKey(hostB, "bob")
	wantErr(t, err, ErrKeyStore, `entry "bob"`, "does not open", "copied")
	if got != "" || strings.Contains(err.Error(), alice) {
		t.Fatalf("bob's entry holding alice's sealed key opened: %q, %v", got, err)
	}

	// The entries of a key store file (sealed under the same master key) move into the database as they are
	// sealed, without replacing what the database holds: one way of sealing.
	path := filepath.Join(t.TempDir(), "state", "keys.json")
	fs, err := OpenFileStore(path, mk)
	if err != nil {
		t.Fatal(err)
	}
	for account, secret := range map[string]string{"carol": "carol's secret", "alice": "an older key of alice"} {
		if err := fs.SetSecret(account, secret); err != nil {
			t.Fatal(err)
		}
	}
	if added, err := hostA.ImportFile(path); err != nil || strings.Join(added, ",") != "carol" {
		t.Fatalf("importing the file: %v, %v; want carol only", added, err)
	}
	if got, err := hostB.Secret("carol"); err != nil || got != "carol's secret" {
		t.Fatalf("the file's entry from the database: %q, %v", got, err)
	}
	if got, err := hostB.Secret("alice"); err != nil || got != alice {
		t.Fatalf("alice's key after the import: %v", err)
	}
	if _, err := hostA.ImportFile(filepath.Join(t.TempDir(), "keys.json")); err != nil {
		t.Fatalf("importing a file that does not exist: %v", err)
	}

	if err := DeleteAPIKey(hostB, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := APIKey(hostA, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("alice's key after logout on the other host: %v", err)
	}
	if err := DeleteAPIKey(hostA, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("a second logout: %v", err)
	}
}

// The key store in the database asks the database at every read: a change made on another host is seen at the
// next read.
func TestDatabaseStoreFollowsAnotherHost(t *testing.T) {
	_, db := pgtest.Database(t)
	mk, _ := masterKey(t, hexForm)
	followsAnotherWriter(t, openDatabaseStore(t, db, mk), openDatabaseStore(t, db, mk), func() {})
}

// A master key that is not the one the database's store was sealed under is refused at open, naming its file,
// before anything is read or written.
func TestDatabaseStoreWrongMasterKey(t *testing.T) {
	_, db := pgtest.Database(t)
	mk, _ := masterKey(t, hexForm)
	s := openDatabaseStore(t, db, mk)
	if err := s.SetSecret("alice", "secret"); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(other, []byte(strings.Repeat("ab", MasterKeySize)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := OpenDatabaseStore(db, other)
	wantErr(t, err, ErrMasterKey, other, "does not open")
	_, err = OpenDatabaseStore(db, filepath.Join(t.TempDir(), "missing.key"))
	wantErr(t, err, ErrMasterKey, "missing.key", "does not exist")
	if got, err := s.Secret("alice"); err != nil || got != "secret" {
		t.Fatalf("after a wrong key was tried: %q, %v", got, err)
	}
}

// Rotating the master key of the key store in the database: every entry sealed again under the new key in one
// transaction; a replica still holding the old key then fails, naming it, and writes nothing; an entry that
// does not open stops the rotation with nothing changed.
func TestDatabaseStoreRotation(t *testing.T) {
	pg, db := pgtest.Database(t)
	oldKey, _ := masterKey(t, hexForm)
	s := openDatabaseStore(t, db, oldKey)
	stale := openDatabaseStore(t, db, oldKey) // another replica, not restarted
	for _, a := range []string{"alice", "bob"} {
		if err := s.SetSecret(a, a+"'s secret"); err != nil {
			t.Fatal(err)
		}
	}
	newKey := filepath.Join(t.TempDir(), "new.key")
	if err := os.WriteFile(newKey, []byte(strings.Repeat("cd", MasterKeySize)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := RotateMasterKey(s, oldKey)
	wantErr(t, err, ErrMasterKey, "same key")

	// bob's entry is damaged (alice's sealed value copied over it): nothing is re-sealed.
	if err := pg.Exec(db, `UPDATE e2b_mcp_secrets SET sealed = (SELECT sealed FROM e2b_mcp_secrets WHERE account = 'alice')
		WHERE account = 'bob'`); err != nil {
		t.Fatal(err)
	}
	_, err = RotateMasterKey(s, newKey)
	wantErr(t, err, ErrKeyStore, `entry "bob"`, "nothing was re-sealed")
	if got, err := stale.Secret("alice"); err != nil || got != "alice's secret" {
		t.Fatalf("after a refused rotation, under the old key: %q, %v", got, err)
	}
	if err := s.SetSecret("bob", "bob's secret"); err != nil {
		t.Fatal(err)
	}

	if n, err := RotateMasterKey(s, newKey); err != nil || n != 2 {
		t.Fatalf("rotating: %d, %v", n, err)
	}
	if got, err := s.Secret("bob"); err != nil || got != "bob's secret" {
		t.Fatalf("after the rotation: %q, %v", got, err)
	}
	if got, err := openDatabaseStore(t, db, newKey).Secret("alice"); err != nil || got != "alice's secret" {
		t.Fatalf("a replica started with the new key: %q, %v", got, err)
	}
	_, err = stale.Secret("alice")
	wantErr(t, err, ErrMasterKey, oldKey, "rotate-master")
	wantErr(t, stale.SetSecret("carol", "written under the old key"), ErrMasterKey, oldKey)
	if _, err := s.Secret("carol"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a replica with the old key wrote an entry: %v", err)
	}
	_, err = OpenDatabaseStore(db, oldKey)
	wantErr(t, err, ErrMasterKey, oldKey, "does not open")
}
