package state

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// writeV1File writes a schema-1 store the way version 1 lays it out, by hand, so that a change of the on-disk
// format that would strand existing users' files fails this test.
func writeV1File(t *testing.T, dir string, key []byte) {
	t.Helper()
	db, err := bolt.Open(statePath(dir), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	sealed := func(plain, ad string) []byte {
		nonce := bytes.Repeat([]byte{9}, aead.NonceSize())
		return aead.Seal(nonce, nonce, []byte(plain), []byte(ad))
	}
	put := func(tx *bolt.Tx, bucket, key string, value any) {
		raw, ok := value.(string)
		if !ok {
			b, err := json.Marshal(value)
			if err != nil {
				t.Fatal(err)
			}
			raw = string(b)
		}
		b, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Put([]byte(key), []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	err = db.Update(func(tx *bolt.Tx) error {
		put(tx, "meta", "application", "e2b-mcp state")
		put(tx, "meta", "schema", "1")
		put(tx, "meta", "key_check", string(sealed("e2b-mcp data key check", "e2b-mcp/key-check")))
		put(tx, "owners", "alice", `{"created":"2026-01-01T00:00:00Z"}`)
		put(tx, "sessions", "alice\x00main",
			`{"created":"2026-01-01T00:00:00Z","last_used":"2026-01-02T00:00:00Z","lease_expires":"2026-01-02T01:00:00Z","lapsed":true}`)
		put(tx, "sandboxes", "alice\x00sbx1", map[string]any{
			"session": "main", "title": "demo", "template": "base", "domain": "e2b.app", "envd_version": "0.2.0",
			"access_token_sealed": sealed("tok-1", "e2b-mcp/sandbox-token\x00alice\x00sbx1"),
			"state":               "paused", "gone_reason": "", "created": "2026-01-01T00:00:01Z", "timeout_seconds": 600,
			"steps": 7, "checkpoint": map[string]any{"every_steps": 3, "on_pause": true},
		})
		put(tx, "checkpoints", "alice\x00cp1",
			`{"session":"main","sandbox_id":"sbx1","snapshot_id":"snap-1","name":"before","step":5,"created":"2026-01-01T00:00:02Z"}`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func v1Records() (Session, SandboxRecord, Checkpoint) {
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return Session{Owner: "alice", Name: "main", Created: day, LastUsed: day.Add(24 * time.Hour),
			LeaseExpires: day.Add(25 * time.Hour), Lapsed: true},
		SandboxRecord{ID: "sbx1", Owner: "alice", Session: "main", Title: "demo", Template: "base", Domain: "e2b.app",
			EnvdVersion: "0.2.0", AccessToken: "tok-1", State: StatePaused, Created: day.Add(time.Second),
			TimeoutSeconds: 600, Steps: 7, Checkpoint: &CheckpointPolicy{EverySteps: 3, OnPause: true}},
		Checkpoint{ID: "cp1", Owner: "alice", Session: "main", SandboxID: "sbx1", SnapshotID: "snap-1", Name: "before",
			Step: 5, Created: day.Add(2 * time.Second)}
}

func TestV1FileIsRead(t *testing.T) {
	dir := t.TempDir()
	writeV1File(t, dir, testKey(1))
	s := openTestStore(t, dir, Options{})
	wantSession, wantSandbox, wantCheckpoint := v1Records()
	sessions, err := s.Sessions()
	if err != nil || len(sessions) != 1 || !sameSession(sessions[0], wantSession) {
		t.Fatalf("Sessions = %+v, %v; want [%+v]", sessions, err, wantSession)
	}
	if got, err := s.Sandbox("alice", "sbx1"); err != nil || !reflect.DeepEqual(got, wantSandbox) {
		t.Fatalf("Sandbox = %+v, %v; want %+v", got, err, wantSandbox)
	}
	if got, err := s.Checkpoint("alice", "cp1"); err != nil || !reflect.DeepEqual(got, wantCheckpoint) {
		t.Fatalf("Checkpoint = %+v, %v; want %+v", got, err, wantCheckpoint)
	}
	// Version 2 added the tasks.
	task := sampleTask("alice", "task1", time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC))
	if err := s.PutTask(task); err != nil {
		t.Fatalf("a task in a file migrated from version 1: %v", err)
	}
	if version := schemaOf(t, statePath(dir)); version != "4" {
		t.Fatalf("schema after opening a version 1 file = %q, want 4", version)
	}
}

// A v2 for testing the migration machinery: templates gain a registry prefix.
func prefixTemplates(tx *bolt.Tx) error {
	b := tx.Bucket([]byte(bucketSandboxes))
	return b.ForEach(func(k, v []byte) error {
		var rec map[string]any
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		rec["template"] = "registry/" + rec["template"].(string)
		out, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put(k, out)
	})
}

func TestV1FileMigratesToV2(t *testing.T) {
	dir := t.TempDir()
	writeV1File(t, dir, testKey(1))
	calls := 0
	v2 := []migration{func(tx *bolt.Tx) error { calls++; return prefixTemplates(tx) }}
	opts := Options{Keys: StaticKeySource(testKey(1))}

	s, err := open(dir, opts, v2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Sandbox("alice", "sbx1")
	if err != nil || got.Template != "registry/base" || got.AccessToken != "tok-1" {
		t.Fatalf("migrated sandbox = %+v, %v", got, err)
	}
	if version := schemaOf(t, s.Path()); version != "2" {
		t.Fatalf("schema after migration = %q, want 2", version)
	}
	if _, err := open(dir, opts, v2); err != nil || calls != 1 {
		t.Fatalf("reopening at v2: %v, migration ran %d times; want once", err, calls)
	}

	// The version-1 build refuses the migrated file and leaves it alone.
	before := readFile(t, s.Path())
	_, err = open(dir, opts, nil)
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("v1 Open of a v2 file: %v, want ErrUnusable", err)
	}
	wantErr(t, err, s.Path(), "schema version 2, newer than the 1")
	if !bytes.Equal(before, readFile(t, s.Path())) {
		t.Fatal("the refused file was modified")
	}
}

func TestFailedMigrationLeavesV1(t *testing.T) {
	dir := t.TempDir()
	writeV1File(t, dir, testKey(1))
	failing := []migration{func(tx *bolt.Tx) error {
		if err := prefixTemplates(tx); err != nil {
			return err
		}
		return errors.New("disk says no")
	}}
	_, err := open(dir, Options{Keys: StaticKeySource(testKey(1))}, failing)
	wantErr(t, err, statePath(dir), "migrating schema 1 to 2", "disk says no")
	s := openTestStore(t, dir, Options{})
	if got, err := s.Sandbox("alice", "sbx1"); err != nil || got.Template != "base" {
		t.Fatalf("after the failed migration: %+v, %v; want the untouched v1 record", got, err)
	}
}

// TestOldProcessStopsAfterMigration: a long-running process of the older version must not write the old layout
// into a file a newer process has migrated.
func TestOldProcessStopsAfterMigration(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Keys: StaticKeySource(testKey(1))}
	old, err := open(dir, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := open(dir, opts, []migration{prefixTemplates}); err != nil {
		t.Fatal(err)
	}
	_, err = old.TouchSession("alice", "main", time.Hour)
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("old store writing a migrated file: %v, want ErrUnusable", err)
	}
	wantErr(t, err, old.Path(), "schema version 2", "upgrade e2b-mcp")
}

func schemaOf(t *testing.T, path string) string {
	t.Helper()
	db := openAsAnotherProcess(t, path, &bolt.Options{ReadOnly: true})
	defer db.Close()
	var v string
	_ = db.View(func(tx *bolt.Tx) error {
		v = string(tx.Bucket([]byte(bucketMeta)).Get([]byte(metaSchema)))
		return nil
	})
	return v
}

func TestFutureVersionFileUntouchedByEveryOperation(t *testing.T) {
	// Complements the Open check: a file that turns newer under a running Store is not written by any write.
	s, clock := newBoltStore(t)
	editBolt(t, s.Path(), func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchema), []byte("99"))
	})
	before := readFile(t, s.Path())
	errs := []error{
		s.PutSandbox(sampleSandbox("alice", "a", "main", clock.Now())),
		s.PutCheckpoint(Checkpoint{ID: "c", Owner: "alice"}),
		s.MarkSessionLapsed("alice", "main"),
	}
	_, err := s.TouchSession("alice", "main", time.Hour)
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, ErrUnusable) || !strings.Contains(err.Error(), "99") {
			t.Errorf("write %d: %v, want ErrUnusable naming version 99", i, err)
		}
	}
	if !bytes.Equal(before, readFile(t, s.Path())) {
		t.Fatal("a refused write modified the file")
	}
	if _, err := os.Stat(s.Path()); err != nil {
		t.Fatal(err)
	}
}
