package state

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	bolt "go.etcd.io/bbolt"
)

func TestOpenCreatesPrivateDirAndFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "state")
	s := openTestStore(t, dir, Options{})
	if s.Path() != filepath.Join(dir, FileName) {
		t.Fatalf("Path = %s", s.Path())
	}
	for path, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, s.Path(): 0o600} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want {
			t.Errorf("%s has mode %v, want %v", path, info.Mode(), want)
		}
	}
}

func TestOpenRequiresDirAndKeys(t *testing.T) {
	if _, err := Open("", Options{Keys: StaticKeySource(testKey(1))}); err == nil {
		t.Fatal("Open with no directory succeeded")
	}
	dir := t.TempDir()
	_, err := Open(dir, Options{})
	wantErr(t, err, "Keys is required")
	if _, err := os.Stat(statePath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused Open created the file: %v", err)
	}
}

func TestOpenInitialisesEmptyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(statePath(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStore(t, dir, Options{})
	if _, err := s.TouchSession("alice", "main", time.Hour); err != nil {
		t.Fatal(err)
	}
}

func TestClosedStore(t *testing.T) {
	s, _ := newBoltStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sessions(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sessions after Close: %v, want ErrClosed", err)
	}
	if err := s.PutSandbox(sampleSandbox("alice", "a", "main", time.Now())); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutSandbox after Close: %v, want ErrClosed", err)
	}
}

