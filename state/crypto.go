package state

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/e2b-mcp/e2b-mcp/internal/sealed"
)

// DataKeySize is the length of the data key: AES-256.
const DataKeySize = 32

// KeySource supplies the data key that seals secrets in the store (envelope encryption: the key lives elsewhere,
// in the OS keyring or the encrypted key store; see credentials.StateKeys). DataKey returns DataKeySize bytes.
type KeySource interface {
	DataKey() ([]byte, error)
}

// StaticKeySource is for tests and benchmarks of other packages: it always returns a copy of key.
func StaticKeySource(key []byte) KeySource {
	return staticKeySource(append([]byte(nil), key...))
}

type staticKeySource []byte

func (k staticKeySource) DataKey() ([]byte, error) { return append([]byte(nil), k...), nil }

// Additional-data domains: a sealed value is bound to its purpose and to its record's key.
const (
	adKeyCheck     = "e2b-mcp/key-check"
	adSandboxToken = "e2b-mcp/sandbox-token\x00"
	keyCheckText   = "e2b-mcp data key check"
)

// cipherFor returns the AEAD for the data key, fetching the key on first use and checking it against the key-check
// value in the file. In a write transaction without a key-check value it writes one; the AEAD is only cached once
// a committed check value has confirmed it.
func (s *Store) cipherFor(tx *bolt.Tx) (cipher.AEAD, error) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.aead != nil {
		return s.aead, nil
	}
	key, err := s.keys.DataKey()
	if err != nil {
		return nil, fmt.Errorf("state store %s: getting the data key: %w", s.path, err)
	}
	defer clear(key)
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("state store %s: the data key is %d bytes, want %d", s.path, len(key), DataKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", s.path, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", s.path, err)
	}
	meta, err := s.bucket(tx, bucketMeta)
	if err != nil {
		return nil, err
	}
	check := meta.Get([]byte(metaKeyCheck))
	if check == nil {
		if !tx.Writable() {
			return nil, fmt.Errorf("%w: %s holds sealed secrets but no data key check value", ErrUnusable, s.path)
		}
		box, err := sealed.Seal(aead, []byte(keyCheckText), []byte(adKeyCheck))
		if err != nil {
			return nil, fmt.Errorf("state store %s: %w", s.path, err)
		}
		if err := meta.Put([]byte(metaKeyCheck), box); err != nil {
			return nil, fmt.Errorf("state store %s: %w", s.path, err)
		}
		return aead, nil
	}
	if plain, err := sealed.Open(aead, check, []byte(adKeyCheck)); err != nil || string(plain) != keyCheckText {
		return nil, fmt.Errorf("state store %s: cannot decrypt its secrets: the data key from the key source is not "+
			"the one they were sealed with (was its entry in the OS keyring or the key store replaced or deleted?)", s.path)
	}
	s.aead = aead
	return aead, nil
}

func sandboxTokenAD(key []byte) []byte {
	return append([]byte(adSandboxToken), key...)
}
