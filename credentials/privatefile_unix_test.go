//go:build unix

package credentials

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// replaceWithPipe puts a named pipe (mode 0600) where path's file was, as someone who can write to its directory
// could. Opening a pipe to read waits for a writer: the cleanup opens it to write, so that an open left waiting
// by a failed test ends.
func replaceWithPipe(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
}

// A key store that became a named pipe gives the error of a file that is not a regular one, at once: never a read
// that waits for a writer the pipe may never have, holding every other read of the store behind it.
func TestFileStoreRefusesAPipe(t *testing.T) {
	s, path, _ := newFileStore(t)
	if err := s.SetSecret("alice", "e2b_00"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Secret("alice"); err != nil {
		t.Fatal(err)
	}
	replaceWithPipe(t, path)
	var err error
	waitfor.Return(t, 30*time.Second, "a read of a key store that is a named pipe", func() {
		_, err = s.Secret("alice")
	})
	if !errors.Is(err, ErrKeyStore) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a key store that is a named pipe: %v; want ErrKeyStore saying it is not a regular file", err)
	}
}

// A tokens file that became a named pipe refuses every token at once, saying why, as a broken file does: never a
// request that waits for a writer the pipe may never have, holding every other request behind it.
func TestTokensRefuseAPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	tok, entry, _ := NewTokenEntry("alice", time.Now())
	if err := WriteTokenFile(path, []TokenEntry{entry}); err != nil {
		t.Fatal(err)
	}
	toks, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	var reloadErr error
	toks.OnReloadError = func(err error) { reloadErr = err }
	replaceWithPipe(t, path)
	var owner string
	var ok bool
	waitfor.Return(t, 30*time.Second, "a token's check against a tokens file that is a named pipe", func() {
		owner, ok = toks.Owner(tok)
	})
	if ok {
		t.Fatalf("a tokens file that is a named pipe: the token was taken, for %q", owner)
	}
	if !errors.Is(reloadErr, ErrTokenFile) || !strings.Contains(reloadErr.Error(), "not a regular file") {
		t.Fatalf("a tokens file that is a named pipe: reload error %v; want ErrTokenFile saying it is not a regular "+
			"file", reloadErr)
	}
	if _, err := OpenTokens(path); !errors.Is(err, ErrTokenFile) {
		t.Fatalf("opening a tokens file that is a named pipe: %v; want ErrTokenFile", err)
	}
}