// openAsAnotherProcess opens the store's file at path with bbolt as another e2b-mcp process would: through the
// turnstile, which tells a Bolt keeping the file open to let go of it. It waits at most 10 s.
func openAsAnotherProcess(t testing.TB, path string, opts *bolt.Options) *bolt.DB {
	t.Helper()
	turn, err := os.OpenFile(filepath.Join(filepath.Dir(path), lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	waitfor.Until(t, 10*time.Second, "the turnstile of the state directory to be unlocked", func() bool {
		ok, err := filelock.TryLock(turn)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
	defer filelock.Unlock(turn)
	o := bolt.Options{Timeout: 10 * time.Second}
	if opts != nil {
		o = *opts
		o.Timeout = 10 * time.Second
	}
	db, err := bolt.Open(path, 0o600, &o)
	if err != nil {
		t.Fatalf("opening %s as another process would: %v", path, err)
	}
	return db
}

// Between operations a Bolt keeps the file open only while no other process asks for it: bbolt's lock on it is
// held after an operation, and another process that comes through the turnstile gets the file; the Bolt then
// opens it again for its next operation, and lets go of it keptIdle after its last one.
func TestStoreLetsGoOfTheFileForAnotherProcess(t *testing.T) {
	s, _ := newBoltStore(t)
	if _, err := s.TouchSession("alice", "main", time.Hour); err != nil {
		t.Fatal(err)
	}
	if db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{Timeout: time.Nanosecond}); err == nil {
		db.Close()
		t.Fatal("the file was not kept open after an operation")
	}
	db := openAsAnotherProcess(t, s.Path(), nil)
	ops := make(chan error, 1)
	go func() { _, err := s.Sessions(); ops <- err }()
	select {
	case err := <-ops:
		t.Fatalf("an operation ran while another process had the file: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ops:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the operation waiting for the file did not run within 10 s of the other process closing it")
	}
	waitfor.Until(t, 10*time.Second, fmt.Sprintf("the file to be let go after the last operation (keptIdle is %v)", keptIdle), func() bool {
		db, err := bolt.Open(s.Path(), 0o600, &bolt.Options{Timeout: time.Nanosecond})
		if err == nil {
			db.Close()
		}
		return err == nil
	})
}

func TestBusyStore(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, Options{LockTimeout: 60 * time.Millisecond})
	holder := openAsAnotherProcess(t, s.Path(), nil)
	for name, op := range map[string]func() error{
		"write": func() error { _, err := s.TouchSession("alice", "main", time.Hour); return err },
		"read":  func() error { _, err := s.Sessions(); return err },
		"open": func() error {
			_, err := Open(dir, Options{Keys: StaticKeySource(testKey(1)), LockTimeout: 60 * time.Millisecond})
			return err
		},
	} {
		err := op()
		if !errors.Is(err, ErrBusy) {
			t.Fatalf("%s while locked: %v, want ErrBusy", name, err)
		}
		wantErr(t, err, "state store "+s.Path()+" is busy")
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TouchSession("alice", "main", time.Hour); err != nil {
		t.Fatalf("after the lock was released: %v", err)
	}

	// A process stuck in the turnstile (waiting for a lock it never gets) also makes the store busy.
	turn, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.Close()
	if ok, err := filelock.TryLock(turn); !ok || err != nil {
		t.Fatalf("taking the turnstile: %v, %v", ok, err)
	}
	_, err = s.Sessions()
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("read while the turnstile is held: %v, want ErrBusy", err)
	}
	wantErr(t, err, "state store "+s.Path()+" is busy")
	if err := filelock.Unlock(turn); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sessions(); err != nil {
		t.Fatalf("after the turnstile was released: %v", err)
	}
}

// populatedStoreFile returns a valid state.db holding enough records to span many pages.
func populatedStoreFile(t *testing.T) []byte {
	t.Helper()
	s, clock := newBoltStore(t)
	for i := range 200 {
		r := sampleSandbox("alice", fmt.Sprintf("sbx-%03d-%s", i, strings.Repeat("x", i%50)), "main", clock.Now())
		if err := s.PutSandbox(r); err != nil {
			t.Fatal(err)
		}
	}
	return readFile(t, s.Path())
}

// TestUnusableFilesAreRefusedAndLeftAlone: every kind of file that is not a healthy state store of this or an older
// version is refused with an error naming it, and not one byte of it changes.
func TestUnusableFilesAreRefusedAndLeftAlone(t *testing.T) {
	healthy := populatedStoreFile(t)
	meta := parseBoltMeta(healthy)
	if !meta.valid {
		t.Fatal("cannot parse the healthy file's header")
	}
	used := int(meta.pgid) * int(meta.pageSize)
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	damagedPages := bytes.Clone(healthy)
	for i := 2 * int(meta.pageSize); i < len(damagedPages); i++ {
		damagedPages[i] = byte(rng.Uint32())
	}
	damagedTail := bytes.Clone(healthy)
	for i := used / 2; i < used; i++ {
		damagedTail[i] = byte(rng.Uint32())
	}
	damagedLeaf := bytes.Clone(healthy)
	leaf := sandboxLeafPage(t, healthy)
	for i := leaf*int(meta.pageSize) + boltPageHeaderSize; i < leaf*int(meta.pageSize)+64; i++ {
		damagedLeaf[i] = byte(rng.Uint32()) // the element headers: key and value positions and sizes
	}
	badMetas := bytes.Clone(healthy)
	badMetas[boltPageHeaderSize+20] ^= 0xff                    // page size field of meta 0
	badMetas[int(meta.pageSize)+boltPageHeaderSize+20] ^= 0xff // and of meta 1
	otherFormat := bytes.Clone(healthy)
	for _, off := range []int{0, int(meta.pageSize)} {
		otherFormat[off+boltPageHeaderSize+4] = 7 // bbolt format version
	}

	for _, tc := range []struct {
		name    string
		content func(t *testing.T) []byte
		want    string
	}{
		{"truncated to 100 bytes", func(*testing.T) []byte { return healthy[:100] }, "truncated (100 bytes"},
		{"truncated to 50 bytes", func(*testing.T) []byte { return healthy[:50] }, "no bbolt header"},
		{"truncated to one page", func(*testing.T) []byte { return healthy[:meta.pageSize] }, "truncated"},
		{"truncated to half", func(*testing.T) []byte { return healthy[:used/2] }, "truncated"},
		{"last page cut short", func(*testing.T) []byte { return healthy[:used-1] }, "truncated"},
		{"garbage", func(*testing.T) []byte { return garbage }, "no bbolt header"},
		{"text file", func(*testing.T) []byte { return []byte("hello, world\n") }, "no bbolt header"},
		{"garbage data pages", func(*testing.T) []byte { return damagedPages }, "left untouched"},
		{"garbage in the later pages", func(*testing.T) []byte { return damagedTail }, "left untouched"},
		{"damaged sandbox leaf page", func(*testing.T) []byte { return damagedLeaf }, "left untouched"},
		{"both meta pages damaged", func(*testing.T) []byte { return badMetas }, "corrupt"},
		{"other bbolt format version", func(*testing.T) []byte { return otherFormat }, "format version 7"},
		{"foreign bbolt database", func(t *testing.T) []byte {
			return foreignBoltFile(t, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("widgets"))
				if err != nil {
					return err
				}
				return b.Put([]byte("w1"), []byte("blue"))
			})
		}, "another program"},
		{"empty foreign bbolt database", func(t *testing.T) []byte {
			return foreignBoltFile(t, func(*bolt.Tx) error { return nil })
		}, "another program"},
		{"foreign bbolt database with a meta bucket", func(t *testing.T) []byte {
			return foreignBoltFile(t, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("meta"))
				if err != nil {
					return err
				}
				return b.Put([]byte("application"), []byte("someone else"))
			})
		}, `marker is "someone else"`},
		{"future schema version", func(t *testing.T) []byte {
			return editedStoreFile(t, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchema), []byte("99"))
			})
		}, fmt.Sprintf("schema version 99, newer than the %d", len(schemaMigrations())+1)},
		{"unreadable schema version", func(t *testing.T) []byte {
			return editedStoreFile(t, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchema), []byte("one"))
			})
		}, `invalid schema version "one"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := tc.content(t)
			dir := t.TempDir()
			path := statePath(dir)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(dir, Options{Keys: StaticKeySource(testKey(1)), LockTimeout: time.Second})
			if !errors.Is(err, ErrUnusable) {
				t.Fatalf("Open: %v, want ErrUnusable", err)
			}
			wantErr(t, err, path, tc.want)
			t.Log(err)
			if after := readFile(t, path); !bytes.Equal(after, content) {
				t.Fatalf("the refused file was modified (%d bytes before, %d after)", len(content), len(after))
			}
		})
	}
}

func TestOpenAcceptsFileWithoutSlack(t *testing.T) {
	// bbolt grows files beyond the last used page; losing only that slack loses nothing.
	healthy := populatedStoreFile(t)
	meta := parseBoltMeta(healthy)
	dir := t.TempDir()
	if err := os.WriteFile(statePath(dir), healthy[:int(meta.pgid)*int(meta.pageSize)], 0o600); err != nil {
		t.Fatal(err)
	}
	s := openTestStore(t, dir, Options{})
	if all, err := s.AllSandboxes(); err != nil || len(all) != 200 {
		t.Fatalf("AllSandboxes = %d records, %v; want 200", len(all), err)
	}
}

func TestNonRegularFileRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(statePath(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{Keys: StaticKeySource(testKey(1))})
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("Open: %v, want ErrUnusable", err)
	}
	wantErr(t, err, statePath(dir), "not a regular file")
}

// TestFileReplacedWhileOpen: a Store that validated its file at Open still refuses to use a file that was
// replaced afterwards, and leaves the replacement alone.
func TestFileReplacedWhileOpen(t *testing.T) {
	s, _ := newBoltStore(t)
	content := foreignBoltFile(t, func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("widgets"))
		return err
	})
	if err := os.WriteFile(s.Path(), content, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.TouchSession("alice", "main", time.Hour)
	if !errors.Is(err, ErrUnusable) {
		t.Fatalf("TouchSession on a replaced file: %v, want ErrUnusable", err)
	}
	wantErr(t, err, s.Path())
	if !bytes.Equal(readFile(t, s.Path()), content) {
		t.Fatal("the replacement was modified")
	}

	if err := os.Remove(s.Path()); err != nil {
		t.Fatal(err)
	}
	_, err = s.TouchSession("alice", "main", time.Hour)
	wantErr(t, err, s.Path(), "disappeared")
	if _, statErr := os.Stat(s.Path()); !errors.Is(statErr, os.ErrNotExist) {
		t.Fatal("an operation re-created a deleted file behind Open's back")
	}
}

// sandboxLeafPage finds a live leaf page of the sandboxes bucket in a store file.
func sandboxLeafPage(t *testing.T, content []byte) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	found := -1
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; id < int(tx.Size())/tx.DB().Info().PageSize && found < 0; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil || info.Type != "leaf" {
				continue
			}
			p := content[id*tx.DB().Info().PageSize:][:tx.DB().Info().PageSize]
			if bytes.Contains(p, []byte("sbx-")) && bytes.Contains(p, []byte("\"session\"")) {
				found = id
			}
		}
		return nil
	})
	if err != nil || found < 0 {
		t.Fatalf("no leaf page of the sandboxes bucket found (%v)", err)
	}
	return found
}

func foreignBoltFile(t *testing.T, fill func(*bolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fill); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return readFile(t, path)
}

// editedStoreFile returns a fresh state store's bytes after edit, applied with bbolt directly.
func editedStoreFile(t *testing.T, edit func(*bolt.Tx) error) []byte {
	t.Helper()
	s, _ := newBoltStore(t)
	if _, err := s.TouchSession("alice", "main", time.Hour); err != nil {
		t.Fatal(err)
	}
	editBolt(t, s.Path(), edit)
	return readFile(t, s.Path())
}

func editBolt(t *testing.T, path string, edit func(*bolt.Tx) error) {
	t.Helper()
	db := openAsAnotherProcess(t, path, nil)
	defer db.Close()
	if err := db.Update(edit); err != nil {
		t.Fatal(err)
	}
}

// A store that cannot be opened is no Store at all: callers test the interface against nil.
func TestOpenAtFailureIsNil(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(statePath(dir), []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenAt(dir, Options{Keys: StaticKeySource(testKey(1))}); err == nil || s != nil {
		t.Fatalf("OpenAt of a garbage file = %v, %v; want a nil Store and an error", s, err)
	}
	if s, err := OpenAt("postgres://127.0.0.1:1/none", Options{Keys: StaticKeySource(testKey(1)), LockTimeout: time.Second}); err == nil || s != nil {
		t.Fatalf("OpenAt of an unreachable database = %v, %v; want a nil Store and an error", s, err)
	}
}
