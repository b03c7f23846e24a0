package state

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The connect page's links and browser sessions (see the server's connector). A server alone keeps them in its
// memory (MemoryConnects); replicas keep them in the database they share (Postgres.Connects), so that a link
// made by one replica opens on any, and is spent on all at once.
//
// Neither keeps a link's ID or a session's cookie: only their ConnectKey, a SHA-256 hash, so that whoever reads
// the database or the memory cannot open the page. Nothing else a session needs is secret: what the page must
// not show to others (the form's CSRF token, the sign-in's PKCE verifier and nonce) is derived from the cookie.

// ConnectKey is the SHA-256 hash of a connect link's ID or of a connect cookie, under which a store keeps it.
type ConnectKey [sha256.Size]byte

// ConnectKeyOf hashes a link ID or a cookie.
func ConnectKeyOf(secret string) ConnectKey {
	return sha256.Sum256([]byte("e2b-mcp/connect-key\x00" + secret))
}

// ConnectLink is a link to the connect page, for one owner.
type ConnectLink struct {
	Owner   string
	Expires time.Time
}

// ConnectSession is one browser's visit to a link.
type ConnectSession struct {
	Link      ConnectKey // the link it is for
	Owner     string     // the member the browser proved to be; "" until proven
	SigningIn bool       // on its way to the identity provider and back
	Expires   time.Time
}

var (
	// ErrTooManyConnects is wrapped when a store already holds its limit of unexpired links, or of sessions.
	ErrTooManyConnects = errors.New("too many connect links are waiting; try again in a few minutes")
)

// ConnectStore keeps the connect page's links and sessions. Nothing expired is ever returned; expired entries
// are dropped as new ones come. Lookups of what is not there (or expired) return an error wrapping ErrNotFound.
type ConnectStore interface {
	// AddConnectLink stores a new link; ErrTooManyConnects when the limit of unexpired links is reached.
	AddConnectLink(k ConnectKey, l ConnectLink, now time.Time) error
	// ConnectLink returns an unexpired, unspent link.
	ConnectLink(k ConnectKey, now time.Time) (ConnectLink, error)
	// AddConnectSession stores a new session of an unexpired, unspent link (ErrNotFound otherwise);
	// ErrTooManyConnects when the limit of unexpired sessions is reached.
	AddConnectSession(k ConnectKey, s ConnectSession, now time.Time) error
	// ConnectSession returns an unexpired session of an unspent link.
	ConnectSession(k ConnectKey, now time.Time) (ConnectSession, error)
	// DeleteConnectSession forgets a session (a sign-in once it came back); absent is no error.
	DeleteConnectSession(k ConnectKey) error
	// SpendConnectLink uses the link up, with all its sessions, in one step: of several callers (on several
	// replicas) one gets the link, every other ErrNotFound, as does a caller after it expired.
	SpendConnectLink(k ConnectKey, now time.Time) (ConnectLink, error)
}

var (
	_ ConnectStore = (*MemoryConnects)(nil)
	_ ConnectStore = pgConnects{}
)

// MemoryConnects is the ConnectStore of a server alone: its process's memory.
type MemoryConnects struct {
	limit int

	mu       sync.Mutex
	links    map[ConnectKey]ConnectLink
	sessions map[ConnectKey]ConnectSession
}

// NewMemoryConnects holds up to limit unexpired links, and as many sessions.
func NewMemoryConnects(limit int) *MemoryConnects {
	return &MemoryConnects{limit: limit, links: map[ConnectKey]ConnectLink{}, sessions: map[ConnectKey]ConnectSession{}}
}

func errConnectNotFound(what string) error {
	return fmt.Errorf("no such connect %s (or it expired, or was used): %w", what, ErrNotFound)
}

func (m *MemoryConnects) sweepLocked(now time.Time) {
	for k, l := range m.links {
		if !now.Before(l.Expires) {
			delete(m.links, k)
		}
	}
	for k, s := range m.sessions {
		if _, ok := m.links[s.Link]; !ok || !now.Before(s.Expires) {
			delete(m.sessions, k)
		}
	}
}

func (m *MemoryConnects) AddConnectLink(k ConnectKey, l ConnectLink, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	if len(m.links) >= m.limit {
		return ErrTooManyConnects
	}
	m.links[k] = l
	return nil
}

func (m *MemoryConnects) ConnectLink(k ConnectKey, now time.Time) (ConnectLink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links[k]
	if !ok || !now.Before(l.Expires) {
		return ConnectLink{}, errConnectNotFound("link")
	}
	return l, nil
}

func (m *MemoryConnects) AddConnectSession(k ConnectKey, s ConnectSession, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	if _, ok := m.links[s.Link]; !ok {
		return errConnectNotFound("link")
	}
	if len(m.sessions) >= m.limit {
		return ErrTooManyConnects
	}
	m.sessions[k] = s
	return nil
}

func (m *MemoryConnects) ConnectSession(k ConnectKey, now time.Time) (ConnectSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[k]
	if !ok || !now.Before(s.Expires) {
		return ConnectSession{}, errConnectNotFound("session")
	}
	if l, ok := m.links[s.Link]; !ok || !now.Before(l.Expires) {
		return ConnectSession{}, errConnectNotFound("session")
	}
	return s, nil
}

func (m *MemoryConnects) DeleteConnectSession(k ConnectKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, k)
	return nil
}

func (m *MemoryConnects) SpendConnectLink(k ConnectKey, now time.Time) (ConnectLink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links[k]
	delete(m.links, k)
	for sk, s := range m.sessions {
		if s.Link == k {
			delete(m.sessions, sk)
		}
	}
	if !ok || !now.Before(l.Expires) {
		return ConnectLink{}, errConnectNotFound("link")
	}
	return l, nil
}
