package state

import (
	"fmt"
	"slices"
	"strings"
	"time"
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
func (s *records) PutCheckpoint(c Checkpoint) error {
	if err := checkName("checkpoint owner", c.Owner); err != nil {
		return err
	}
	if err := checkName("checkpoint ID", c.ID); err != nil {
		return err
	}
	if c.Step < 0 {
		return fmt.Errorf("state: checkpoint %s has a negative step", c.ID)
	}
	return s.db.update(func(tx recordTx) error {
		now := storedTime(s.now())
		if err := tx.ensureOwner(c.Owner, now); err != nil {
			return err
		}
		rec := checkpointV1{Session: c.Session, SandboxID: c.SandboxID, SnapshotID: c.SnapshotID, Name: c.Name,
			Step: c.Step, Created: storedTime(c.Created)}
		if rec.Created.IsZero() {
			rec.Created = now
		}
		return put(tx, tableCheckpoints, c.Owner, c.ID, rec)
	})
}

// Checkpoint returns one checkpoint; ErrNotFound if absent or of another owner.
func (s *records) Checkpoint(owner, id string) (Checkpoint, error) {
	var out Checkpoint
	err := s.db.view(func(tx recordTx) error {
		v, err := tx.get(tableCheckpoints, owner, id)
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("checkpoint %s of owner %q: %w", id, owner, ErrNotFound)
		}
		var rec checkpointV1
		if err := s.decode(tableCheckpoints, owner, id, v, &rec); err != nil {
			return err
		}
		out = rec.checkpoint(owner, id)
		return nil
	})
	return out, err
}

// SessionCheckpoints returns the owner's checkpoints in session, of sandboxID or of all sandboxes when sandboxID
// is "", sorted by Created (then ID).
func (s *records) SessionCheckpoints(owner, session, sandboxID string) ([]Checkpoint, error) {
	if checkName("owner", owner) != nil {
		return nil, nil // no record has such an owner
	}
	var out []Checkpoint
	err := s.db.view(func(tx recordTx) error {
		out = nil // of this attempt only: a transaction may run again (see Postgres.inTx)
		return tx.each(tableCheckpoints, owner, func(owner, id string, v []byte) error {
			var rec checkpointV1
			if err := s.decode(tableCheckpoints, owner, id, v, &rec); err != nil {
				return err
			}
			if rec.Session == session && (sandboxID == "" || rec.SandboxID == sandboxID) {
				out = append(out, rec.checkpoint(owner, id))
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
func (s *records) DeleteCheckpoint(owner, id string) error {
	return s.db.update(func(tx recordTx) error {
		found, err := tx.del(tableCheckpoints, owner, id)
		if err == nil && !found {
			err = fmt.Errorf("checkpoint %s of owner %q: %w", id, owner, ErrNotFound)
		}
		return err
	})
}
