package state

import (
	"bytes"
	"crypto/cipher"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	bolt "go.etcd.io/bbolt"
)

// In the bbolt file each table is a bucket, and a record's key is "owner\x00id": one owner's records are
// contiguous and sorted by id. Owners are a bucket of their own, keyed by the owner.

func recordKey(owner, id string) []byte {
	k := make([]byte, 0, len(owner)+1+len(id))
	k = append(k, owner...)
	k = append(k, 0)
	return append(k, id...)
}

// splitKey is the inverse of recordKey.
func splitKey(k []byte) (owner, id string, ok bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return "", "", false
	}
	return string(k[:i]), string(k[i+1:]), true
}

// boltRunner runs the record logic's transactions on a Bolt.
type boltRunner struct{ s *Bolt }

func (r boltRunner) view(fn func(recordTx) error) error {
	return r.s.view(func(tx *bolt.Tx) error { return fn(boltTx{r.s, tx}) })
}

func (r boltRunner) update(fn func(recordTx) error) error {
	return r.s.update(func(tx *bolt.Tx) error { return fn(boltTx{r.s, tx}) })
}

// boltTx is a recordTx of the bbolt file. bbolt's write transactions are exclusive, so reads in them hold
// their records by themselves.
type boltTx struct {
	s  *Bolt
	tx *bolt.Tx
}

func (t boltTx) get(table, owner, id string) ([]byte, error) {
	b, err := t.s.bucket(t.tx, table)
	if err != nil {
		return nil, err
	}
	return b.Get(recordKey(owner, id)), nil
}

func (t boltTx) put(table, owner, id string, v []byte) error {
	b, err := t.s.bucket(t.tx, table)
	if err != nil {
		return err
	}
	return b.Put(recordKey(owner, id), v)
}

func (t boltTx) del(table, owner, id string) (bool, error) {
	b, err := t.s.bucket(t.tx, table)
	if err != nil {
		return false, err
	}
	k := recordKey(owner, id)
	if b.Get(k) == nil {
		return false, nil
	}
	return true, b.Delete(k)
}

func (t boltTx) each(table, owner string, fn func(owner, id string, v []byte) error) error {
	b, err := t.s.bucket(t.tx, table)
	if err != nil {
		return err
	}
	var prefix []byte
	if owner != "" {
		prefix = append([]byte(owner), 0)
	}
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		o, id, ok := splitKey(k)
		if !ok {
			return fmt.Errorf("%w: %s: malformed key %q in %s", ErrUnusable, t.s.path, k, table)
		}
		if err := fn(o, id, v); err != nil {
			return err
		}
	}
	return nil
}

// countBy decodes each record into a struct of the one field (made once, with the field's JSON name as its
// tag): encoding/json matches the name as it does when the record is read, and skips the rest of the record
// without keeping any of it.
func (t boltTx) countBy(table, field string) (map[string]int, error) {
	only := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "Value", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`json:"` + field + `"`),
	}}))
	value := only.Elem().Field(0)
	counts := map[string]int{}
	err := t.each(table, "", func(owner, id string, v []byte) error {
		value.SetString("")
		if err := json.Unmarshal(v, only.Interface()); err != nil {
			return damaged(t.s.path, table, owner, id, err)
		}
		counts[value.String()]++
		return nil
	})
	return counts, err
}

func (t boltTx) ensureOwner(owner string, now time.Time) error {
	b, err := t.s.bucket(t.tx, bucketOwners)
	if err != nil {
		return err
	}
	if b.Get([]byte(owner)) != nil {
		return nil
	}
	v, err := json.Marshal(ownerV1{Created: now})
	if err != nil {
		return err
	}
	return b.Put([]byte(owner), v)
}

// holdOwner has nothing to do: a write transaction of the file holds all of it.
func (t boltTx) holdOwner(string) error { return nil }

func (t boltTx) owners() ([]string, error) {
	b, err := t.s.bucket(t.tx, bucketOwners)
	if err != nil {
		return nil, err
	}
	var out []string
	err = b.ForEach(func(k, _ []byte) error {
		out = append(out, string(k))
		return nil
	})
	return out, err
}

func (t boltTx) cipher() (cipher.AEAD, error) { return t.s.cipherFor(t.tx) }
