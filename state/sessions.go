package state

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
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
}

func (r sessionV1) session(owner, name string) Session {
	return Session{Owner: owner, Name: name, Created: r.Created, LastUsed: r.LastUsed,
		LeaseExpires: r.LeaseExpires, Lapsed: r.Lapsed}
}

// DefaultMaxLiveSessions is the default of Options.MaxLiveSessions.
const DefaultMaxLiveSessions = 100

// TouchSession creates the owner and session if needed and renews the lease to Now()+lease; clears Lapsed. A
// session it would create while its owner has MaxLiveSessions live ones is refused (ErrTooManySessions); an
// existing one, live or lapsed, is always renewed.
func (s *Store) TouchSession(owner, name string, lease time.Duration) (Session, error) {
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
	err := s.update(func(tx *bolt.Tx) error {
		if err := s.ensureOwner(tx, owner); err != nil {
			return err
		}
		b, err := s.bucket(tx, bucketSessions)
		if err != nil {
			return err
		}
		k := recordKey(owner, name)
		now := storedTime(s.now())
		rec := sessionV1{Created: now}
		if v := b.Get(k); v != nil {
			if err := s.decode(bucketSessions, k, v, &rec); err != nil {
				return err
			}
		} else if live, err := s.liveSessions(b, owner, now); err != nil {
			return err
		} else if live >= s.maxSessions {
			return fmt.Errorf("state: owner %q: %w (%d, the most one owner may have)", owner, ErrTooManySessions, live)
		}
		rec.LastUsed = now
		rec.LeaseExpires = now.Add(lease)
		rec.Lapsed = false
		out = rec.session(owner, name)
		return put(b, k, rec)
	})
	if err != nil {
		return Session{}, err
	}
	return out, nil
}

// liveSessions counts owner's sessions whose lease runs at now.
func (s *Store) liveSessions(b *bolt.Bucket, owner string, now time.Time) (int, error) {
	n := 0
	err := forOwner(b, owner, func(k, v []byte) error {
		var rec sessionV1
		if err := s.decode(bucketSessions, k, v, &rec); err != nil {
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
func (s *Store) Sessions() ([]Session, error) {
	return s.sessions(func(Session) bool { return true })
}

// LapsedSessions: sessions whose LeaseExpires is before now and that are not yet marked Lapsed.
func (s *Store) LapsedSessions(now time.Time) ([]Session, error) {
	return s.sessions(func(x Session) bool { return !x.Lapsed && x.LeaseExpires.Before(now) })
}

func (s *Store) sessions(keep func(Session) bool) ([]Session, error) {
	var out []Session
	err := s.view(func(tx *bolt.Tx) error {
		b, err := s.bucket(tx, bucketSessions)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			owner, name, ok := splitKey(k)
			if !ok {
				return fmt.Errorf("%w: %s: malformed session key %q", ErrUnusable, s.path, k)
			}
			var rec sessionV1
			if err := s.decode(bucketSessions, k, v, &rec); err != nil {
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

// MarkSessionLapsed records that the orphan action has been applied; the next TouchSession clears it.
func (s *Store) MarkSessionLapsed(owner, name string) error {
	return s.update(func(tx *bolt.Tx) error {
		b, err := s.bucket(tx, bucketSessions)
		if err != nil {
			return err
		}
		k := recordKey(owner, name)
		v := b.Get(k)
		if v == nil {
			return fmt.Errorf("session %q of owner %q: %w", name, owner, ErrNotFound)
		}
		var rec sessionV1
		if err := s.decode(bucketSessions, k, v, &rec); err != nil {
			return err
		}
		rec.Lapsed = true
		return put(b, k, rec)
	})
}
