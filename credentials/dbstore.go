package credentials

import (
	"errors"
	"fmt"
	"slices"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// DatabaseStore is the encrypted key store of replicas on several hosts: the entries of the key store file,
// sealed exactly as FileStore seals them (under the same master key, each bound to its account), kept in the
// PostgreSQL database the replicas share (state.Postgres's sealed secrets). The database never holds the master
// key or a secret in the clear; each host holds the master key file. A key that a member connects through one
// replica is thus read by every replica at its next call. Safe for concurrent use; Close it when done.
type DatabaseStore struct {
	db  *state.Postgres
	key *MasterKey
}

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
	db, err := state.OpenPostgres(dbURL, state.Options{Keys: state.NoDataKey("the key store opens no record of the state store")})
	if err != nil {
		return nil, err
	}
	s := &DatabaseStore{db: db, key: key}
	if check, err = db.SealedSecretsCheck(check); err == nil && !opensCheck(key, check) {
		err = fmt.Errorf("%w: the master key in %s does not open %s (it was sealed under another master key, or "+
			"the check value was damaged)", ErrMasterKey, key.File(), s.where())
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *DatabaseStore) where() string { return "the key store in " + s.db.Location() }

func (s *DatabaseStore) String() string {
	return fmt.Sprintf("the encrypted key store in %s (master key file %s)", s.db.Location(), s.key.File())
}

// Close closes the database connections.
func (s *DatabaseStore) Close() error { return s.db.Close() }

// Secret opens account's secret.
func (s *DatabaseStore) Secret(account string) (string, error) {
	box, err := s.db.SealedSecret(account)
	if errors.Is(err, state.ErrNotFound) {
		return "", fmt.Errorf("%w: %s has no entry %q", ErrNotFound, s.where(), account)
	}
	if err != nil {
		return "", err
	}
	plain, err := openEntry(s.key, account, box)
	if err != nil {
		return "", fmt.Errorf("%w: the entry %q of %s does not open under the master key in %s (was it copied "+
			"from another entry or another store?)", ErrKeyStore, account, s.where(), s.key.File())
	}
	return string(plain), nil
}

// SetSecret seals secret under account and stores it.
func (s *DatabaseStore) SetSecret(account, secret string) error {
	box, err := sealEntry(s.key, account, []byte(secret))
	if err != nil {
		return err
	}
	return s.db.PutSealedSecret(account, box)
}

// DeleteSecret removes account's entry.
func (s *DatabaseStore) DeleteSecret(account string) error {
	err := s.db.DeleteSealedSecret(account)
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("%w: %s has no entry %q", ErrNotFound, s.where(), account)
	}
	return err
}

// ImportFile copies into the database the entries of the key store file at path that it does not hold yet, as
// they are sealed (the file must open under this store's master key), and returns their accounts, sorted. It is
// how a deployment that kept a copy of one key store file on every host moves to the database; the file is not
// read again.
func (s *DatabaseStore) ImportFile(path string) ([]string, error) {
	fs, err := OpenFileStore(path, s.key.File())
	if err != nil {
		return nil, err
	}
	entries, _, err := fs.current()
	if err != nil {
		return nil, err
	}
	var added []string
	for account, box := range entries {
		ok, err := s.db.AddSealedSecret(account, box)
		if err != nil {
			return added, err
		}
		if ok {
			added = append(added, account)
		}
	}
	slices.Sort(added)
	return added, nil
}
