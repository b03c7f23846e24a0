package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/sealed"
)

// Sandbox states.
const (
	StateRunning = "running"
	StatePaused  = "paused"
	StateGone    = "gone"
)

// Who paused a paused sandbox (SandboxRecord.PausedBy).
const (
	PausedAtTimeout = "timeout"      // E2B, when its timeout ran out
	PausedByCall    = "call"         // a tool call (e2b_manage_sandbox)
	PausedBySweep   = "orphan sweep" // the orphan sweep, after its session's lease lapsed
	PausedByBudget  = "budget"       // its owner's sandbox-hours budget was used up
)

// CheckpointPolicy says when the server takes checkpoints of a sandbox automatically.
type CheckpointPolicy struct {
	EverySteps int  `json:"every_steps,omitempty"`
	OnPause    bool `json:"on_pause,omitempty"`
}

// SandboxRecord is what the server remembers of one sandbox it made.
type SandboxRecord struct {
	ID, Owner, Session, Title, Template, Domain, EnvdVersion string

	AccessToken string // plaintext only in memory
	State       string // "running", "paused", "gone"
	GoneReason  string
	// PausedBy says who paused a paused sandbox (PausedAtTimeout, PausedByCall, PausedBySweep, PausedByBudget); ""
	// when unknown.
	PausedBy string
	// OnTimeout is what E2B does when the timeout runs out, "pause" or "kill"; "" when unknown.
	OnTimeout string
	// ExpiresAt is when the timeout runs out, as last known (zero when unknown).
	ExpiresAt      time.Time
	Created        time.Time
	TimeoutSeconds int
	Steps          int
	Checkpoint     *CheckpointPolicy // per-sandbox override of the session policy; nil = none
	// ForkOf is the sandbox this one was forked from ("" for a create).
	ForkOf string
	// RunningSince is when the sandbox last started running (zero when it is not running). The store keeps it
	// from the record's changes of state, whatever a write sets.
	RunningSince time.Time
}

// sandboxV1 is the stored form; owner and ID are the key. SealedToken is the access token sealed under the data
// key with the record key as additional data (absent when the sandbox has no token).
type sandboxV1 struct {
	Session        string            `json:"session"`
	Title          string            `json:"title,omitempty"`
	Template       string            `json:"template,omitempty"`
	Domain         string            `json:"domain,omitempty"`
	EnvdVersion    string            `json:"envd_version,omitempty"`
	SealedToken    []byte            `json:"access_token_sealed,omitempty"`
	State          string            `json:"state"` // its name is sandboxStateField
	GoneReason     string            `json:"gone_reason,omitempty"`
	PausedBy       string            `json:"paused_by,omitempty"`
	OnTimeout      string            `json:"on_timeout,omitempty"`
	ExpiresAt      time.Time         `json:"expires_at,omitzero"`
	Created        time.Time         `json:"created"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty"`
	Steps          int               `json:"steps,omitempty"`
	Checkpoint     *CheckpointPolicy `json:"checkpoint,omitempty"`
	ForkOf         string            `json:"fork_of,omitempty"`
	RunningSince   time.Time         `json:"running_since,omitzero"`
}

func validateSandbox(r *SandboxRecord) error {
	if err := checkName("sandbox owner", r.Owner); err != nil {
		return err
	}
	if err := checkName("sandbox ID", r.ID); err != nil {
		return err
	}
	if r.Session != "" {
		if err := checkName("sandbox session", r.Session); err != nil {
			return err
		}
	}
	switch r.State {
	case StateRunning, StatePaused, StateGone:
	default:
		return fmt.Errorf("state: sandbox %s has unknown state %q (want %q, %q or %q)",
			r.ID, r.State, StateRunning, StatePaused, StateGone)
	}
	if r.TimeoutSeconds < 0 || r.Steps < 0 {
		return fmt.Errorf("state: sandbox %s has a negative timeout or step count", r.ID)
	}
	if r.Checkpoint != nil && r.Checkpoint.EverySteps < 0 {
		return fmt.Errorf("state: sandbox %s has a negative checkpoint interval", r.ID)
	}
	return nil
}

