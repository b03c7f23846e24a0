package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
	"github.com/e2b-mcp/e2b-mcp/internal/sealed"
)

// The encrypted key store is the SecretStore of a host without a desktop keyring (a server, a VM, a container):
// one JSON file whose every secret is sealed with AES-256-GCM under a key derived from a master key that the
// operator provides as a file of its own (a systemd credential, a Kubernetes or Docker secret), which is never
// kept beside the store:
//
//	{"version": 1, "check": "<sealed check value>", "secrets": {"alice": "<nonce || ciphertext+tag, base64>"}}
//
// Account names are in the clear; secrets never are. Each sealed secret is bound to its account (GCM's
// additional data), so an entry copied under another account does not open. The check value tells a wrong
// master key from a damaged store before anything is read or written.

// maxKeyStoreBytes bounds the key store file; a store holds a few hundred short secrets at most.
const maxKeyStoreBytes = 16 << 20

const (
	keyStoreVersion = 1
	adCheck         = "e2b-mcp/key-store/check"
	adSecret        = "e2b-mcp/key-store/secret\x00"
	checkText       = "e2b-mcp key store check"
)

var (
	// ErrMasterKey is wrapped by every problem with the master key file: missing, not private, malformed, or not
	// the key the store was sealed with.
	ErrMasterKey = errors.New("unusable master key")
	// ErrKeyStore is wrapped by every problem with the key store file's content or permissions.
	ErrKeyStore = errors.New("unusable key store")
)

// FileStore is the encrypted key store. Every read looks at the file again (re-parsing it only when it changed),
// so a key stored by `e2b-mcp auth login` in another process is seen at once; writes take the store's lock file
// and replace the file atomically. Safe for concurrent use.
type FileStore struct {
	path string
	// afterStep, when set (by tests), is called after each step of writing the file ("written", "synced",
	// "renamed", "directory synced"); an error it returns stops the write there, as a failure or a crash would.
	afterStep func(step string) error

	mu      sync.Mutex
	key     *MasterKey        // the master key the store is sealed under; Reseal replaces it
	version fileVersion       // of the file the secrets come from
	secrets map[string][]byte // account → sealed secret, as last read
}

type keyStoreJSON struct {
	Version int               `json:"version"`
	Check   string            `json:"check"`
	Secrets map[string]string `json:"secrets"`
}

// OpenFileStore opens (without creating) the encrypted key store at path under the master key in masterKeyFile.
// The master key file must be private (no access for group or others), must not lie in the store's directory
// or below it, and must hold 32 bytes: raw, as 64 hex digits, or in base64. When the store exists the key must
// open it. Every error names the file at fault.
func OpenFileStore(path, masterKeyFile string) (*FileStore, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("key store: %w", err)
	}
	if masterKeyFile, err = filepath.Abs(masterKeyFile); err != nil {
		return nil, fmt.Errorf("master key file: %w", err)
	}
	if err := checkApart(path, masterKeyFile); err != nil {
		return nil, err
	}
	key, err := LoadMasterKey(masterKeyFile)
	if err != nil {
		return nil, err
	}
	s := &FileStore{path: path, key: key}
	if _, _, err := s.current(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkApart refuses a master key file kept in the key store's directory or below it.
func checkApart(storePath, masterKeyFile string) error {
	if within(masterKeyFile, filepath.Dir(storePath)) {
		return fmt.Errorf("%w: the master key file %s is kept beside the key store %s, so whoever copies "+
			"one copies both; keep it elsewhere (a systemd credential, a mounted secret, /etc/e2b-mcp)",
			ErrMasterKey, masterKeyFile, storePath)
	}
	return nil
}

// within reports whether path is dir or lies below it, comparing the directories symbolic links lead to.
func within(path, dir string) bool {
	resolve := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return p
	}
	p, d := resolve(filepath.Dir(path)), resolve(dir)
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (s *FileStore) String() string {
	return fmt.Sprintf("the encrypted key store %s (master key file %s)", s.path, s.MasterKey().File())
}

// Path is the key store file.
func (s *FileStore) Path() string { return s.path }

// MasterKey is the master key the store is sealed under.
func (s *FileStore) MasterKey() *MasterKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// Secret opens account's secret.
func (s *FileStore) Secret(account string) (string, error) {
	secrets, key, err := s.current()
	if err != nil {
		return "", err
	}
	box, ok := secrets[account]
	if !ok {
		return "", fmt.Errorf("%w: the key store %s has no entry %q", ErrNotFound, s.path, account)
	}
	plain, err := openEntry(key, account, box)
	if err != nil {
		return "", fmt.Errorf("%w: the entry %q of %s does not open under the master key in %s (was it copied "+
			"from another entry or another store?)", ErrKeyStore, account, s.path, key.File())
	}
	return string(plain), nil
}

// SetSecret seals secret under account and writes the store.
func (s *FileStore) SetSecret(account, secret string) error {
	return s.update(func(secrets map[string][]byte, key *MasterKey) error {
		box, err := sealEntry(key, account, []byte(secret))
		if err != nil {
			return err
		}
		secrets[account] = box
		return nil
	})
}

// DeleteSecret removes account's entry and writes the store.
func (s *FileStore) DeleteSecret(account string) error {
	return s.update(func(secrets map[string][]byte, _ *MasterKey) error {
		if _, ok := secrets[account]; !ok {
			return fmt.Errorf("%w: the key store %s has no entry %q", ErrNotFound, s.path, account)
		}
		delete(secrets, account)
		return nil
	})
}

// Accounts lists the accounts that hold a secret.
func (s *FileStore) Accounts() ([]string, error) {
	secrets, _, err := s.current()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(secrets))
	for a := range secrets {
		out = append(out, a)
	}
	return out, nil
}

