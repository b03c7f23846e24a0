package state

import (
	"crypto/cipher"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/internal/sealed"
	bolt "go.etcd.io/bbolt"
)

// Rekeyer is a store whose sealed values can be sealed again under a new data key (credentials.RotateDataKey).
type Rekeyer interface {
	// SealedUnder reports whether the store's secrets are sealed under key (true for a store that has sealed
	// nothing yet, which any key opens).
	SealedUnder(key []byte) (bool, error)
	// RotateDataKey seals every envd access token again under next, and replaces the check value with next's,
	// in one transaction: whatever fails, the store is afterwards whole under its old key or whole under next.
	// The old key is the store's KeySource's (or its pending key, when that is the one the store is sealed
	// under). Processes that read the old key refuse to seal or open tokens from then on (ErrDataKeyChanged).
	// It returns how many tokens it sealed again.
	RotateDataKey(next []byte) (int, error)
}

var (
	_ Rekeyer = (*Bolt)(nil)
	_ Rekeyer = (*Postgres)(nil)
)

// resealTokens seals every sandbox's token sealed under old again under next, in tx.
func (s *records) resealTokens(tx recordTx, old, next cipher.AEAD) (int, error) {
	type resealed struct {
		owner, id string
		rec       sandboxV1
	}
	var out []resealed
	err := tx.each(tableSandboxes, "", func(owner, id string, v []byte) error {
		var rec sandboxV1
		if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
			return err
		}
		if len(rec.SealedToken) == 0 {
			return nil
		}
		ad := sandboxTokenAD(owner, id)
		plain, err := sealed.Open(old, rec.SealedToken, ad)
		if err != nil {
			return fmt.Errorf("%w: %s: the access token of sandbox %s (owner %q) does not decrypt under the data key: "+
				"the record is damaged or was copied from another record; nothing was changed", ErrUnusable, s.where, id, owner)
		}
		rec.SealedToken, err = sealed.Seal(next, plain, ad)
		clear(plain)
		if err != nil {
			return fmt.Errorf("state store %s: sealing the access token of sandbox %s: %w", s.where, id, err)
		}
		out = append(out, resealed{owner, id, rec})
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Written after the walk: bbolt's cursor must not see the bucket change under it.
	for _, r := range out {
		if err := put(tx, tableSandboxes, r.owner, r.id, r.rec); err != nil {
			return 0, err
		}
	}
	return len(out), nil
}

// rekey is RotateDataKey's work once the transaction holds the store's check value (nil when there is none):
// it returns the number of tokens sealed again and the new check value to store.
func (s *records) rekey(tx recordTx, keys KeySource, check, next []byte) (int, []byte, error) {
	nextAEAD, err := aeadOf(next, s.where)
	if err != nil {
		return 0, nil, err
	}
	n := 0
	if check != nil {
		old, err := dataCipher(keys, s.where)
		if err != nil {
			return 0, nil, err
		}
		if old, err = checkedCipher(keys, old, check, s.where); err != nil {
			return 0, nil, err
		}
		if n, err = s.resealTokens(tx, old, nextAEAD); err != nil {
			return 0, nil, err
		}
	}
	box, err := newKeyCheck(nextAEAD, s.where)
	return n, box, err
}

// sealedUnder is SealedUnder given the store's check value.
func sealedUnder(key, check []byte, where string) (bool, error) {
	if check == nil {
		return true, nil
	}
	aead, err := aeadOf(key, where)
	if err != nil {
		return false, err
	}
	return verifyKeyCheck(aead, check, where) == nil, nil
}

// SealedUnder reports whether the file's secrets are sealed under key.
func (s *Bolt) SealedUnder(key []byte) (bool, error) {
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		meta, err := s.bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		ok, err = sealedUnder(key, meta.Get([]byte(metaKeyCheck)), s.path)
		return err
	})
	return ok, err
}

// RotateDataKey seals the file's tokens again under next in one bbolt write transaction, which excludes every
// other process's operations on the file while it runs.
func (s *Bolt) RotateDataKey(next []byte) (int, error) {
	n := 0
	err := s.update(func(tx *bolt.Tx) error {
		meta, err := s.bucket(tx, bucketMeta)
		if err != nil {
			return err
		}
		var box []byte
		if n, box, err = s.rekey(boltTx{s, tx}, s.keys, meta.Get([]byte(metaKeyCheck)), next); err != nil {
			return err
		}
		return meta.Put([]byte(metaKeyCheck), box)
	})
	s.key.reset()
	return n, err
}

// SealedUnder reports whether the database's secrets are sealed under key.
func (s *Postgres) SealedUnder(key []byte) (bool, error) {
	var ok bool
	err := s.run(false, func(rtx recordTx) error {
		check, err := rtx.(pgTx).meta(metaKeyCheck, "")
		if err != nil {
			return err
		}
		ok, err = sealedUnder(key, check, s.where)
		return err
	})
	return ok, err
}

// RotateDataKey seals the database's tokens again under next in one transaction. It takes the check value FOR
// UPDATE first: every write transaction holds it FOR SHARE from its start (see run), so the rotation waits
// for the writes under way and the writes after it find the new check value, which a replica still holding
// the old key refuses. Only then does it read the sandboxes, so it sees the tokens those writes committed.
func (s *Postgres) RotateDataKey(next []byte) (int, error) {
	n := 0
	err := s.run(true, func(rtx recordTx) error {
		t := rtx.(pgTx)
		check, err := t.meta(metaKeyCheck, " FOR UPDATE")
		if err != nil {
			return err
		}
		var box []byte
		if n, box, err = s.rekey(t, s.keys, check, next); err != nil {
			return err
		}
		_, err = t.tx.Exec(t.ctx, "INSERT INTO e2b_mcp_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET "+
			"value = EXCLUDED.value",
			metaKeyCheck, box)
		return s.dbError(err)
	})
	s.key.reset()
	return n, err
}
