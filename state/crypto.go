package state

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
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

// dataCipher fetches the data key from keys and makes its AEAD; where names the store in errors.
func dataCipher(keys KeySource, where string) (cipher.AEAD, error) {
	key, err := keys.DataKey()
	if err != nil {
		return nil, fmt.Errorf("state store %s: getting the data key: %w", where, err)
	}
	defer clear(key)
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("state store %s: the data key is %d bytes, want %d", where, len(key), DataKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", where, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", where, err)
	}
	return aead, nil
}

// newKeyCheck seals the key-check value a store keeps beside the secrets it seals under aead.
func newKeyCheck(aead cipher.AEAD, where string) ([]byte, error) {
	box, err := sealed.Seal(aead, []byte(keyCheckText), []byte(adKeyCheck))
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", where, err)
	}
	return box, nil
}

// verifyKeyCheck tells whether aead is the data key the store's secrets were sealed with.
func verifyKeyCheck(aead cipher.AEAD, check []byte, where string) error {
	if plain, err := sealed.Open(aead, check, []byte(adKeyCheck)); err != nil || string(plain) != keyCheckText {
		return fmt.Errorf("state store %s: cannot decrypt its secrets: the data key from the key source is not "+
			"the one they were sealed with (was its entry in the OS keyring or the key store replaced or deleted?)", where)
	}
	return nil
}

// cipherFor returns the AEAD for the data key, fetching the key on first use and checking it against the key-check
// value in the file. In a write transaction without a key-check value it writes one; the AEAD is only cached once
// a committed check value has confirmed it.
func (s *Bolt) cipherFor(tx *bolt.Tx) (cipher.AEAD, error) {
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if s.aead != nil {
		return s.aead, nil
	}
	aead, err := dataCipher(s.keys, s.path)
	if err != nil {
		return nil, err
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
		box, err := newKeyCheck(aead, s.path)
		if err != nil {
			return nil, err
		}
		if err := meta.Put([]byte(metaKeyCheck), box); err != nil {
			return nil, fmt.Errorf("state store %s: %w", s.path, err)
		}
		return aead, nil
	}
	if err := verifyKeyCheck(aead, check, s.path); err != nil {
		return nil, err
	}
	s.aead = aead
	return aead, nil
}

// sandboxTokenAD binds a sealed envd token to its record: "owner\x00id" (the record's key in the bbolt file).
func sandboxTokenAD(owner, id string) []byte {
	ad := make([]byte, 0, len(adSandboxToken)+len(owner)+1+len(id))
	ad = append(ad, adSandboxToken...)
	ad = append(ad, owner...)
	ad = append(ad, 0)
	return append(ad, id...)
}

// NoDataKey is the key source of a store opened for what the data key does not seal (the approvals, the
// encrypted key store's entries): asked for the key, it refuses with the error why.
func NoDataKey(why string) KeySource { return noDataKey(why) }

type noDataKey string

func (n noDataKey) DataKey() ([]byte, error) { return nil, errors.New(string(n)) }
