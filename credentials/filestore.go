package credentials

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

// MasterKeySize is the length of a master key: 32 bytes.
const MasterKeySize = 32

// maxMasterKeyFileBytes bounds the master key file: the key in raw, hex or base64 form, and some whitespace.
const maxMasterKeyFileBytes = 4096

// maxKeyStoreBytes bounds the key store file; a store holds a few hundred short secrets at most.
const maxKeyStoreBytes = 16 << 20

const (
	keyStoreVersion = 1
	hkdfInfo        = "e2b-mcp encrypted key store v1"
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
	path, masterKeyFile string
	aead                cipher.AEAD

	mu      sync.Mutex
	info    os.FileInfo
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
	var err error
	if path, err = filepath.Abs(path); err != nil {
		return nil, fmt.Errorf("key store: %w", err)
	}
	if masterKeyFile, err = filepath.Abs(masterKeyFile); err != nil {
		return nil, fmt.Errorf("master key file: %w", err)
	}
	if within(masterKeyFile, filepath.Dir(path)) {
		return nil, fmt.Errorf("%w: the master key file %s is kept beside the key store %s, so whoever copies "+
			"one copies both; keep it elsewhere (a systemd credential, a mounted secret, /etc/e2b-mcp)",
			ErrMasterKey, masterKeyFile, path)
	}
	key, err := readMasterKey(masterKeyFile)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	sealingKey, err := hkdf.Key(sha256.New, key, nil, hkdfInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("master key file %s: %w", masterKeyFile, err)
	}
	defer clear(sealingKey)
	block, err := aes.NewCipher(sealingKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	s := &FileStore{path: path, masterKeyFile: masterKeyFile, aead: aead}
	if _, err := s.current(); err != nil {
		return nil, err
	}
	return s, nil
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

// readMasterKey reads and decodes a master key file. The error never contains the file's content.
func readMasterKey(path string) ([]byte, error) {
	data, _, err := readPrivateFile(path, "master key file", maxMasterKeyFileBytes, ErrMasterKey)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: the master key file %s does not exist (make one with `umask 077; openssl rand "+
			"-hex 32 > %s`, and keep it out of the state directory and its backups)", ErrMasterKey, path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMasterKey, err)
	}
	defer clear(data)
	if len(data) == MasterKeySize {
		return bytes.Clone(data), nil
	}
	text := strings.TrimSpace(string(data))
	if key, err := hex.DecodeString(text); err == nil && len(key) == MasterKeySize {
		return key, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(text); err == nil && len(key) == MasterKeySize {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%w: the master key file %s does not hold a %d-byte key (raw, 64 hex digits or "+
		"base64); make one with `openssl rand -hex 32`", ErrMasterKey, path, MasterKeySize)
}

func (s *FileStore) String() string {
	return fmt.Sprintf("the encrypted key store %s (master key file %s)", s.path, s.masterKeyFile)
}

// Path is the key store file.
func (s *FileStore) Path() string { return s.path }

// Secret opens account's secret.
func (s *FileStore) Secret(account string) (string, error) {
	secrets, err := s.current()
	if err != nil {
		return "", err
	}
	box, ok := secrets[account]
	if !ok {
		return "", fmt.Errorf("%w: the key store %s has no entry %q", ErrNotFound, s.path, account)
	}
	plain, err := sealed.Open(s.aead, box, secretAD(account))
	if err != nil {
		return "", fmt.Errorf("%w: the entry %q of %s does not open under the master key in %s (was it copied "+
			"from another entry or another store?)", ErrKeyStore, account, s.path, s.masterKeyFile)
	}
	return string(plain), nil
}

// SetSecret seals secret under account and writes the store.
func (s *FileStore) SetSecret(account, secret string) error {
	box, err := sealed.Seal(s.aead, []byte(secret), secretAD(account))
	if err != nil {
		return err
	}
	return s.update(func(secrets map[string][]byte) error {
		secrets[account] = box
		return nil
	})
}

// DeleteSecret removes account's entry and writes the store.
func (s *FileStore) DeleteSecret(account string) error {
	return s.update(func(secrets map[string][]byte) error {
		if _, ok := secrets[account]; !ok {
			return fmt.Errorf("%w: the key store %s has no entry %q", ErrNotFound, s.path, account)
		}
		delete(secrets, account)
		return nil
	})
}

// Accounts lists the accounts that hold a secret.
func (s *FileStore) Accounts() ([]string, error) {
	secrets, err := s.current()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(secrets))
	for a := range secrets {
		out = append(out, a)
	}
	return out, nil
}

// update changes the store under its lock file: it reads the file as it is now, lets change edit the entries,
// and replaces the file with the result.
func (s *FileStore) update(change func(map[string][]byte) error) error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	lock, err := os.OpenFile(s.path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	defer lock.Close()
	if err := filelock.Lock(lock); err != nil && !errors.Is(err, filelock.ErrUnsupported) {
		return fmt.Errorf("key store: locking %s: %w", lock.Name(), err)
	}
	secrets, err := s.current()
	if err != nil {
		return err
	}
	secrets = maps.Clone(secrets)
	if err := change(secrets); err != nil {
		return err
	}
	check, err := sealed.Seal(s.aead, []byte(checkText), []byte(adCheck))
	if err != nil {
		return err
	}
	f := keyStoreJSON{Version: keyStoreVersion, Check: base64.StdEncoding.EncodeToString(check), Secrets: map[string]string{}}
	for a, box := range secrets {
		f.Secrets[a] = base64.StdEncoding.EncodeToString(box)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	if err := writePrivateFile(s.path, "key store", append(data, '\n')); err != nil {
		return err
	}
	if err := filelock.SyncDir(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	// The next read parses the new file (and so checks that it opens).
	s.mu.Lock()
	s.info = nil
	s.mu.Unlock()
	return nil
}

// current returns the sealed entries, re-reading the file when it changed since the last read. A missing file is
// an empty store.
func (s *FileStore) current() (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.info, s.secrets = nil, map[string][]byte{}
		return s.secrets, nil
	}
	if err == nil && sameVersion(s.info, fi) {
		return s.secrets, nil
	}
	data, fi, err := readPrivateFile(s.path, "key store", maxKeyStoreBytes, ErrKeyStore)
	if err != nil {
		return nil, err
	}
	secrets, err := s.parse(data)
	if err != nil {
		return nil, err
	}
	s.info, s.secrets = fi, secrets
	return secrets, nil
}

// parse reads a key store file and checks that the master key opens it.
func (s *FileStore) parse(data []byte) (map[string][]byte, error) {
	var f keyStoreJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s is not an e2b-mcp key store: %v", ErrKeyStore, s.path, err)
	}
	if f.Version != keyStoreVersion {
		return nil, fmt.Errorf("%w: %s has version %d; this e2b-mcp reads version %d", ErrKeyStore, s.path, f.Version, keyStoreVersion)
	}
	check, err := base64.StdEncoding.DecodeString(f.Check)
	if err != nil {
		return nil, fmt.Errorf("%w: %s has a damaged check value", ErrKeyStore, s.path)
	}
	if plain, err := sealed.Open(s.aead, check, []byte(adCheck)); err != nil || string(plain) != checkText {
		return nil, fmt.Errorf("%w: the master key in %s does not open the key store %s (it was sealed under "+
			"another master key, or the file was damaged)", ErrMasterKey, s.masterKeyFile, s.path)
	}
	secrets := make(map[string][]byte, len(f.Secrets))
	for a, v := range f.Secrets {
		box, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: the entry %q is damaged", ErrKeyStore, s.path, a)
		}
		secrets[a] = box
	}
	return secrets, nil
}

func secretAD(account string) []byte { return []byte(adSecret + account) }
