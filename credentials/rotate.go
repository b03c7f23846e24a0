package credentials

import (
	"errors"
	"fmt"
	"os"
)

// Resealer is a secret store sealed under a master key that can seal everything it holds again under another
// one, for an operator whose master key may have leaked. The encrypted key store (FileStore) is one; a store in a
// database joins by sealing its rows again in one transaction.
type Resealer interface {
	SecretStore
	// MasterKey is the master key the store is sealed under.
	MasterKey() *MasterKey
	// Reseal seals every secret again under next in one atomic step: whatever fails, and wherever the process
	// dies, the store is afterwards whole under its old master key or whole under next, never a mix, and no
	// secret is written in the clear on the way. From then on the store is used under next. It returns how many
	// secrets it sealed again.
	Reseal(next *MasterKey) (int, error)
}

// RotateMasterKey seals everything store holds again under the master key in newMasterKeyFile, which is checked
// as every master key file is (it must exist, be private and hold a key) and must hold another key than the
// store's. It returns how many secrets it sealed again.
func RotateMasterKey(store Resealer, newMasterKeyFile string) (int, error) {
	next, err := LoadMasterKey(newMasterKeyFile)
	if err != nil {
		return 0, err
	}
	if cur := store.MasterKey(); next.Same(cur) {
		return 0, fmt.Errorf("%w: %s holds the same key as %s, so re-sealing under it would change nothing; make a "+
			"new one with `umask 077; openssl rand -hex 32 > FILE`", ErrMasterKey, next.File(), cur.File())
	}
	return store.Reseal(next)
}

// RotateFileStore is RotateMasterKey for the encrypted key store at path, sealed under the master key in
// oldMasterKeyFile. When the old key does not open the store but the new one does (an earlier rotation got that
// far before it was stopped), the error says so.
func RotateFileStore(path, oldMasterKeyFile, newMasterKeyFile string) (int, error) {
	store, err := OpenFileStore(path, oldMasterKeyFile)
	if err != nil {
		if _, serr := os.Stat(path); serr == nil && errors.Is(err, ErrMasterKey) {
			if done, derr := OpenFileStore(path, newMasterKeyFile); derr == nil {
				return 0, fmt.Errorf("%w: the key store %s is sealed under the master key in %s already (an "+
					"earlier rotation got that far); nothing was changed: use that file from now on",
					ErrMasterKey, done.Path(), done.MasterKey().File())
			}
		}
		return 0, err
	}
	return RotateMasterKey(store, newMasterKeyFile)
}
