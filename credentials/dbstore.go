package credentials

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// DatabaseStore is the encrypted key store of replicas on several hosts: the entries of the key store file,
// sealed exactly as FileStore seals them (under the same master key, each bound to its account), kept in the
// PostgreSQL database the replicas share (state.Postgres's sealed secrets). The database never holds the master
// key or a secret in the clear; each host holds the master key file. A key that a member connects through one
// replica is thus read by every replica at its next call. Every read and write checks, in its transaction, that
// the store is still sealed under this store's master key, so that a replica left with the old key after a
// rotation fails clearly and never writes under it. Safe for concurrent use; Close it when done.
type DatabaseStore struct {
	db *state.Postgres

	mu  sync.Mutex
	key *MasterKey // Reseal replaces it
}

var _ Resealer = (*DatabaseStore)(nil)

// OpenDatabaseStore opens the key store in the database at dbURL (creating or migrating the store's tables)
// under the master key in masterKeyFile, which must open the store's check value (the first store opened on a
// database writes it).
func OpenDatabaseStore(dbURL, masterKeyFile string) (*DatabaseStore, error) {
	key, err := LoadMasterKey(masterKeyFile)
	if err != nil {
		return nil, err
	}
	check, err := newCheck(key)
	if err != nil {
		return nil, err
	}
	db, err := state.OpenPostgres(dbURL, state.Options{Keys: state.NoDataKey("the key store opens no " +
		"record of the state store")})
	if err != nil {
		return nil, err
	}
	s := &DatabaseStore{db: db, key: key}
	if check, err = db.SealedSecretsCheck(check); err == nil {
		err = s.sealedUnder(key)(check)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *DatabaseStore) where() string { return "the key store in " + s.db.Location() }

func (s *DatabaseStore) String() string {
	return fmt.Sprintf("the encrypted key store in %s (master key file %s)", s.db.Location(), s.MasterKey().File())
}

// MasterKey is the master key the store is sealed under.
func (s *DatabaseStore) MasterKey() *MasterKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key
}

// sealedUnder is the check that the store is sealed under key.
func (s *DatabaseStore) sealedUnder(key *MasterKey) state.SecretsCheck {
	return func(check []byte) error {
		if check == nil || !opensCheck(key, check) {
			return fmt.Errorf("%w: the master key in %s does not open %s (it was sealed under another master key: "+
				"after `e2b-mcp keys rotate-master`, give every replica and command the new one)", ErrMasterKey,
				key.File(), s.where())
		}
		return nil
	}
}

// Close closes the database connections.
func (s *DatabaseStore) Close() error { return s.db.Close() }

// Secret opens account's secret.
func (s *DatabaseStore) Secret(account string) (string, error) {
	key := s.MasterKey()
	box, err := s.db.SealedSecret(account, s.sealedUnder(key))
	if errors.Is(err, state.ErrNotFound) {
		return "", fmt.Errorf("%w: %s has no entry %q", ErrNotFound, s.where(), account)
	}
	if err != nil {
		return "", err
	}
	plain, err := openEntry(key, account, box)
	if err != nil {
		return "", fmt.Errorf("%w: the entry %q of %s does not open under the master key in %s (was it copied "+
			"from another entry or another store?)", ErrKeyStore, account, s.where(), key.File())
	}
	return string(plain), nil
}

// SetSecret seals secret under account and stores it.
func (s *DatabaseStore) SetSecret(account, secret string) error {
	key := s.MasterKey()
	box, err := sealEntry(key, account, []byte(secret))
	if err != nil {
		return err
	}
	_, err = s.db.PutSealedSecret(account, box, false, s.sealedUnder(key))
	return err
}

// DeleteSecret removes account's entry.
func (s *DatabaseStore) DeleteSecret(account string) error {
	err := s.db.DeleteSealedSecret(account)
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("%w: %s has no entry %q", ErrNotFound, s.where(), account)
	}
	return err
}

// Reseal seals every entry again under next, with the check value, in one transaction: the database is whole
// under the old master key or whole under next, never a mix. Nothing changes when an entry does not open. The
// store is then used under next; replicas still holding the old key fail at their next read or write.
func (s *DatabaseStore) Reseal(next *MasterKey) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	check, err := newCheck(next)
	if err != nil {
		return 0, err
	}
	cur := s.key
	n, err := s.db.ResealSecrets(s.sealedUnder(cur), func(account string, box []byte) ([]byte, error) {
		plain, err := openEntry(cur, account, box)
		if err != nil {
			return nil, fmt.Errorf("%w: the entry %q of %s does not open under the master key in %s, so nothing "+
				"was re-sealed (remove that entry with `e2b-mcp auth logout`)", ErrKeyStore, account, s.where(), cur.File())
		}
		defer clear(plain)
		return sealEntry(next, account, plain)
	}, check)
	if err != nil {
		return 0, err
	}
	s.key = next
	return n, nil
}

// ImportFile copies into the database the entries of the key store file at path that it does not hold yet, as
// they are sealed (the file must open under this store's master key), and returns their accounts, sorted. It is
// how a deployment that kept a copy of one key store file on every host moves to the database; the file is not
// read again.
func (s *DatabaseStore) ImportFile(path string) ([]string, error) {
	key := s.MasterKey()
	fs, err := OpenFileStore(path, key.File())
	if err != nil {
		return nil, err
	}
	entries, _, err := fs.current()
	if err != nil {
		return nil, err
	}
	var added []string
	for account, box := range entries {
		stored, err := s.db.PutSealedSecret(account, box, true, s.sealedUnder(key))
		if err != nil {
			return added, err
		}
		if stored {
			added = append(added, account)
		}
	}
	slices.Sort(added)
	return added, nil
}