// putSandbox stores r (already validated) inside tx, counting its running time (usage.go). The caller holds the
// owner (holdSandboxOwner) before it reads the record, so that every writer of an owner's sandboxes and usage
// takes the owner's lock first.
func (s *records) putSandbox(tx recordTx, r *SandboxRecord) error {
	now := storedTime(s.now())
	prev, err := s.storedSandbox(tx, r.Owner, r.ID)
	if err != nil {
		return err
	}
	rec := sandboxV1{
		Session: r.Session, Title: r.Title, Template: r.Template, Domain: r.Domain, EnvdVersion: r.EnvdVersion,
		State: r.State, GoneReason: r.GoneReason, PausedBy: r.PausedBy, OnTimeout: r.OnTimeout,
		ExpiresAt: storedTime(r.ExpiresAt), Created: storedTime(r.Created),
		TimeoutSeconds: r.TimeoutSeconds, Steps: r.Steps, ForkOf: r.ForkOf,
	}
	if rec.Created.IsZero() {
		rec.Created = now
		r.Created = now
	}
	if rec.RunningSince, err = s.countRunning(tx, prev, *r, now); err != nil {
		return err
	}
	r.RunningSince = rec.RunningSince
	if r.Checkpoint != nil {
		p := *r.Checkpoint
		rec.Checkpoint = &p
	}
	if r.AccessToken != "" {
		aead, err := tx.cipher()
		if err != nil {
			return err
		}
		if rec.SealedToken, err = sealed.Seal(aead, []byte(r.AccessToken), sandboxTokenAD(r.Owner, r.ID)); err != nil {
			return fmt.Errorf("state store %s: sealing the access token of sandbox %s: %w", s.where, r.ID, err)
		}
	}
	return put(tx, tableSandboxes, r.Owner, r.ID, rec)
}

// holdSandboxOwner records owner if new and holds it until the transaction ends: a write of a sandbox record
// changes the owner's usage and counts (usage.go, reservations.go), decided one at a time.
func holdSandboxOwner(tx recordTx, owner string, now time.Time) error {
	if err := tx.ensureOwner(owner, now); err != nil {
		return err
	}
	return tx.holdOwner(owner)
}

// storedSandbox is the stored form of a record, nil when there is none (or it is too damaged to read: it is being
// replaced).
func (s *records) storedSandbox(tx recordTx, owner, id string) (*sandboxV1, error) {
	v, err := tx.get(tableSandboxes, owner, id)
	if err != nil || v == nil {
		return nil, err
	}
	var rec sandboxV1
	if json.Unmarshal(v, &rec) != nil {
		return nil, nil
	}
	return &rec, nil
}

// getSandbox reads one record; ErrNotFound if absent.
func (s *records) getSandbox(tx recordTx, owner, id string) (SandboxRecord, error) {
	v, err := tx.get(tableSandboxes, owner, id)
	if err != nil {
		return SandboxRecord{}, err
	}
	if v == nil {
		return SandboxRecord{}, fmt.Errorf("sandbox %s of owner %q: %w", id, owner, ErrNotFound)
	}
	var rec sandboxV1
	if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
		return SandboxRecord{}, err
	}
	return s.sandboxFrom(tx, owner, id, rec)
}

