package state

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestTokensEncryptedAtRest(t *testing.T) {
	key := testKey(0x5a)
	clock := newFakeClock()
	s := openTestStore(t, t.TempDir(), Options{Keys: StaticKeySource(key), Now: clock.Now})
	var tokens []string
	for i := range 20 {
		r := sampleSandbox("alice", fmt.Sprintf("sbx%d", i), "main", clock.Now())
		r.AccessToken = fmt.Sprintf("envd-secret-%02d-DO-NOT-LEAK", i)
		tokens = append(tokens, r.AccessToken)
		if err := s.PutSandbox(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateSandbox("alice", "sbx0", func(r *SandboxRecord) error {
		r.AccessToken = "envd-secret-rotated-DO-NOT-LEAK"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, "envd-secret-rotated-DO-NOT-LEAK")

	raw := readFile(t, s.Path())
	for _, secret := range append(tokens, "DO-NOT-LEAK", string(key), base64.StdEncoding.EncodeToString(key)) {
		if bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("the state file contains %q in the clear", secret)
		}
	}
	if got, err := s.Sandbox("alice", "sbx3"); err != nil || got.AccessToken != tokens[3] {
		t.Fatalf("token read back as %q, %v", got.AccessToken, err)
	}
	if got, err := s.Sandbox("alice", "sbx0"); err != nil || got.AccessToken != tokens[len(tokens)-1] {
		t.Fatalf("rotated token read back as %q, %v", got.AccessToken, err)
	}

	// Two records with the same token have different ciphertexts (a fresh nonce each time).
	a, b := sealedToken(t, s.Path(), "alice\x00sbx1"), sealedToken(t, s.Path(), "alice\x00sbx2")
	if bytes.Equal(a[:12], b[:12]) {
		t.Fatal("two records share a nonce")
	}
}

func TestWrongDataKey(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{Keys: StaticKeySource(testKey(1))})
	if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", time.Now())); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, s.Path())

	wrong := openTestStore(t, dir, Options{Keys: StaticKeySource(testKey(2))})
	_, err := wrong.Sandbox("alice", "sbx1")
	wantErr(t, err, s.Path(), "data key", "not the one")
	if errors.Is(err, ErrNotFound) {
		t.Fatal("a wrong key must not look like a missing record")
	}
	_, err = wrong.AllSandboxes()
	wantErr(t, err, "data key")
	// Sealing under the wrong key is refused too, so the file never mixes keys.
	wantErr(t, wrong.PutSandbox(sampleSandbox("alice", "sbx2", "main", time.Now())), "data key")
	if !bytes.Equal(before, readFile(t, s.Path())) {
		t.Fatal("a refused write with the wrong key modified the file")
	}
	// Records without secrets stay readable.
	if _, err := wrong.SessionCheckpoints("alice", "main", ""); err != nil {
		t.Fatal(err)
	}
}

func TestBadKeySources(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys KeySource
		want string
	}{
		{"short key", StaticKeySource([]byte("too short")), "data key is 9 bytes, want 32"},
		{"failing source", failingKeys{}, "getting the data key: keyring locked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t, t.TempDir(), Options{Keys: tc.keys})
			err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", time.Now()))
			wantErr(t, err, s.Path(), tc.want)
			// A sandbox without a token needs no key.
			r := sampleSandbox("alice", "sbx2", "main", time.Now())
			r.AccessToken = ""
			if err := s.PutSandbox(r); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type failingKeys struct{}

func (failingKeys) DataKey() ([]byte, error) { return nil, errors.New("keyring locked") }

// TestCiphertextBoundToRecord: a sealed token copied into another record does not decrypt there.
func TestCiphertextBoundToRecord(t *testing.T) {
	s, clock := newBoltStore(t)
	for _, id := range []string{"sbx1", "sbx2"} {
		if err := s.PutSandbox(sampleSandbox("alice", id, "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
	}
	stolen := sealedToken(t, s.Path(), "alice\x00sbx1")
	editBolt(t, s.Path(), func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucketSandboxes))
		var rec map[string]any
		if err := json.Unmarshal(b.Get([]byte("alice\x00sbx2")), &rec); err != nil {
			return err
		}
		rec["access_token_sealed"] = stolen
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put([]byte("alice\x00sbx2"), v)
	})
	_, err := s.Sandbox("alice", "sbx2")
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("moved ciphertext: %v, want ErrUnusable", err)
	}
	wantErr(t, err, "sandbox sbx2", "copied from another record")
	if strings.Contains(err.Error(), "envd-token-sbx1") {
		t.Fatal("the error reveals the token")
	}
	if got, err := s.Sandbox("alice", "sbx1"); err != nil || got.AccessToken != "envd-token-sbx1" {
		t.Fatalf("the original record: %+v, %v", got, err)
	}
}

func sealedToken(t *testing.T, path, key string) []byte {
	t.Helper()
	db := openAsAnotherProcess(t, path, &bolt.Options{ReadOnly: true})
	defer db.Close()
	var rec sandboxV1
	err := db.View(func(tx *bolt.Tx) error {
		return json.Unmarshal(tx.Bucket([]byte(bucketSandboxes)).Get([]byte(key)), &rec)
	})
	if err != nil || len(rec.SealedToken) == 0 {
		t.Fatalf("no sealed token in %q: %v", key, err)
	}
	return rec.SealedToken
}

func TestStaticKeySourceCopies(t *testing.T) {
	key := testKey(3)
	src := StaticKeySource(key)
	key[0] = 0
	got, err := src.DataKey()
	if err != nil || got[0] != 3 {
		t.Fatalf("DataKey = %x, %v; the source must not alias the caller's slice", got, err)
	}
	got[1] = 0
	if again, _ := src.DataKey(); again[1] != 3 {
		t.Fatal("DataKey returns the source's own slice")
	}
}
