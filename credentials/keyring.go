// Package credentials keeps e2b-mcp's secrets: each owner's E2B API key and the state store's data key in a
// SecretStore, either the OS keyring (macOS Keychain, Windows Credential Manager, the Secret Service on Linux)
// through zalando/go-keyring, or, on a host without one, an encrypted key store sealed under a master key file;
// and the hashed bearer tokens that authenticate HTTP callers.
//
// Secrets never appear in an error message of this package.
package credentials

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/zalando/go-keyring"
)

// Service is the keyring service under which every e2b-mcp secret is stored.
const Service = "e2b-mcp"

// DataKeyAccount is the keyring account holding the state store's data key. It is not a valid owner name, so an
// owner's API key can never overwrite it.
const DataKeyAccount = "state-data-key"

// NextDataKeyAccount holds the new data key while a rotation is under way (see RotateDataKey). It is reserved
// as DataKeyAccount is.
const NextDataKeyAccount = "state-data-key-next"

var (
	// ErrNoKey means no E2B API key is stored for the owner.
	ErrNoKey = errors.New("no E2B API key is stored")
	// ErrKeyForm means a string does not have the form of an E2B API key (e2b_ followed by hex digits).
	ErrKeyForm = errors.New("not an E2B API key: it must be e2b_ followed by lowercase hex digits")
	// ErrOwnerName means an owner name cannot be used as a keyring account.
	ErrOwnerName = errors.New("invalid owner name")
)

// apiKeyForm is the form E2B's SDKs check before sending a key.
var apiKeyForm = regexp.MustCompile(`^e2b_[0-9a-f]+$`)

// CheckAPIKeyForm reports whether key has the form of an E2B API key. The error never contains the key.
func CheckAPIKeyForm(key string) error {
	if !apiKeyForm.MatchString(key) {
		return ErrKeyForm
	}
	return nil
}

// LastFour is the part of a secret that may be shown to a human: its last four characters, or nothing at all
// when the secret is too short for that to leave most of it hidden.
func LastFour(secret string) string {
	if len(secret) < 12 {
		return ""
	}
	return secret[len(secret)-4:]
}

// CheckOwner rejects owner names that cannot name a keyring account or a state record.
func CheckOwner(owner string) error {
	switch {
	case owner == "":
		return fmt.Errorf("%w: the owner name is empty", ErrOwnerName)
	case len(owner) > 256:
		return fmt.Errorf("%w: the owner name is longer than 256 bytes", ErrOwnerName)
	case owner == DataKeyAccount || owner == NextDataKeyAccount:
		return fmt.Errorf("%w: %q is reserved for the state store's data key", ErrOwnerName, owner)
	}
	for _, r := range owner {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: the owner name contains a control character", ErrOwnerName)
		}
	}
	return nil
}

// Keyring is the SecretStore of the OS keyring: each account is an entry of one keyring service. The zero value
// uses Service.
type Keyring struct {
	// Service is the keyring service; empty means Service.
	Service string
}

func (k Keyring) service() string {
	if k.Service == "" {
		return Service
	}
	return k.Service
}

func (k Keyring) String() string { return fmt.Sprintf("the OS keyring (service %q)", k.service()) }

// Secret reads account's entry from the OS keyring.
func (k Keyring) Secret(account string) (string, error) {
	v, err := keyring.Get(k.service(), account)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", fmt.Errorf("%w: %s has no entry %q", ErrNotFound, k, account)
	}
	if err != nil {
		return "", keyringError(err)
	}
	return v, nil
}

// SetSecret writes account's entry in the OS keyring.
func (k Keyring) SetSecret(account, secret string) error {
	if err := keyring.Set(k.service(), account, secret); err != nil {
		return keyringError(err)
	}
	return nil
}

// DeleteSecret removes account's entry from the OS keyring.
func (k Keyring) DeleteSecret(account string) error {
	err := keyring.Delete(k.service(), account)
	if errors.Is(err, keyring.ErrNotFound) {
		return fmt.Errorf("%w: %s has no entry %q", ErrNotFound, k, account)
	}
	if err != nil {
		return keyringError(err)
	}
	return nil
}

// keyringError explains a keyring failure. The underlying error comes from the OS keyring and holds no secret.
func keyringError(err error) error {
	return fmt.Errorf("in the OS keyring: %w (is a keyring service running and unlocked? On Linux e2b-mcp "+
		"needs the Secret Service, e.g. gnome-keyring or KeePassXC; on a host without one, use the encrypted "+
		"key store: --master-key-file)", err)
}
