package state

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// SandboxCaps bound the sandboxes of one owner; zero means no bound.
type SandboxCaps struct {
	// Live bounds the owner's running and paused sandboxes together.
	Live int
	// Running bounds the owner's running sandboxes.
	Running int
	// Forks bounds the forks of sandbox ForkOf that exist (running or paused), when the reservation is for forks
	// of it.
	Forks  int
	ForkOf string
}

// SlotKind says what a reservation will bring alive.
type SlotKind string

const (
	// SlotNew is a sandbox that does not exist yet (a create or a fork): it will be live and running.
	SlotNew SlotKind = "new"
	// SlotResume is a paused sandbox being resumed: it is live already and will be running.
	SlotResume SlotKind = "resume"
)

// Reservation is a place in an owner's caps, held from ReserveSandboxes until ReleaseReservation (after the
// sandbox is recorded, or its creation failed) or until it runs out (its holder died).
type Reservation struct {
	Owner, ID string
	Kind      SlotKind
	Count     int
	Expires   time.Time
}

// ErrOverCap is matched (errors.Is) by the *CapError of a reservation that would take its owner past a cap.
var ErrOverCap = errors.New("over an owner's sandbox cap")

// CapError is a refused reservation: which cap, what the owner uses of it now, and what was asked.
type CapError struct {
	Owner string
	// Limit is "live sandboxes" (running and paused) or "running sandboxes".
	Limit     string
	Used, Cap int
	Asked     int
}

func (e *CapError) Error() string {
	return fmt.Sprintf("%d of %d %s", e.Used, e.Cap, e.Limit)
}

func (e *CapError) Is(target error) bool { return target == ErrOverCap }

// The names of the caps in CapError.Limit; the forks of one sandbox are "forks of sandbox ID" (LimitForksOf).
const (
	LimitLive    = "live sandboxes"
	LimitRunning = "running sandboxes"
)

// LimitForksOf is the name of the cap on the forks of sandbox id.
func LimitForksOf(id string) string { return "forks of sandbox " + id }

// reservationV1 is the stored form; owner and ID are the key.
type reservationV1 struct {
	Kind    SlotKind  `json:"kind"`
	Count   int       `json:"count"`
	Expires time.Time `json:"expires"`
	// ForkOf is the sandbox whose forks these places are for ("" for other new sandboxes and resumes).
	ForkOf string `json:"fork_of,omitempty"`
}

// ReserveSandboxes holds n places of kind for owner until now+hold, if the owner's sandboxes (running and paused
// records, and the places reserved and not yet run out) leave room under caps; else a *CapError. The count and
// the reservation are one transaction holding the owner's record, so calls racing on any number of processes
// sharing the store take turns, and together never pass a cap. Expired reservations of the owner are deleted.
func (s *records) ReserveSandboxes(owner string, kind SlotKind, n int, caps SandboxCaps,
	hold time.Duration) (Reservation, error) {
	if err := checkName("owner", owner); err != nil {
		return Reservation{}, err
	}
	if kind != SlotNew && kind != SlotResume {
		return Reservation{}, fmt.Errorf("state: unknown reservation kind %q", kind)
	}
	if n < 1 || hold <= 0 {
		return Reservation{}, fmt.Errorf("state: a reservation needs a positive count and hold, got %d and %s", n, hold)
	}
	id, err := reservationID()
	if err != nil {
		return Reservation{}, err
	}
	var out Reservation
	err = s.db.update(func(tx recordTx) error {
		now := storedTime(s.now())
		if err := tx.ensureOwner(owner, now); err != nil {
			return err
		}
		if err := tx.holdOwner(owner); err != nil {
			return err
		}
		live, running, err := s.sandboxUse(tx, owner, now)
		if err != nil {
			return err
		}
		if kind == SlotNew && caps.Live > 0 && live+n > caps.Live {
			return &CapError{Owner: owner, Limit: LimitLive, Used: live, Cap: caps.Live, Asked: n}
		}
		if caps.Running > 0 && running+n > caps.Running {
			return &CapError{Owner: owner, Limit: LimitRunning, Used: running, Cap: caps.Running, Asked: n}
		}
		if caps.Forks > 0 && caps.ForkOf != "" {
			forks, err := s.forkCount(tx, owner, caps.ForkOf)
			if err != nil {
				return err
			}
			if forks+n > caps.Forks {
				return &CapError{Owner: owner, Limit: LimitForksOf(caps.ForkOf), Used: forks, Cap: caps.Forks, Asked: n}
			}
		}
		out = Reservation{Owner: owner, ID: id, Kind: kind, Count: n, Expires: now.Add(hold)}
		return put(tx, tableReservations, owner, id, reservationV1{Kind: kind, Count: n, Expires: out.Expires,
			ForkOf: caps.ForkOf})
	})
	if err != nil {
		return Reservation{}, err
	}
	return out, nil
}

