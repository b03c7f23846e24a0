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
	// SandboxEnded is when a sandbox of the session was last deleted or marked gone (zero: never).
	SandboxEnded time.Time `json:"sandbox_ended,omitzero"`
}

// counts reports whether the session counts toward its owner's live sessions at now (see liveSessions).
func (r sessionV1) counts(now time.Time, holdsSandbox bool) bool {
	if r.Lapsed || !r.LeaseExpires.After(now) {
		return false
	}
	if holdsSandbox {
		return true
	}
	finished := !r.SandboxEnded.IsZero() && !r.SandboxEnded.Before(r.LastUsed)
	return !finished && now.Sub(r.LastUsed) < IdleSessionAfter
}

func (r sessionV1) session(owner, name string) Session {
	return Session{Owner: owner, Name: name, Created: r.Created, LastUsed: r.LastUsed,
		LeaseExpires: r.LeaseExpires, Lapsed: r.Lapsed}
}

// DefaultMaxLiveSessions is the default of Options.MaxLiveSessions.
const DefaultMaxLiveSessions = 100

// IdleSessionAfter is how long after its last call a session without a running or paused sandbox stops counting
// toward its owner's live sessions.
const IdleSessionAfter = 10 * time.Minute

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

// liveSessions counts owner's live sessions at now: those whose lease runs and that either hold a running or
// paused sandbox, or had a call within IdleSessionAfter and none of whose sandboxes has ended since. A session
// that is done with (its last sandbox deleted or gone, or no call for a while) then leaves its place to a new
// one at once, though its lease runs on for hours: a client that names a new session per run is never refused,
// while one that makes sessions faster than they finish still meets the bound.
func (s *records) liveSessions(tx recordTx, owner string, now time.Time) (int, error) {
	holding := map[string]bool{} // sessions with a running or paused sandbox
	err := tx.each(tableSandboxes, owner, func(owner, id string, v []byte) error {
		var rec sandboxV1
		if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
			return err
		}
		if rec.State != StateGone {
			holding[rec.Session] = true
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	err = tx.each(tableSessions, owner, func(owner, name string, v []byte) error {
		var rec sessionV1
		if err := s.decode(tableSessions, owner, name, v, &rec); err != nil {
			return err
		}
		if rec.counts(now, holding[name]) {
			n++
		}
		return nil
	})
	return n, err
}

// noteSandboxEnded records in the session's record (when there is one) that one of its sandboxes ended, inside
// the transaction that deleted it or marked it gone.
func (s *records) noteSandboxEnded(tx recordTx, owner, session string) error {
	if session == "" {
		return nil
	}
	v, err := tx.get(tableSessions, owner, session)
	if err != nil || v == nil {
		return err
	}
	var rec sessionV1
	if err := s.decode(tableSessions, owner, session, v, &rec); err != nil {
		return err
	}
	rec.SandboxEnded = storedTime(s.now())
	return put(tx, tableSessions, owner, session, rec)
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
		out = nil // of this attempt only: a transaction may run again (see Postgres.inTx)
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
