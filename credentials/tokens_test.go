package credentials

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFileKeepsOnlyHashes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "tokens.json")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tokA, a, err := NewTokenEntry("alice", now)
	if err != nil {
		t.Fatal(err)
	}
	tokB, b, err := NewTokenEntry("bob", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tokA, TokenPrefix) || tokA == tokB {
		t.Fatalf("tokens %q %q", tokA, tokB)
	}
	if err := WriteTokenFile(path, []TokenEntry{a, b}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), tokA) || strings.Contains(string(raw), tokB) {
		t.Fatalf("tokens file holds a token:\n%s", raw)
	}
	h := HashToken(tokA)
	if !strings.Contains(string(raw), hex.EncodeToString(h[:])) {
		t.Fatalf("tokens file lacks the hash:\n%s", raw)
	}
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}
	}

	toks, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, owner string
		ok           bool
	}{
		{tokA, "alice", true},
		{tokB, "bob", true},
		{"", "", false},
		{tokA + "x", "", false},
		{tokA[:len(tokA)-1], "", false},
		{hex.EncodeToString(h[:]), "", false}, // the hash itself is not a token
	} {
		owner, ok := toks.Owner(tc.token)
		if owner != tc.owner || ok != tc.ok {
			t.Errorf("Owner(%q) = %q, %v; want %q, %v", tc.token, owner, ok, tc.owner, tc.ok)
		}
	}
	if got := toks.Owners(); strings.Join(got, ",") != "alice,bob" {
		t.Errorf("Owners = %v", got)
	}
}

func TestTokensReloadAndFailClosed(t *testing.T) {
	if runtime.GOOS == "windows" {
		optional.Skip(t, "Windows has no mode bits")
	}
	path := filepath.Join(t.TempDir(), "tokens.json")
	tokA, a, _ := NewTokenEntry("alice", time.Now())
	if err := WriteTokenFile(path, []TokenEntry{a}); err != nil {
		t.Fatal(err)
	}
	toks, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	var reloadErrs []error
	toks.OnReloadError = func(err error) { reloadErrs = append(reloadErrs, err) }

	tokB, b, _ := NewTokenEntry("bob", time.Now())
	if err := WriteTokenFile(path, []TokenEntry{a, b}); err != nil {
		t.Fatal(err)
	}
	if owner, ok := toks.Owner(tokB); !ok || owner != "bob" {
		t.Fatalf("token added after start: %q %v", owner, ok)
	}

	kept, removed := RevokeTokens([]TokenEntry{a, b}, a.ID)
	if len(removed) != 1 || removed[0].Owner != "alice" || len(kept) != 1 {
		t.Fatalf("revoke by id: kept %v removed %v", kept, removed)
	}
	if err := WriteTokenFile(path, kept); err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Owner(tokA); ok {
		t.Fatal("revoked token still accepted")
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Owner(tokB); ok {
		t.Fatal("token accepted from a world-readable file")
	}
	if len(reloadErrs) != 1 || !errors.Is(reloadErrs[0], ErrTokenFile) {
		t.Fatalf("reload errors %v", reloadErrs)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if owner, ok := toks.Owner(tokB); !ok || owner != "bob" {
		t.Fatalf("after the file was fixed: %q %v", owner, ok)
	}
}

// A token rotated twice between two requests: the second rotation's file may get the inode number of the file
// the server last read (freed by the first; ext4 gives it out again at once) and, with entries of one length
// and a modification time kept (a clock stepped back, a copy that keeps times), its size and time too. The first
// token is revoked all the same.
func TestTokensTwoRotationsBetweenRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	created := time.Unix(1_700_000_000, 0).UTC()
	stepped := time.Unix(1_700_000_000, 0)
	rotate := func() string {
		t.Helper()
		token, e, err := NewTokenEntry("alice", created)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteTokenFile(path, []TokenEntry{e}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, stepped, stepped); err != nil {
			t.Fatal(err)
		}
		return token
	}
	first := rotate()
	toks, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		if owner, ok := toks.Owner(first); !ok || owner != "alice" {
			t.Fatalf("round %d: the current token: %q %v", round, owner, ok)
		}
		rotate()
		last := rotate()
		if _, ok := toks.Owner(first); ok {
			t.Fatalf("round %d: a token rotated out twice since the last request is still accepted", round)
		}
		first = last
	}
}

func TestReadTokenFileRefusesSharedFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		optional.Skip(t, "Windows has no mode bits")
	}
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o602} {
		path := filepath.Join(dir, "tokens")
		writeFile(t, path, "sha256:"+strings.Repeat("ab", 32)+" alice\n", mode)
		if _, err := ReadTokenFile(path); !errors.Is(err, ErrTokenFile) {
			t.Errorf("mode %04o: got %v, want ErrTokenFile", mode, err)
		}
		if _, err := OpenTokens(path); !errors.Is(err, ErrTokenFile) {
			t.Errorf("OpenTokens mode %04o: got %v, want ErrTokenFile", mode, err)
		}
	}
}

func TestParseTokenLines(t *testing.T) {
	plain := "a-hand-written-token-0123"
	h := HashToken("another-long-enough-token")
	content := "# team tokens\n\n" + plain + " carol\nsha256:" + hex.EncodeToString(h[:]) + "\tdave smith\n"
	entries, err := ParseTokens("tokens", []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Owner != "carol" || !entries[0].Plain || entries[0].Hash != HashToken(plain) {
		t.Fatalf("entries %+v", entries)
	}
	if entries[1].Owner != "dave smith" || entries[1].Plain || entries[1].Hash != h {
		t.Fatalf("entry 2 %+v", entries[1])
	}

	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, content, 0o600)
	toks, err := OpenTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	if owner, ok := toks.Owner(plain); !ok || owner != "carol" {
		t.Fatalf("plain token: %q %v", owner, ok)
	}
	if owner, ok := toks.Owner("another-long-enough-token"); !ok || owner != "dave smith" {
		t.Fatalf("hashed token: %q %v", owner, ok)
	}
	// Rewriting replaces the plaintext token by its hash.
	if err := WriteTokenFile(path, entries); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), plain) {
		t.Fatalf("rewritten file still holds the plaintext token:\n%s", raw)
	}
}

func TestParseTokensErrors(t *testing.T) {
	for _, tc := range []struct{ name, content string }{
		{"no owner", "some-long-token-value-123\n"},
		{"short token", "short alice\n"},
		{"bad hash", "sha256:abcd alice\n"},
		{"reserved owner", "some-long-token-value-123 " + DataKeyAccount + "\n"},
		{"json bad hash", `{"tokens":[{"owner":"a","sha256":"zz"}]}`},
		{"json unknown field", `{"tokens":[],"extra":1}`},
		{"json empty owner", `{"tokens":[{"owner":"","sha256":"` + strings.Repeat("0", 64) + `"}]}`},
		{"duplicate", "some-long-token-value-123 a\nsome-long-token-value-123 b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTokens("f", []byte(tc.content))
			if !errors.Is(err, ErrTokenFile) {
				t.Fatalf("got %v, want ErrTokenFile", err)
			}
			if strings.Contains(err.Error(), "some-long-token") {
				t.Fatalf("error repeats the token: %v", err)
			}
		})
	}
}

