package credentials

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bearer tokens authenticate HTTP callers: each token names an owner. The tokens file keeps only the SHA-256 of
// each token, so a copy of the file gives nobody a usable token. It is either JSON (as `e2b-mcp tokens add`
// writes it):
//
//	{"tokens": [{"id": "3f2a9c01b2d4", "owner": "alice", "sha256": "<64 hex digits>", "created": "..."}]}
//
// or hand-written lines "TOKEN OWNER", where TOKEN is either sha256:<64 hex digits> or the token itself (which
// the next `e2b-mcp tokens add` or `revoke` replaces by its hash). Blank lines and lines starting with # are
// ignored. The file must not be readable or writable by group or others.

// TokenPrefix starts every token that NewToken makes, so that a leaked one is recognisable.
const TokenPrefix = "e2bmcp_"

// minPlainTokenLen bounds hand-written tokens from below: shorter ones are guessable.
const minPlainTokenLen = 16

// maxTokenFileBytes bounds the tokens file; real ones hold a few entries.
const maxTokenFileBytes = 1 << 20

// ErrTokenFile is wrapped by every problem with a tokens file's content or permissions.
var ErrTokenFile = errors.New("unusable tokens file")

// TokenEntry is one token as the file keeps it.
type TokenEntry struct {
	// ID names the entry for `tokens list` and `tokens revoke`: the first 12 hex digits of Hash, which reveal
	// nothing usable about the token.
	ID      string
	Owner   string
	Hash    [sha256.Size]byte
	Created time.Time // zero for hand-written entries
	// Plain is true when the file held the token itself rather than its hash.
	Plain bool
}

type tokenFileJSON struct {
	Tokens []tokenJSON `json:"tokens"`
}

type tokenJSON struct {
	ID      string    `json:"id"`
	Owner   string    `json:"owner"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created,omitzero"`
}

// HashToken is the SHA-256 of a token, as the file keeps it.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

func entryID(h [sha256.Size]byte) string { return hex.EncodeToString(h[:6]) }

// NewToken makes a random token: TokenPrefix and 32 random bytes, base64url.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// NewTokenEntry makes a token for owner and the entry that the file keeps for it.
func NewTokenEntry(owner string, now time.Time) (token string, e TokenEntry, err error) {
	if err := CheckOwner(owner); err != nil {
		return "", TokenEntry{}, err
	}
	token, err = NewToken()
	if err != nil {
		return "", TokenEntry{}, err
	}
	h := HashToken(token)
	return token, TokenEntry{ID: entryID(h), Owner: owner, Hash: h, Created: now.UTC().Truncate(time.Second)}, nil
}

// ReadTokenFile reads and checks a tokens file. A missing file is an error wrapping os.ErrNotExist.
func ReadTokenFile(path string) ([]TokenEntry, error) {
	data, err := readPrivateFile(path, "tokens file", maxTokenFileBytes, ErrTokenFile)
	if err != nil {
		return nil, err
	}
	return ParseTokens(path, data)
}

// ParseTokens parses a tokens file's content (JSON or lines); name is used in messages.
func ParseTokens(name string, data []byte) ([]TokenEntry, error) {
	trimmed := bytes.TrimSpace(data)
	var entries []TokenEntry
	var err error
	if len(trimmed) > 0 && trimmed[0] == '{' {
		entries, err = parseTokensJSON(name, trimmed)
	} else {
		entries, err = parseTokenLines(name, data)
	}
	if err != nil {
		return nil, err
	}
	seen := make(map[[sha256.Size]byte]bool, len(entries))
	for _, e := range entries {
		if seen[e.Hash] {
			return nil, fmt.Errorf("%w: %s lists the token %s twice", ErrTokenFile, name, e.ID)
		}
		seen[e.Hash] = true
	}
	return entries, nil
}

func parseTokensJSON(name string, data []byte) ([]TokenEntry, error) {
	var f tokenFileJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s is not a valid tokens file: %v", ErrTokenFile, name, err)
	}
	out := make([]TokenEntry, 0, len(f.Tokens))
	for i, t := range f.Tokens {
		raw, err := hex.DecodeString(t.SHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%w: %s: token %d: sha256 must be 64 hex digits", ErrTokenFile, name, i+1)
		}
		if err := CheckOwner(t.Owner); err != nil {
			return nil, fmt.Errorf("%w: %s: token %d: %v", ErrTokenFile, name, i+1, err)
		}
		var h [sha256.Size]byte
		copy(h[:], raw)
		out = append(out, TokenEntry{ID: entryID(h), Owner: t.Owner, Hash: h, Created: t.Created})
	}
	return out, nil
}

func parseTokenLines(name string, data []byte) ([]TokenEntry, error) {
	var out []TokenEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFileBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sep := strings.IndexAny(line, " \t")
		if sep < 0 {
			return nil, fmt.Errorf("%w: %s line %d: want \"TOKEN OWNER\"", ErrTokenFile, name, n)
		}
		tok, owner := line[:sep], strings.TrimSpace(line[sep+1:])
		if err := CheckOwner(owner); err != nil {
			return nil, fmt.Errorf("%w: %s line %d: %v", ErrTokenFile, name, n, err)
		}
		var e TokenEntry
		if hexHash, isHash := strings.CutPrefix(tok, "sha256:"); isHash {
			raw, err := hex.DecodeString(hexHash)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("%w: %s line %d: sha256: must be followed by 64 hex digits", ErrTokenFile, name, n)
			}
			copy(e.Hash[:], raw)
		} else {
			if len(tok) < minPlainTokenLen {
				return nil, fmt.Errorf("%w: %s line %d: the token is shorter than %d characters", ErrTokenFile, name,
					n, minPlainTokenLen)
			}
			e.Hash = HashToken(tok)
			e.Plain = true
		}
		e.ID = entryID(e.Hash)
		e.Owner = owner
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrTokenFile, name, err)
	}
	return out, nil
}