func (s *records) sandboxFrom(tx recordTx, owner, id string, rec sandboxV1) (SandboxRecord, error) {
	r := SandboxRecord{
		ID: id, Owner: owner, Session: rec.Session, Title: rec.Title, Template: rec.Template, Domain: rec.Domain,
		EnvdVersion: rec.EnvdVersion, State: rec.State, GoneReason: rec.GoneReason, PausedBy: rec.PausedBy,
		OnTimeout: rec.OnTimeout, ExpiresAt: rec.ExpiresAt, Created: rec.Created,
		TimeoutSeconds: rec.TimeoutSeconds, Steps: rec.Steps, Checkpoint: rec.Checkpoint, ForkOf: rec.ForkOf,
		RunningSince: rec.RunningSince,
	}
	if len(rec.SealedToken) > 0 {
		aead, err := tx.cipher()
		if err != nil {
			return SandboxRecord{}, err
		}
		plain, err := sealed.Open(aead, rec.SealedToken, sandboxTokenAD(owner, id))
		if err != nil {
			return SandboxRecord{}, fmt.Errorf("%w: %s: the access token of sandbox %s (owner %q) does not decrypt "+
				"under the data key: the record is damaged or was copied from another record", ErrUnusable, s.where, id, owner)
		}
		r.AccessToken = string(plain)
	}
	return r, nil
}

// PutSandbox inserts or replaces the record keyed by (Owner, ID), recording the owner if new. A zero Created
// is stored as Now().
func (s *records) PutSandbox(r SandboxRecord) error {
	if err := validateSandbox(&r); err != nil {
		return err
	}
	return s.db.update(func(tx recordTx) error {
		if err := holdSandboxOwner(tx, r.Owner, storedTime(s.now())); err != nil {
			return err
		}
		if err := s.putSandbox(tx, &r); err != nil {
			return err
		}
		if r.State == StateGone {
			return s.noteSandboxEnded(tx, r.Owner, r.Session)
		}
		return nil
	})
}

// Sandbox returns one record; ErrNotFound if absent or of another owner.
func (s *records) Sandbox(owner, id string) (SandboxRecord, error) {
	var out SandboxRecord
	err := s.db.view(func(tx recordTx) error {
		var err error
		out, err = s.getSandbox(tx, owner, id)
		return err
	})
	out.Steps += s.steps.of(owner, id)
	return out, err
}

// SessionSandboxes returns the owner's sandboxes in session, sorted by Created (then ID).
func (s *records) SessionSandboxes(owner, session string) ([]SandboxRecord, error) {
	if checkName("owner", owner) != nil {
		return nil, nil // no record has such an owner
	}
	return s.sandboxes(owner, func(rec sandboxV1) bool { return rec.Session == session })
}

// AllSandboxes returns every owner's records, sorted by owner, then Created, then ID.
func (s *records) AllSandboxes() ([]SandboxRecord, error) {
	return s.sandboxes("", func(sandboxV1) bool { return true })
}

// SandboxesByState counts every owner's sandboxes by state, without opening their envd tokens.
func (s *records) SandboxesByState() (map[string]int, error) {
	var out map[string]int
	err := s.db.view(func(tx recordTx) error {
		var err error
		out, err = tx.countBy(tableSandboxes, sandboxStateField)
		return err
	})
	return out, err
}

// sandboxStateField is the name of sandboxV1.State in the stored document.
const sandboxStateField = "state"