func TestOpenTokensRefusesEmptyOrMissing(t *testing.T) {
	dir := t.TempDir()
	if _, err := OpenTokens(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	path := filepath.Join(dir, "empty")
	writeFile(t, path, "# nothing yet\n", 0o600)
	if _, err := OpenTokens(path); !errors.Is(err, ErrTokenFile) {
		t.Fatalf("empty file: %v", err)
	}
}

func TestRevokeByOwnerAndToken(t *testing.T) {
	tokA, a, _ := NewTokenEntry("alice", time.Now())
	_, a2, _ := NewTokenEntry("alice", time.Now())
	_, b, _ := NewTokenEntry("bob", time.Now())
	kept, removed := RevokeTokens([]TokenEntry{a, a2, b}, "alice")
	if len(removed) != 2 || len(kept) != 1 || kept[0].Owner != "bob" {
		t.Fatalf("by owner: kept %v removed %v", kept, removed)
	}
	kept, removed = RevokeTokens([]TokenEntry{a, a2, b}, tokA)
	if len(removed) != 1 || removed[0].ID != a.ID || len(kept) != 2 {
		t.Fatalf("by token: kept %v removed %v", kept, removed)
	}
	if _, removed = RevokeTokens([]TokenEntry{a, b}, "nobody"); len(removed) != 0 {
		t.Fatalf("unknown: removed %v", removed)
	}
}

func BenchmarkTokensOwner(b *testing.B) {
	path := filepath.Join(b.TempDir(), "tokens.json")
	var entries []TokenEntry
	var last string
	for range 50 {
		tok, e, _ := NewTokenEntry("owner", time.Now())
		entries = append(entries, e)
		last = tok
	}
	if err := WriteTokenFile(path, entries); err != nil {
		b.Fatal(err)
	}
	toks, err := OpenTokens(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, ok := toks.Owner(last); !ok {
			b.Fatal("not found")
		}
	}
}

// Tokens added by processes at the same time (each `e2b-mcp tokens add` is one; here goroutines with their own
// lock handles, which exclude each other as processes do) are all kept: none reads the file, then writes it back
// over another's addition.
func TestConcurrentTokenAddsAreAllKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	const adders = 16
	want := map[string]bool{}
	entries := make([]TokenEntry, adders)
	for i := range entries {
		_, e, err := NewTokenEntry(fmt.Sprintf("owner%d", i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		entries[i], want[e.ID] = e, true
	}
	var wg sync.WaitGroup
	errs := make(chan error, adders)
	for _, e := range entries {
		wg.Go(func() {
			errs <- UpdateTokenFile(path, func(cur []TokenEntry) ([]TokenEntry, error) { return append(cur, e), nil })
		})
	}
	waitfor.Return(t, time.Minute, "the concurrent updates of the tokens file", wg.Wait)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got {
		delete(want, e.ID)
	}
	if len(got) != adders || len(want) != 0 {
		t.Fatalf("%d of %d tokens kept; lost %v", len(got), adders, want)
	}
}

// A change that fails writes nothing, and a temporary file a writer that died left beside the tokens file is
// removed by the next update.
func TestUpdateTokenFileFailsWholeAndSweepsLeftovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.json")
	_, a, err := NewTokenEntry("alice", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTokenFile(path, []TokenEntry{a}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	leftover := filepath.Join(dir, tempPrefix(path)+"123")
	writeFile(t, leftover, "half a tokens file", 0o600)
	refused := errors.New("no such token")
	if err := UpdateTokenFile(path, func([]TokenEntry) ([]TokenEntry, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatalf("a failing change: %v", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatalf("a failing change rewrote the file:\n%s", after)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead writer's temporary file is still there: %v", err)
	}
}

// The owner rules a tokens file was opened with hold for every version of it: a reload that names a refused owner
// refuses every token, as any unusable version does, until the file is fixed.
func TestTokensOwnerRulesRecheckedOnReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	tokA, a, _ := NewTokenEntry("alice", time.Now())
	if err := WriteTokenFile(path, []TokenEntry{a}); err != nil {
		t.Fatal(err)
	}
	noIssuerNames := func(owner string) error {
		if strings.HasPrefix(owner, "idp-") {
			return errors.New("names like the identity provider's are not the tokens file's to give")
		}
		return nil
	}
	toks, err := OpenTokens(path, noIssuerNames)
	if err != nil {
		t.Fatal(err)
	}
	var reloadErrs []error
	toks.OnReloadError = func(err error) { reloadErrs = append(reloadErrs, err) }
	if owner, ok := toks.Owner(tokA); !ok || owner != "alice" {
		t.Fatalf("alice's token at open: %q %v", owner, ok)
	}

	tokM, m, _ := NewTokenEntry("idp-alice", time.Now())
	if err := WriteTokenFile(path, []TokenEntry{a, m}); err != nil {
		t.Fatal(err)
	}
	if owner, ok := toks.Owner(tokM); ok {
		t.Fatalf("a token for an owner the rules refuse, added after open, is accepted as %q", owner)
	}
	if _, ok := toks.Owner(tokA); ok {
		t.Fatal("a version of the file that breaks the owner rules still lets alice's token in")
	}
	if len(reloadErrs) != 1 || !errors.Is(reloadErrs[0], ErrTokenFile) || !strings.Contains(reloadErrs[0].Error(), "identity provider's") {
		t.Fatalf("reload errors %v; want the rule's refusal", reloadErrs)
	}

	if err := WriteTokenFile(path, []TokenEntry{a}); err != nil {
		t.Fatal(err)
	}
	if owner, ok := toks.Owner(tokA); !ok || owner != "alice" {
		t.Fatalf("after the file was fixed: %q %v", owner, ok)
	}
}
