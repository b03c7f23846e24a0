package state

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/zalando/go-keyring"
	bolt "go.etcd.io/bbolt"
)

// DataKeySize is the length of the data key: AES-256.
const DataKeySize = 32

// KeySource supplies the data key that seals secrets in the store (envelope encryption: the key lives elsewhere,
// normally in the OS keyring). DataKey returns DataKeySize bytes.
type KeySource interface {
	DataKey() ([]byte, error)
}

// KeyringKeySource gets (or on first use creates and stores) a random 32-byte data key in the OS keyring via
// github.com/zalando/go-keyring under service and account. Unit tests use keyring.MockInit().
//
// The Store asks for the key while it holds the file's exclusive lock the first time it seals a secret, so
// processes sharing a state directory do not race to create two different keys.
func KeyringKeySource(service, account string) KeySource {
	return keyringKeySource{service: service, account: account}
}

type keyringKeySource struct{ service, account string }

func (k keyringKeySource) DataKey() ([]byte, error) {
	encoded, err := keyring.Get(k.service, k.account)
	if errors.Is(err, keyring.ErrNotFound) {
		key := make([]byte, DataKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generating a data key: %w", err)
		}
		if err := keyring.Set(k.service, k.account, base64.StdEncoding.EncodeToString(key)); err != nil {
			return nil, fmt.Errorf("storing a new data key in the OS keyring (service %q, account %q): %w",
				k.service, k.account, err)
		}
		// Use what the keyring holds now rather than our own key: of two processes storing a key at the same
		// moment, the later reader then agrees with the winner. The Store's key check catches any remaining race.
		encoded, err = keyring.Get(k.service, k.account)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the data key from the OS keyring (service %q, account %q): %w",
			k.service, k.account, err)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(key) != DataKeySize {
		return nil, fmt.Errorf("the OS keyring entry (service %q, account %q) does not hold a %d-byte base64 data key",
			k.service, k.account, DataKeySize)
	}
	return key, nil
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

// seal encrypts plaintext as nonce || ciphertext+tag.
func seal(aead cipher.AEAD, plaintext, additional []byte) ([]byte, error) {
	out := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, fmt.Errorf("generating a nonce: %w", err)
	}
	return aead.Seal(out, out, plaintext, additional), nil
}

func unseal(aead cipher.AEAD, sealed, additional []byte) ([]byte, error) {
	if len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("sealed value too short")
	}
	n := aead.NonceSize()
	return aead.Open(nil, sealed[:n], sealed[n:], additional)
}

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
		sealed, err := seal(aead, []byte(keyCheckText), []byte(adKeyCheck))
		if err != nil {
			return nil, fmt.Errorf("state store %s: %w", s.path, err)
		}
		if err := meta.Put([]byte(metaKeyCheck), sealed); err != nil {
			return nil, fmt.Errorf("state store %s: %w", s.path, err)
		}
		return aead, nil
	}
	if plain, err := unseal(aead, check, []byte(adKeyCheck)); err != nil || string(plain) != keyCheckText {
		return nil, fmt.Errorf("state store %s: cannot decrypt its secrets: the data key from the key source is not "+
			"the one they were sealed with (was the OS keyring entry replaced or deleted?)", s.path)
	}
	s.aead = aead
	return aead, nil
}

func sandboxTokenAD(key []byte) []byte {
	return append([]byte(adSandboxToken), key...)
}