// sandboxUse counts owner's live and running sandboxes at now, each reservation still held counting as what it
// will bring alive; it deletes the reservations that ran out.
func (s *records) sandboxUse(tx recordTx, owner string, now time.Time) (live, running int, err error) {
	err = tx.each(tableSandboxes, owner, func(owner, id string, v []byte) error {
		var rec struct {
			State string `json:"state"`
		}
		if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
			return err
		}
		switch rec.State {
		case StateRunning:
			live++
			running++
		case StatePaused:
			live++
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	var expired []string
	err = tx.each(tableReservations, owner, func(owner, id string, v []byte) error {
		var r reservationV1
		if err := s.decode(tableReservations, owner, id, v, &r); err != nil {
			return err
		}
		if !r.Expires.After(now) {
			expired = append(expired, id)
			return nil
		}
		running += r.Count
		if r.Kind == SlotNew {
			live += r.Count
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	for _, id := range expired {
		if _, err := tx.del(tableReservations, owner, id); err != nil {
			return 0, 0, err
		}
	}
	return live, running, nil
}

// forkCount counts the forks of sandbox src that exist (running or paused records whose fork_of is src) and the
// places held for more; sandboxUse has deleted the places that ran out.
func (s *records) forkCount(tx recordTx, owner, src string) (int, error) {
	n := 0
	err := tx.each(tableSandboxes, owner, func(owner, id string, v []byte) error {
		var rec struct {
			State  string `json:"state"`
			ForkOf string `json:"fork_of"`
		}
		if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
			return err
		}
		if rec.ForkOf == src && (rec.State == StateRunning || rec.State == StatePaused) {
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	err = tx.each(tableReservations, owner, func(owner, id string, v []byte) error {
		var r reservationV1
		if err := s.decode(tableReservations, owner, id, v, &r); err != nil {
			return err
		}
		if r.ForkOf == src {
			n += r.Count
		}
		return nil
	})
	return n, err
}

// ReleaseReservation gives the places of a reservation back. Releasing one that ran out or was released is not
// an error.
func (s *records) ReleaseReservation(r Reservation) error {
	if err := checkName("owner", r.Owner); err != nil {
		return err
	}
	if err := checkName("reservation ID", r.ID); err != nil {
		return err
	}
	return s.db.update(func(tx recordTx) error {
		_, err := tx.del(tableReservations, r.Owner, r.ID)
		return err
	})
}

// SandboxUse reports owner's live and running sandboxes as ReserveSandboxes counts them.
func (s *records) SandboxUse(owner string) (live, running int, err error) {
	if err := checkName("owner", owner); err != nil {
		return 0, 0, err
	}
	err = s.db.update(func(tx recordTx) error {
		live, running, err = s.sandboxUse(tx, owner, storedTime(s.now()))
		return err
	})
	return live, running, err
}

func reservationID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("state: making a reservation ID: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// PutReservedSandbox stores r as PutSandbox does and, in the same transaction, takes one place off res (deleting
// it when none is left): the record counts from then on instead of the place, so the owner's use never counts
// the sandbox twice. A reservation that ran out or was released is no error.
func (s *records) PutReservedSandbox(res Reservation, r SandboxRecord) error {
	if err := validateSandbox(&r); err != nil {
		return err
	}
	if res.Owner != r.Owner {
		return fmt.Errorf("state: sandbox %s of owner %q recorded against a reservation of %q", r.ID, r.Owner, res.Owner)
	}
	if err := checkName("reservation ID", res.ID); err != nil {
		return err
	}
	return s.db.update(func(tx recordTx) error {
		// Held like a reservation: a count reads the records and the places in two statements, which must not
		// see the sandbox in neither (PostgreSQL's READ COMMITTED gives each statement its own snapshot).
		if err := tx.ensureOwner(r.Owner, storedTime(s.now())); err != nil {
			return err
		}
		if err := tx.holdOwner(r.Owner); err != nil {
			return err
		}
		if err := s.putSandbox(tx, &r); err != nil {
			return err
		}
		return s.takePlace(tx, res)
	})
}

// takePlace takes one place off res, deleting it when none is left; one that ran out or was released is no error.
func (s *records) takePlace(tx recordTx, res Reservation) error {
	v, err := tx.get(tableReservations, res.Owner, res.ID)
	if err != nil || v == nil {
		return err
	}
	var held reservationV1
	if err := s.decode(tableReservations, res.Owner, res.ID, v, &held); err != nil {
		return err
	}
	if held.Count <= 1 {
		_, err := tx.del(tableReservations, res.Owner, res.ID)
		return err
	}
	held.Count--
	return put(tx, tableReservations, res.Owner, res.ID, held)
}
