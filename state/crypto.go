package state

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync"

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
	return aeadOf(key, where)
}

// aeadOf makes the AES-256-GCM AEAD of a data key.
func aeadOf(key []byte, where string) (cipher.AEAD, error) {
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

// PendingKeySource is a KeySource that may also hold the data key of a rotation stopped between its two steps
// (see credentials.RotateDataKey): the store's secrets are then sealed under the pending key while DataKey still
// returns the old one, and the store uses whichever of the two its check value names.
type PendingKeySource interface {
	KeySource
	// PendingDataKey returns the pending data key, or nil when there is none.
	PendingDataKey() ([]byte, error)
}

// ErrDataKeyChanged is wrapped when the store's secrets were sealed again under another data key (a rotation)
// after this process fetched its key: the process must not seal a token under a key that no longer opens the
// store, so it refuses every operation on sealed values until it is restarted.
var ErrDataKeyChanged = errors.New("the state store's data key was rotated")

// keyCache is a store's AEAD for its data key, kept once a committed check value has confirmed it, with that
// check value: every later use compares the check value the transaction sees with it, so a process holding a
// key that a rotation replaced stops instead of writing a token nothing will open.
type keyCache struct {
	mu    sync.Mutex
	aead  cipher.AEAD
	check []byte
}

// cipher returns the AEAD for the store whose check value (as the current transaction sees it) is check, nil
// when there is none. create, nil in a read-only transaction, stores a first check value and returns the value
// the store holds afterwards (another process's may have won).
func (c *keyCache) cipher(keys KeySource, where string, check []byte, create func(box []byte) ([]byte,
	error)) (cipher.AEAD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.aead != nil {
		if bytes.Equal(check, c.check) {
			return c.aead, nil
		}
		return nil, fmt.Errorf("%w: state store %s: its secrets were sealed again under a new data key (e2b-mcp keys "+
			"rotate-data) after this process read the old one; restart it", ErrDataKeyChanged, where)
	}
	aead, err := dataCipher(keys, where)
	if err != nil {
		return nil, err
	}
	committed := check != nil
	if check == nil {
		if create == nil {
			return nil, fmt.Errorf("%w: %s holds sealed secrets but no data key check value", ErrUnusable, where)
		}
		box, err := newKeyCheck(aead, where)
		if err != nil {
			return nil, err
		}
		if check, err = create(box); err != nil {
			return nil, err
		}
	}
	if aead, err = checkedCipher(keys, aead, check, where); err != nil {
		return nil, err
	}
	if committed {
		c.aead, c.check = aead, bytes.Clone(check)
	}
	return aead, nil
}

// checkedCipher returns aead when check is its check value, else the pending key's AEAD when check is that
// one's.
func checkedCipher(keys KeySource, aead cipher.AEAD, check []byte, where string) (cipher.AEAD, error) {
	err := verifyKeyCheck(aead, check, where)
	pks, ok := keys.(PendingKeySource)
	if err == nil || !ok {
		return aead, err
	}
	pending, perr := pks.PendingDataKey()
	if perr != nil || pending == nil {
		return nil, err
	}
	next, perr := aeadOf(pending, where)
	if perr != nil || verifyKeyCheck(next, check, where) != nil {
		return nil, err
	}
	return next, nil
}

// reset forgets the AEAD (a closed store, or one whose key this process has just replaced).
func (c *keyCache) reset() {
	c.mu.Lock()
	c.aead, c.check = nil, nil
	c.mu.Unlock()
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

// cipherFor is the bbolt file's keyCache.cipher: the check value is in the meta bucket, and a write transaction
// adds one when there is none.
func (s *Bolt) cipherFor(tx *bolt.Tx) (cipher.AEAD, error) {
	meta, err := s.bucket(tx, bucketMeta)
	if err != nil {
		return nil, err
	}
	var create func(box []byte) ([]byte, error)
	if tx.Writable() {
		create = func(box []byte) ([]byte, error) {
			if err := meta.Put([]byte(metaKeyCheck), box); err != nil {
				return nil, fmt.Errorf("state store %s: %w", s.path, err)
			}
			return box, nil
		}
	}
	return s.key.cipher(s.keys, s.path, meta.Get([]byte(metaKeyCheck)), create)
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
