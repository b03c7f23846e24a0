package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// A state file the server cannot trust (cut short, garbage, another program's database) stops `serve` with an
// error that names the file, and the file is left exactly as it was: the server never overwrites it silently.
func TestCorruptStoreRefused(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("corrupt")

	valid := filepath.Join(t.TempDir(), "valid")
	st, err := state.Open(valid, state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{1}, state.DataKeySize))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TouchSession(owner, "s", 0); err != nil {
		t.Fatal(err)
	}
	st.Close()
	good, err := os.ReadFile(filepath.Join(valid, state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(t.TempDir(), "foreign.db")
	db, err := bolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("settings"))
		if err != nil {
			return err
		}
		return b.Put([]byte("theme"), []byte("dark"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	foreignBytes, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}

	for name, content := range map[string][]byte{
		"truncated": good[:len(good)/3],
		"garbage":   bytes.Repeat([]byte("not a database\n"), 500),
		"foreign":   foreignBytes,
	} {
		t.Run(name, func(t *testing.T) {
			dir := x.path("state-" + name)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, state.FileName)
			if err := os.WriteFile(file, content, 0o600); err != nil {
				t.Fatal(err)
			}
			r := x.run(nil, append(x.serveArgs(owner, "s"), "--state-dir", dir)...)
			if r.err == nil {
				t.Fatalf("serve started on a %s state file:\n%s", name, r)
			}
			if !strings.Contains(r.stderr, file) {
				t.Errorf("the error does not name the file %s:\n%s", file, r.stderr)
			}
			if after, err := os.ReadFile(file); err != nil || !bytes.Equal(after, content) {
				t.Errorf("the %s state file was changed (read error %v)", name, err)
			}
		})
	}
}
