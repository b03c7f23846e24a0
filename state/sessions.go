package state

import (
	"errors"
	"fmt"
	"time"
)

// Session groups an owner's sandboxes under a name that outlives server restarts. Its lease is renewed by use;
// once it runs out, the server applies the orphan action to the session's sandboxes and marks it Lapsed.
type Session struct {
	Owner, Name                     string
	Created, LastUsed, LeaseExpires time.Time
	Lapsed                          bool // the orphan action has been applied after the lease ran out
}

type sessionV1 struct {
	Created      time.Time `json:"created"`
	LastUsed     time.Time `json:"last_used"`
	LeaseExpires time.Time `json:"lease_expires"`
	Lapsed       bool      `json:"lapsed,omitempty"`
	// SweepClaimUntil is when a sweeper's claim on the lapsed session runs out (zero: no claim).
	SweepClaimUntil time.Time `json:"sweep_claim_until,omitzero"`
}

func (r sessionV1) session(owner, name string) Session {
	return Session{Owner: owner, Name: name, Created: r.Created, LastUsed: r.LastUsed,
		LeaseExpires: r.LeaseExpires, Lapsed: r.Lapsed}
}

// DefaultMaxLiveSessions is the default of Options.MaxLiveSessions.
const DefaultMaxLiveSessions = 100

// TouchSession creates the owner and session if needed and renews the lease to Now()+lease; clears Lapsed. A
// session it would create while its owner has MaxLiveSessions live ones is refused (ErrTooManySessions); an
// existing one, live or lapsed, is always renewed. A creation counts and inserts holding the owner's record, so
// replicas creating sessions of one owner at the same moment take turns and together stay within the bound;
// renewals, the common case, hold only their own session's record.
func (s *records) TouchSession(owner, name string, lease time.Duration) (Session, error) {
	if err := checkName("owner", owner); err != nil {
		return Session{}, err
	}
	if err := checkName("session name", name); err != nil {
		return Session{}, err
	}
	if lease < 0 {
		return Session{}, fmt.Errorf("state: negative lease %s for session %q", lease, name)
	}
	var out Session
	err := s.db.update(func(tx recordTx) error {
		now := storedTime(s.now())
		if err := tx.ensureOwner(owner, now); err != nil {
			return err
		}
		rec := sessionV1{Created: now}
		v, err := tx.get(tableSessions, owner, name)
		if err != nil {
			return err
		}
		if v == nil {
			if err := tx.holdOwner(owner); err != nil {
				return err
			}
			// The session may have been made while this waited for the owner.
			if v, err = tx.get(tableSessions, owner, name); err != nil {
				return err
			}
		}
		if v != nil {
			if err := s.decode(tableSessions, owner, name, v, &rec); err != nil {
				return err
			}
		} else if live, err := s.liveSessions(tx, owner, now); err != nil {
			return err
		} else if live >= s.maxSessions {
			return fmt.Errorf("state: owner %q: %w (%d, the most one owner may have)", owner, ErrTooManySessions, live)
		}
		rec.LastUsed = now
		rec.LeaseExpires = now.Add(lease)
		rec.Lapsed = false
		rec.SweepClaimUntil = time.Time{}
		out = rec.session(owner, name)
		return put(tx, tableSessions, owner, name, rec)
	})
	if err != nil {
		return Session{}, err
	}
	return out, nil
}

// liveSessions counts owner's sessions whose lease runs at now.
func (s *records) liveSessions(tx recordTx, owner string, now time.Time) (int, error) {
	n := 0
	err := tx.each(tableSessions, owner, func(owner, name string, v []byte) error {
		var rec sessionV1
		if err := s.decode(tableSessions, owner, name, v, &rec); err != nil {
			return err
		}
		if !rec.Lapsed && rec.LeaseExpires.After(now) {
			n++
		}
		return nil
	})
	return n, err
}

// Sessions lists every session of every owner, sorted by owner then name.
func (s *records) Sessions() ([]Session, error) {
	return s.sessions(func(Session) bool { return true })
}

// LapsedSessions: sessions whose LeaseExpires is before now and that are not yet marked Lapsed.
func (s *records) LapsedSessions(now time.Time) ([]Session, error) {
	return s.sessions(func(x Session) bool { return !x.Lapsed && x.LeaseExpires.Before(now) })
}

func (s *records) sessions(keep func(Session) bool) ([]Session, error) {
	var out []Session
	err := s.db.view(func(tx recordTx) error {
		return tx.each(tableSessions, "", func(owner, name string, v []byte) error {
			var rec sessionV1
			if err := s.decode(tableSessions, owner, name, v, &rec); err != nil {
				return err
			}
			if x := rec.session(owner, name); keep(x) {
				out = append(out, x)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// MarkSessionLapsed records that the orphan action has been applied; the next TouchSession clears it. A session
// renewed while it was swept (its lease runs past now) is in use again and stays live: marked, it would be passed
// over by every later sweep until its next renewal, and what its renewing call made would never be swept.
func (s *records) MarkSessionLapsed(owner, name string) error {
	return s.updateSession(owner, name, func(rec *sessionV1) bool {
		if rec.LeaseExpires.After(storedTime(s.now())) {
			return false
		}
		rec.Lapsed, rec.SweepClaimUntil = true, time.Time{}
		return true
	})
}

// ClaimLapsedSession makes the caller the sweeper of a lapsed session until now+hold (see Store).
func (s *records) ClaimLapsedSession(owner, name string, now time.Time, hold time.Duration) (bool, error) {
	claimed := false
	err := s.updateSession(owner, name, func(rec *sessionV1) bool {
		if rec.Lapsed || !rec.LeaseExpires.Before(now) || now.Before(rec.SweepClaimUntil) {
			return false
		}
		rec.SweepClaimUntil = storedTime(now.Add(hold))
		claimed = true
		return true
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return claimed, err
}

// ReleaseSessionClaim ends a sweeper's claim on a session; a session that no longer exists has none.
func (s *records) ReleaseSessionClaim(owner, name string) error {
	err := s.updateSession(owner, name, func(rec *sessionV1) bool {
		if rec.SweepClaimUntil.IsZero() {
			return false
		}
		rec.SweepClaimUntil = time.Time{}
		return true
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// updateSession rewrites one session record in a write transaction when change reports a change.
func (s *records) updateSession(owner, name string, change func(*sessionV1) bool) error {
	return s.db.update(func(tx recordTx) error {
		v, err := tx.get(tableSessions, owner, name)
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("session %q of owner %q: %w", name, owner, ErrNotFound)
		}
		var rec sessionV1
		if err := s.decode(tableSessions, owner, name, v, &rec); err != nil {
			return err
		}
		if !change(&rec) {
			return nil
		}
		return put(tx, tableSessions, owner, name, rec)
	})
}
