package credentials

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// SecretStore keeps e2b-mcp's secrets by account name: each owner's E2B API key (the account is the owner's
// name), the state store's data key (DataKeyAccount), and any other secret the server must hold. There are two:
// the OS keyring (Keyring) for a desktop, and the encrypted key store for a host without one: in a file
// (FileStore), or in the database that replicas on several hosts share (DatabaseStore).
// Implementations never put a secret in an error message.
type SecretStore interface {
	// Secret returns the secret stored under account, or an error wrapping ErrNotFound.
	Secret(account string) (string, error)
	// SetSecret stores secret under account, replacing any secret stored there.
	SetSecret(account, secret string) error
	// DeleteSecret removes the secret stored under account; it returns an error wrapping ErrNotFound when
	// there was none.
	DeleteSecret(account string) error
	// String says where the secrets are, for a human: "the OS keyring (service "e2b-mcp")", or the key
	// store's and master key's files.
	String() string
}

// ErrNotFound means a secret store holds nothing under an account.
var ErrNotFound = errors.New("no secret is stored under this account")

// APIKey returns owner's E2B API key from store, or an error wrapping ErrNoKey when none is stored. Every call asks
// the store (a KeyringCache answers from memory only while the keyring says the entry is unchanged), so a key
// stored or removed by `e2b-mcp auth login` or `logout` in another process is seen at once.
func APIKey(store SecretStore, owner string) (string, error) {
	if err := CheckOwner(owner); err != nil {
		return "", err
	}
	key, err := store.Secret(owner)
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%w for owner %q", ErrNoKey, owner)
	}
	if err != nil {
		return "", fmt.Errorf("reading the E2B API key of %q: %w", owner, err)
	}
	return key, nil
}

// SetAPIKey stores owner's E2B API key in store after checking its form.
func SetAPIKey(store SecretStore, owner, key string) error {
	if err := CheckOwner(owner); err != nil {
		return err
	}
	if err := CheckAPIKeyForm(key); err != nil {
		return err
	}
	if err := store.SetSecret(owner, key); err != nil {
		return fmt.Errorf("storing the E2B API key of %q: %w", owner, err)
	}
	return nil
}

// DeleteAPIKey removes owner's E2B API key from store; it returns an error wrapping ErrNoKey when there was none.
func DeleteAPIKey(store SecretStore, owner string) error {
	if err := CheckOwner(owner); err != nil {
		return err
	}
	err := store.DeleteSecret(owner)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w for owner %q", ErrNoKey, owner)
	}
	if err != nil {
		return fmt.Errorf("removing the E2B API key of %q: %w", owner, err)
	}
	return nil
}

// StateKeys is the source of the state store's data key: the secret DataKeyAccount of store, a random key
// created on first use (envelope encryption: the store's file never holds the key that seals it).
//
// The state store asks for the key while it holds its file's exclusive lock the first time it seals a secret, so
// processes sharing a state directory do not race to create two different keys.
func StateKeys(store SecretStore) state.KeySource { return dataKeySource{store: store} }

type dataKeySource struct{ store SecretStore }

func (d dataKeySource) DataKey() ([]byte, error) {
	encoded, err := d.store.Secret(DataKeyAccount)
	if errors.Is(err, ErrNotFound) {
		key := make([]byte, state.DataKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generating a data key: %w", err)
		}
		if err := d.store.SetSecret(DataKeyAccount, base64.StdEncoding.EncodeToString(key)); err != nil {
			return nil, fmt.Errorf("storing a new data key (account %q): %w", DataKeyAccount, err)
		}
		// Use what the store holds now rather than our own key: of two processes storing a key at the same
		// moment, the later reader then agrees with the winner. The state store's key check catches any
		// remaining race.
		encoded, err = d.store.Secret(DataKeyAccount)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the data key (account %q): %w", DataKeyAccount, err)
	}
	return decodeDataKey(d.store, DataKeyAccount, encoded)
}

// PendingDataKey is the new key of a rotation stopped before it replaced DataKeyAccount; nil when there is none.
func (d dataKeySource) PendingDataKey() ([]byte, error) {
	encoded, err := d.store.Secret(NextDataKeyAccount)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the pending data key (account %q): %w", NextDataKeyAccount, err)
	}
	return decodeDataKey(d.store, NextDataKeyAccount, encoded)
}

func decodeDataKey(store SecretStore, account, encoded string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(key) != state.DataKeySize {
		return nil, fmt.Errorf("the entry %q of %s does not hold a %d-byte base64 data key",
			account, store, state.DataKeySize)
	}
	return key, nil
}