// WriteTokenFile writes entries as JSON with hashes only (never a token), atomically and with mode 0600.
func WriteTokenFile(path string, entries []TokenEntry) error {
	f := tokenFileJSON{Tokens: make([]tokenJSON, 0, len(entries))}
	for _, e := range entries {
		f.Tokens = append(f.Tokens, tokenJSON{ID: e.ID, Owner: e.Owner, SHA256: hex.EncodeToString(e.Hash[:]),
			Created: e.Created})
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	return writePrivateFile(path, "tokens file", append(data, '\n'), nil)
}

// UpdateTokenFile changes the tokens file: change gets the entries it holds (none when there is no file yet) and
// returns those to keep; an error from change leaves the file as it was. The whole change holds the file's lock,
// so two processes changing it at once (two `e2b-mcp tokens add`) both keep their change.
func UpdateTokenFile(path string, change func([]TokenEntry) ([]TokenEntry, error)) error {
	return lockedUpdate(path, "tokens file", func() error {
		entries, err := ReadTokenFile(path)
		if errors.Is(err, os.ErrNotExist) {
			entries, err = nil, nil
		}
		if err != nil {
			return err
		}
		next, err := change(entries)
		if err != nil {
			return err
		}
		return WriteTokenFile(path, next)
	})
}

// RevokeTokens removes the entries matching what: an entry ID, an owner name (all of that owner's tokens) or
// a token itself. It returns the remaining entries and the removed ones.
func RevokeTokens(entries []TokenEntry, what string) (kept, removed []TokenEntry) {
	h := HashToken(what)
	for _, e := range entries {
		if e.ID == what || e.Owner == what || subtle.ConstantTimeCompare(e.Hash[:], h[:]) == 1 {
			removed = append(removed, e)
			continue
		}
		kept = append(kept, e)
	}
	return kept, removed
}

// Tokens authenticates bearer tokens against a tokens file. The file is re-read when it changes, so tokens
// added or revoked with `e2b-mcp tokens` take effect without a restart. If the file becomes unusable (wrong
// mode, bad content, deleted), every token is refused until it is fixed. Safe for concurrent use.
type Tokens struct {
	path  string
	rules []OwnerRule
	// OnReloadError, when set, hears why a changed file could not be used.
	OnReloadError func(error)

	mu      sync.Mutex
	version fileVersion // of the file the entries come from
	entries []TokenEntry
	broken  bool
}

// OwnerRule refuses owners that a tokens file may not name where it is used (beside OAuth, names that an
// identity provider could give too).
type OwnerRule func(owner string) error

// OpenTokens loads the tokens file at path. The file must exist, be private and hold at least one token, and
// every owner it names must pass the rules, now and whenever it changes.
func OpenTokens(path string, rules ...OwnerRule) (*Tokens, error) {
	t := &Tokens{path: path, rules: rules}
	entries, f, fi, err := t.load()
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		f.Close()
		return nil, fmt.Errorf("%w: %s holds no tokens; add one with `e2b-mcp tokens add OWNER --tokens-file %s`",
			ErrTokenFile, path, path)
	}
	t.version.remember(f, fi)
	t.entries = entries
	return t, nil
}

// load reads and checks the tokens file; it returns the file too, open, for t.version.
func (t *Tokens) load() ([]TokenEntry, *os.File, os.FileInfo, error) {
	data, f, fi, err := openPrivateFile(t.path, "tokens file", maxTokenFileBytes, ErrTokenFile)
	if err != nil {
		return nil, nil, nil, err
	}
	entries, err := ParseTokens(t.path, data)
	if err == nil {
		err = t.checkOwners(entries)
	}
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	return entries, f, fi, nil
}

func (t *Tokens) checkOwners(entries []TokenEntry) error {
	for _, e := range entries {
		for _, rule := range t.rules {
			if err := rule(e.Owner); err != nil {
				return fmt.Errorf("%w: %s: token %s: %v", ErrTokenFile, t.path, e.ID, err)
			}
		}
	}
	return nil
}

// Path is the tokens file.
func (t *Tokens) Path() string { return t.path }

// Owner returns the owner of token, comparing its hash with every entry in constant time.
func (t *Tokens) Owner(token string) (string, bool) {
	entries := t.current()
	if token == "" || len(entries) == 0 {
		return "", false
	}
	h := HashToken(token)
	owner, found := "", 0
	for i := range entries {
		if subtle.ConstantTimeCompare(entries[i].Hash[:], h[:]) == 1 {
			owner = entries[i].Owner
			found = 1
		}
	}
	return owner, found == 1
}

// current returns the entries, re-reading the file when it was replaced or modified since the last read.
func (t *Tokens) current() []TokenEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	fi, err := os.Stat(t.path)
	if err == nil && !t.broken && t.version.is(fi) {
		return t.entries
	}
	if err == nil {
		var entries []TokenEntry
		var f *os.File
		entries, f, fi, err = t.load()
		if err == nil {
			t.version.remember(f, fi)
			t.entries, t.broken = entries, false
			return t.entries
		}
	}
	if !t.broken && t.OnReloadError != nil {
		t.OnReloadError(fmt.Errorf("refusing every bearer token until the tokens file is fixed: %w", err))
	}
	t.version.forget()
	t.broken, t.entries = true, nil
	return nil
}

// Owners lists the distinct owners of the loaded tokens, sorted.
func (t *Tokens) Owners() []string {
	var out []string
	for _, e := range t.current() {
		if !slices.Contains(out, e.Owner) {
			out = append(out, e.Owner)
		}
	}
	slices.Sort(out)
	return out
}
