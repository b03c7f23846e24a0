package state

import (
	"fmt"
	"hash/crc32"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// Layout of schema version 1. Every bucket is top level; record keys are "owner\x00id" (owners: "owner";
// sessions: "owner\x00name") and values are JSON documents (record*V1 types).
const (
	bucketMeta         = "meta"
	bucketOwners       = "owners"
	bucketSessions     = tableSessions
	bucketSandboxes    = tableSandboxes
	bucketCheckpoints  = tableCheckpoints
	bucketTasks        = tableTasks
	bucketReservations = tableReservations
	bucketUsage        = tableUsage

	metaApplication = "application" // must hold applicationMarker
	metaSchema      = "schema"      // decimal schema version
	metaKeyCheck    = "key_check"   // the sealed key-check value, see crypto.go

	applicationMarker = "e2b-mcp state"
)

func dataBucketsV1() []string {
	return []string{bucketOwners, bucketSessions, bucketSandboxes, bucketCheckpoints}
}

// A migration rewrites the file from schema version i+1 to i+2, where i is its index in the list. All pending
// migrations and the new version number are committed in one transaction, so a crash leaves the old version.
type migration func(tx *bolt.Tx) error

// schemaMigrations is the list Open applies. The current schema version is len(schemaMigrations())+1. Append
// only; never edit an entry once released.
func schemaMigrations() []migration {
	return []migration{addTasksBucket, addReservationsBucket, addUsageBucket}
}

// addTasksBucket (schema 1 to 2) makes the bucket of the tool calls answered as tasks (tasks.go).
func addTasksBucket(tx *bolt.Tx) error {
	_, err := tx.CreateBucketIfNotExists([]byte(bucketTasks))
	return err
}

// addReservationsBucket (schema 2 to 3) makes the bucket of the places held in owners' sandbox caps
// (reservations.go).
func addReservationsBucket(tx *bolt.Tx) error {
	_, err := tx.CreateBucketIfNotExists([]byte(bucketReservations))
	return err
}

// addUsageBucket (schema 3 to 4) makes the bucket of the owners' use per day (usage.go). Records written before
// it have no running_since: a sandbox running then counts from its next write.
func addUsageBucket(tx *bolt.Tx) error {
	_, err := tx.CreateBucketIfNotExists([]byte(bucketUsage))
	return err
}

func (s *Bolt) currentVersion() int { return len(s.migrations) + 1 }

// initOrCheck runs on a file that was empty when Open looked at it: it writes the version-1 layout, unless a
// racing process has already initialised it, then migrates to the current version.
func (s *Bolt) initOrCheck(tx *bolt.Tx) error {
	if tx.Bucket([]byte(bucketMeta)) == nil {
		empty := true
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return s.foreign("it has buckets but no %q bucket", bucketMeta)
		}
		meta, err := tx.CreateBucket([]byte(bucketMeta))
		if err != nil {
			return fmt.Errorf("state store %s: initialising: %w", s.path, err)
		}
		for _, name := range dataBucketsV1() {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return fmt.Errorf("state store %s: initialising: %w", s.path, err)
			}
		}
		if err := meta.Put([]byte(metaApplication), []byte(applicationMarker)); err != nil {
			return fmt.Errorf("state store %s: initialising: %w", s.path, err)
		}
		if err := meta.Put([]byte(metaSchema), []byte("1")); err != nil {
			return fmt.Errorf("state store %s: initialising: %w", s.path, err)
		}
	}
	return s.migrate(tx)
}

// migrate brings the file to the current schema version inside tx.
func (s *Bolt) migrate(tx *bolt.Tx) error {
	version, err := s.readSchema(tx)
	if err != nil {
		return err
	}
	for v := version; v < s.currentVersion(); v++ {
		if err := s.migrations[v-1](tx); err != nil {
			return fmt.Errorf("state store %s: migrating schema %d to %d: %w", s.path, v, v+1, err)
		}
	}
	if version == s.currentVersion() {
		return nil
	}
	return tx.Bucket([]byte(bucketMeta)).Put([]byte(metaSchema), []byte(strconv.Itoa(s.currentVersion())))
}

// readSchema checks the application marker and returns the file's schema version, refusing newer ones.
func (s *Bolt) readSchema(tx *bolt.Tx) (int, error) {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		return 0, s.foreign("it has no %q bucket", bucketMeta)
	}
	if app := meta.Get([]byte(metaApplication)); string(app) != applicationMarker {
		return 0, s.foreign("its application marker is %q", app)
	}
	raw := meta.Get([]byte(metaSchema))
	version, err := strconv.Atoi(string(raw))
	if err != nil || version < 1 {
		return 0, fmt.Errorf("%w: %s has an invalid schema version %q; it was left untouched", ErrUnusable, s.path, raw)
	}
	if version > s.currentVersion() {
		return 0, fmt.Errorf("%w: %s has schema version %d, newer than the %d this e2b-mcp understands; "+
			"upgrade e2b-mcp (the file was left untouched)", ErrUnusable, s.path, version, s.currentVersion())
	}
	return version, nil
}

// checkSchema runs at the start of every transaction after Open: the file must still be ours and at exactly the
// version this Store writes.
func (s *Bolt) checkSchema(tx *bolt.Tx) error {
	version, err := s.readSchema(tx)
	if err != nil {
		return err
	}
	if version != s.currentVersion() {
		return fmt.Errorf("%w: %s has schema version %d but this store was opened at version %d; reopen it",
			ErrUnusable, s.path, version, s.currentVersion())
	}
	return nil
}

// consistencyCheck reads every key and value of every bucket and then runs bbolt's page-level check (freelist
// against reachable pages). The walk comes first because it runs on this goroutine, where a memory fault on a
// damaged page becomes a recoverable panic (see withDB); bbolt's check runs on a goroutine of its own.
func (s *Bolt) consistencyCheck(tx *bolt.Tx) error {
	var walk func(b *bolt.Bucket) error
	var sum uint32
	walk = func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			sum = crc32.Update(crc32.Update(sum, crc32.IEEETable, k), crc32.IEEETable, v)
			if v == nil {
				if nested := b.Bucket(k); nested != nil {
					return walk(nested)
				}
			}
			return nil
		})
	}
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b) })
	if err != nil {
		return fmt.Errorf("%w: %s is corrupt (%v); it was left untouched", ErrUnusable, s.path, err)
	}
	var first error
	n := 0
	for err := range tx.Check() {
		if first == nil {
			first = err
		}
		n++
	}
	if first != nil {
		return fmt.Errorf("%w: %s is corrupt (%d problems, first: %v); it was left untouched",
			ErrUnusable, s.path, n, first)
	}
	return nil
}

func (s *Bolt) foreign(format string, args ...any) error {
	return fmt.Errorf("%w: %s is a bbolt database of another program (%s); it was left untouched",
		ErrUnusable, s.path, fmt.Sprintf(format, args...))
}

// bucket returns a data bucket, or an error if a damaged file lacks it.
func (s *Bolt) bucket(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	if b := tx.Bucket([]byte(name)); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("%w: %s has no %q bucket", ErrUnusable, s.path, name)
}
