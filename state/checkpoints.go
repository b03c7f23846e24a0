package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Checkpoint is a named E2B snapshot of a sandbox, taken at a step.
type Checkpoint struct {
	ID, Owner, Session, SandboxID, SnapshotID, Name string

	Step    int
	Created time.Time
}

// checkpointV1 is the stored form; owner and ID are the key.
type checkpointV1 struct {
	Session    string    `json:"session"`
	SandboxID  string    `json:"sandbox_id"`
	SnapshotID string    `json:"snapshot_id"`
	Name       string    `json:"name,omitempty"`
	Step       int       `json:"step,omitempty"`
	Created    time.Time `json:"created"`
}

func (r checkpointV1) checkpoint(owner, id string) Checkpoint {
	return Checkpoint{ID: id, Owner: owner, Session: r.Session, SandboxID: r.SandboxID, SnapshotID: r.SnapshotID,
		Name: r.Name, Step: r.Step, Created: r.Created}
}

// PutCheckpoint inserts or replaces the checkpoint keyed by (Owner, ID). A zero Created is stored as Now().
func (s *Store) PutCheckpoint(c Checkpoint) error {
	if err := checkName("checkpoint owner", c.Owner); err != nil {
		return err
	}
	if err := checkName("checkpoint ID", c.ID); err != nil {
		return err
	}
	if c.Step < 0 {
		return fmt.Errorf("state: checkpoint %s has a negative step", c.ID)
	}
	return s.update(func(tx *bolt.Tx) error {
		if err := s.ensureOwner(tx, c.Owner); err != nil {
			return err
		}
		b, err := s.bucket(tx, bucketCheckpoints)
		if err != nil {
			return err
		}
		rec := checkpointV1{Session: c.Session, SandboxID: c.SandboxID, SnapshotID: c.SnapshotID, Name: c.Name,
			Step: c.Step, Created: storedTime(c.Created)}
		if rec.Created.IsZero() {
			rec.Created = storedTime(s.now())
		}
		return put(b, recordKey(c.Owner, c.ID), rec)
	})
}

// Checkpoint returns one checkpoint; ErrNotFound if absent or of another owner.
func (s *Store) Checkpoint(owner, id string) (Checkpoint, error) {
	var out Checkpoint
	err := s.view(func(tx *bolt.Tx) error {
		b, err := s.bucket(tx, bucketCheckpoints)
		if err != nil {
			return err
		}
		k := recordKey(owner, id)
		v := b.Get(k)
		if v == nil {
			return fmt.Errorf("checkpoint %s of owner %q: %w", id, owner, ErrNotFound)
		}
		var rec checkpointV1
		if err := s.decode(bucketCheckpoints, k, v, &rec); err != nil {
			return err
		}
		out = rec.checkpoint(owner, id)
		return nil
	})
	return out, err
}

// SessionCheckpoints returns the owner's checkpoints in session, of sandboxID or of all sandboxes when sandboxID
// is "", sorted by Created (then ID).
func (s *Store) SessionCheckpoints(owner, session, sandboxID string) ([]Checkpoint, error) {
	var out []Checkpoint
	err := s.view(func(tx *bolt.Tx) error {
		b, err := s.bucket(tx, bucketCheckpoints)
		if err != nil {
			return err
		}
		return forOwner(b, owner, func(k, v []byte) error {
			var rec checkpointV1
			if err := s.decode(bucketCheckpoints, k, v, &rec); err != nil {
				return err
			}
			if rec.Session == session && (sandboxID == "" || rec.SandboxID == sandboxID) {
				out = append(out, rec.checkpoint(owner, string(k[len(owner)+1:])))
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Checkpoint) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeleteCheckpoint removes the checkpoint record; ErrNotFound if absent.
func (s *Store) DeleteCheckpoint(owner, id string) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := s.bucket(tx, bucketCheckpoints)
		if err != nil {
			return err
		}
		k := recordKey(owner, id)
		if b.Get(k) == nil {
			return fmt.Errorf("checkpoint %s of owner %q: %w", id, owner, ErrNotFound)
		}
		return b.Delete(k)
	})
}