// Reseal seals every entry again under next and replaces the file with the result in one step (see
// writePrivateFile): a failure or a crash on the way leaves the file whole under the old master key, and once
// it is renamed into place it is whole under next. Nothing is written when an entry does not open. The store is
// then used under next.
func (s *FileStore) Reseal(next *MasterKey) (int, error) {
	if err := checkApart(s.path, next.File()); err != nil {
		return 0, err
	}
	if _, err := os.Stat(s.path); errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w: there is no key store at %s, so nothing to seal again (is --key-store "+
			"or --state-dir right?)", ErrKeyStore, s.path)
	}
	n := 0
	err := s.locked(func() error {
		secrets, key, err := s.current()
		if err != nil {
			return err
		}
		resealed := make(map[string][]byte, len(secrets))
		for account, box := range secrets {
			plain, err := openEntry(key, account, box)
			if err != nil {
				return fmt.Errorf("%w: the entry %q of %s does not open under the master key in %s, so nothing "+
					"was re-sealed (remove that entry, or restore the store from a backup)", ErrKeyStore, account, s.path, key.File())
			}
			resealed[account], err = sealEntry(next, account, plain)
			clear(plain)
			if err != nil {
				return err
			}
		}
		// Readers of this store wait while the file changes key, so that none reads the new file with the old key.
		s.mu.Lock()
		defer s.mu.Unlock()
		s.version.forget()
		werr := s.write(resealed, next)
		if werr != nil && !s.sealedUnder(next) {
			return werr
		}
		s.key = next
		if werr != nil {
			return fmt.Errorf("the key store %s is sealed under the master key in %s now, but: %w", s.path, next.File(), werr)
		}
		n = len(resealed)
		return nil
	})
	return n, err
}

// sealedUnder reports whether the store's file as it is now opens under key. s.mu is held.
func (s *FileStore) sealedUnder(key *MasterKey) bool {
	data, err := readPrivateFile(s.path, "key store", maxKeyStoreBytes, ErrKeyStore)
	if err != nil {
		return false
	}
	_, err = parseKeyStore(s.path, data, key)
	return err == nil
}

// update changes the store under its lock file: it reads the file as it is now, lets change edit the entries
// (sealed under key), and replaces the file with the result.
func (s *FileStore) update(change func(secrets map[string][]byte, key *MasterKey) error) error {
	return s.locked(func() error {
		secrets, key, err := s.current()
		if err != nil {
			return err
		}
		secrets = maps.Clone(secrets)
		if err := change(secrets, key); err != nil {
			return err
		}
		err = s.write(secrets, key)
		// The next read parses the new file (and so checks that it opens).
		s.mu.Lock()
		s.version.forget()
		s.mu.Unlock()
		return err
	})
}

