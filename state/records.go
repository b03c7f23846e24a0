package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// maxNameLen bounds owners, session names and IDs (bbolt keys are limited to 32KiB).
const maxNameLen = 1024

// checkName rejects names that cannot be part of a record key.
func checkName(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("state: %s is empty", what)
	case len(v) > maxNameLen:
		return fmt.Errorf("state: %s is longer than %d bytes", what, maxNameLen)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("state: %s contains a NUL byte", what)
	}
	return nil
}

// recordKey is "owner\x00id": one owner's records are contiguous and sorted by id.
func recordKey(owner, id string) []byte {
	k := make([]byte, 0, len(owner)+1+len(id))
	k = append(k, owner...)
	k = append(k, 0)
	return append(k, id...)
}

func ownerPrefix(owner string) []byte {
	return append([]byte(owner), 0)
}

// splitKey is the inverse of recordKey.
func splitKey(k []byte) (owner, id string, ok bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 {
		return "", "", false
	}
	return string(k[:i]), string(k[i+1:]), true
}

// forOwner calls fn for each record of owner in bucket b, in key order.
func forOwner(b *bolt.Bucket, owner string, fn func(k, v []byte) error) error {
	prefix := ownerPrefix(owner)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// storedTime normalises a time for storage and comparison: UTC, no monotonic reading.
func storedTime(t time.Time) time.Time { return t.Round(0).UTC() }

func (s *Store) decode(bucket string, k, v []byte, into any) error {
	if err := json.Unmarshal(v, into); err != nil {
		return fmt.Errorf("%w: %s: record %q in %s is damaged: %v", ErrUnusable, s.path, k, bucket, err)
	}
	return nil
}

func put(b *bolt.Bucket, k []byte, rec any) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return b.Put(k, v)
}

// ownerV1 is the value in the owners bucket.
type ownerV1 struct {
	Created time.Time `json:"created"`
}

// ensureOwner records owner on first sight.
func (s *Store) ensureOwner(tx *bolt.Tx, owner string) error {
	b, err := s.bucket(tx, bucketOwners)
	if err != nil {
		return err
	}
	if b.Get([]byte(owner)) != nil {
		return nil
	}
	return put(b, []byte(owner), ownerV1{Created: storedTime(s.now())})
}

// Owners lists every owner the store has seen, sorted.
func (s *Store) Owners() ([]string, error) {
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		b, err := s.bucket(tx, bucketOwners)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}