// sandboxes reads the records of owner ("" for all) that keep accepts, sorted by owner, then Created, then ID.
// keep sees a record before its envd token is decrypted: the tokens of records it skips are never needed.
func (s *records) sandboxes(owner string, keep func(sandboxV1) bool) ([]SandboxRecord, error) {
	var out []SandboxRecord
	err := s.db.view(func(tx recordTx) error {
		out = nil // of this attempt only: a transaction may run again (see Postgres.inTx)
		return tx.each(tableSandboxes, owner, func(owner, id string, v []byte) error {
			var rec sandboxV1
			if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
				return err
			}
			if !keep(rec) {
				return nil
			}
			r, err := s.sandboxFrom(tx, owner, id, rec)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Steps += s.steps.of(out[i].Owner, out[i].ID)
	}
	sortSandboxes(out)
	return out, nil
}

func sortSandboxes(rs []SandboxRecord) {
	slices.SortStableFunc(rs, func(a, b SandboxRecord) int {
		if c := strings.Compare(a.Owner, b.Owner); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// errCallbackPanicked marks a panic in an UpdateSandbox callback, re-raised once the transaction is rolled back.
var errCallbackPanicked = errors.New("update callback panicked")

// UpdateSandbox runs fn on the record inside one write transaction (read-modify-write, atomic across processes).
// If fn returns an error nothing is written and that error is returned. fn must not change Owner or ID.
func (s *records) UpdateSandbox(owner, id string, fn func(*SandboxRecord) error) (SandboxRecord, error) {
	return s.updateSandbox(owner, id, nil, fn)
}

// UpdateReservedSandbox is UpdateSandbox that, in the same transaction, takes one place off res (see
// PutReservedSandbox): for a resume, whose record counts as running from then on instead of its place.
func (s *records) UpdateReservedSandbox(res Reservation, owner, id string,
	fn func(*SandboxRecord) error) (SandboxRecord, error) {
	if res.Owner != owner {
		return SandboxRecord{}, fmt.Errorf("state: sandbox %s of owner %q updated against a reservation of %q", id,
			owner, res.Owner)
	}
	if err := checkName("reservation ID", res.ID); err != nil {
		return SandboxRecord{}, err
	}
	return s.updateSandbox(owner, id, &res, fn)
}

// updateSandbox is UpdateSandbox, taking a place off res when there is one.
func (s *records) updateSandbox(owner, id string, res *Reservation,
	fn func(*SandboxRecord) error) (SandboxRecord, error) {
	var (
		out      SandboxRecord
		panicked any
	)
	err := s.db.update(func(tx recordTx) error {
		if checkName("owner", owner) == nil {
			// Held before the record is read: see putSandbox. An owner without records has no such sandbox.
			if err := tx.holdOwner(owner); err != nil {
				return err
			}
		}
		r, err := s.getSandbox(tx, owner, id)
		if err != nil {
			return err
		}
		before := r.State
		if err := callUpdate(fn, &r, &panicked); err != nil {
			return err
		}
		if r.Owner != owner || r.ID != id {
			return fmt.Errorf("state: UpdateSandbox of %s may not change the owner or ID", id)
		}
		if err := validateSandbox(&r); err != nil {
			return err
		}
		if err := s.putSandbox(tx, &r); err != nil {
			return err
		}
		if r.State == StateGone && before != StateGone {
			if err := s.noteSandboxEnded(tx, owner, r.Session); err != nil {
				return err
			}
		}
		if res != nil {
			if err := s.takePlace(tx, *res); err != nil {
				return err
			}
		}
		out = r
		out.Created = storedTime(r.Created)
		return nil
	})
	out.Steps += s.steps.of(owner, id)
	if panicked != nil {
		panic(panicked)
	}
	if err != nil {
		return SandboxRecord{}, err
	}
	return out, nil
}

func callUpdate(fn func(*SandboxRecord) error, r *SandboxRecord, panicked *any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			*panicked = p
			err = errCallbackPanicked
		}
	}()
	return fn(r)
}

// DeleteSandbox removes the record; ErrNotFound if absent. The sandbox's checkpoints are kept.
func (s *records) DeleteSandbox(owner, id string) error {
	return s.db.update(func(tx recordTx) error {
		if checkName("owner", owner) == nil {
			if err := tx.holdOwner(owner); err != nil {
				return err
			}
		}
		v, err := tx.get(tableSandboxes, owner, id)
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("sandbox %s of owner %q: %w", id, owner, ErrNotFound)
		}
		if _, err := tx.del(tableSandboxes, owner, id); err != nil {
			return err
		}
		var rec sandboxV1
		if json.Unmarshal(v, &rec) != nil {
			return nil // a damaged record can still be deleted; its session is not known
		}
		if rec.State == StateRunning {
			if err := s.closeRun(tx, owner, rec, storedTime(s.now())); err != nil {
				return err
			}
		}
		return s.noteSandboxEnded(tx, owner, rec.Session)
	})
}