// locked runs f holding the store's lock file, which every process writing the store takes.
func (s *FileStore) locked(f func() error) error { return lockedUpdate(s.path, "key store", f) }

// write replaces the file with secrets, sealed under key, and a check value sealed under key.
func (s *FileStore) write(secrets map[string][]byte, key *MasterKey) error {
	check, err := newCheck(key)
	if err != nil {
		return err
	}
	f := keyStoreJSON{Version: keyStoreVersion, Check: base64.StdEncoding.EncodeToString(check),
		Secrets: map[string]string{}}
	for a, box := range secrets {
		f.Secrets[a] = base64.StdEncoding.EncodeToString(box)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	if err := writePrivateFile(s.path, "key store", append(data, '\n'), s.afterStep); err != nil {
		return err
	}
	if err := filelock.SyncDir(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	if s.afterStep != nil {
		return s.afterStep("directory synced")
	}
	return nil
}

// current returns the sealed entries and the master key they are sealed under, re-reading the file when it
// changed since the last read. A missing file is an empty store.
func (s *FileStore) current() (map[string][]byte, *MasterKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.version.forget()
		s.secrets = map[string][]byte{}
		return s.secrets, s.key, nil
	}
	if err == nil && s.version.is(fi) {
		return s.secrets, s.key, nil
	}
	data, f, fi, err := openPrivateFile(s.path, "key store", maxKeyStoreBytes, ErrKeyStore)
	if err != nil {
		return nil, nil, err
	}
	secrets, err := parseKeyStore(s.path, data, s.key)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	s.version.remember(f, fi)
	s.secrets = secrets
	return secrets, s.key, nil
}

// parseKeyStore reads the key store file at path, data, and checks that key opens it.
func parseKeyStore(path string, data []byte, key *MasterKey) (map[string][]byte, error) {
	var f keyStoreJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s is not an e2b-mcp key store: %v", ErrKeyStore, path, err)
	}
	if f.Version != keyStoreVersion {
		return nil, fmt.Errorf("%w: %s has version %d; this e2b-mcp reads version %d", ErrKeyStore, path,
			f.Version, keyStoreVersion)
	}
	check, err := base64.StdEncoding.DecodeString(f.Check)
	if err != nil {
		return nil, fmt.Errorf("%w: %s has a damaged check value", ErrKeyStore, path)
	}
	if !opensCheck(key, check) {
		return nil, fmt.Errorf("%w: the master key in %s does not open the key store %s (it was sealed under "+
			"another master key, or the file was damaged)", ErrMasterKey, key.File(), path)
	}
	secrets := make(map[string][]byte, len(f.Secrets))
	for a, v := range f.Secrets {
		box, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: the entry %q is damaged", ErrKeyStore, path, a)
		}
		secrets[a] = box
	}
	return secrets, nil
}

// Every store sealed under a master key (the key store file, the key store in a database) seals alike: each
// entry bound to its account (GCM's additional data), so that an entry copied under another account does not
// open, beside a check value that tells a wrong master key from a damaged entry.

func sealEntry(key *MasterKey, account string, plain []byte) ([]byte, error) {
	return sealed.Seal(key.aead, plain, secretAD(account))
}

func openEntry(key *MasterKey, account string, box []byte) ([]byte, error) {
	return sealed.Open(key.aead, box, secretAD(account))
}

// newCheck seals a new check value under key.
func newCheck(key *MasterKey) ([]byte, error) {
	return sealed.Seal(key.aead, []byte(checkText), []byte(adCheck))
}

// opensCheck reports whether check was sealed under key.
func opensCheck(key *MasterKey, check []byte) bool {
	plain, err := sealed.Open(key.aead, check, []byte(adCheck))
	return err == nil && string(plain) == checkText
}

func secretAD(account string) []byte { return []byte(adSecret + account) }
