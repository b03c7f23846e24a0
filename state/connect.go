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
	// ErrTooManyConnects is wrapped when a store already holds its limit of unexpired links.
	ErrTooManyConnects = errors.New("too many connect links are waiting; try again in a few minutes")
)

// ConnectLimits bound what a ConnectStore holds so that nobody fills it for everyone: past the bound of one
// owner's links, or of one link's sessions, a new one takes the place of the oldest of its own (the one that
// expires first), so that an owner who keeps asking for links, or a script that keeps opening one, only ever
// drops their own. Only the bound of all links refuses (ErrTooManyConnects): it takes Links/LinksPerOwner
// owners connecting at once to reach it.
type ConnectLimits struct {
	Links         int // unexpired links in all
	LinksPerOwner int // one owner's unexpired links
	// SessionsPerLink is one link's sessions; of the oldest, one whose browser has not yet proven to be the
	// owner (Owner "") is dropped first, so that visits by someone who only has the link cannot end the
	// owner's signed-in session.
	SessionsPerLink int
}

// ConnectStore keeps the connect page's links and sessions. Nothing expired is ever returned; expired entries
// are dropped as new ones come. Lookups of what is not there (or expired) return an error wrapping ErrNotFound.
type ConnectStore interface {
	// AddConnectLink stores a new link, in place of the owner's oldest when they have LinksPerOwner;
	// ErrTooManyConnects when the store holds Links.
	AddConnectLink(k ConnectKey, l ConnectLink, now time.Time) error
	// ConnectLink returns an unexpired, unspent link.
	ConnectLink(k ConnectKey, now time.Time) (ConnectLink, error)
	// AddConnectSession stores a new session of an unexpired, unspent link (ErrNotFound otherwise), in place
	// of one of the link's when it has SessionsPerLink.
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
	limits ConnectLimits

	mu       sync.Mutex
	links    map[ConnectKey]*memoryLink
	sessions map[ConnectKey]ConnectSession
	owners   map[string]map[ConnectKey]struct{} // each owner's links
}

type memoryLink struct {
	ConnectLink
	sessions map[ConnectKey]struct{}
}

// NewMemoryConnects holds links and sessions within limits.
func NewMemoryConnects(limits ConnectLimits) *MemoryConnects {
	return &MemoryConnects{limits: limits, links: map[ConnectKey]*memoryLink{},
		sessions: map[ConnectKey]ConnectSession{}, owners: map[string]map[ConnectKey]struct{}{}}
}

func errConnectNotFound(what string) error {
	return fmt.Errorf("no such connect %s (or it expired, or was used): %w", what, ErrNotFound)
}

// dropLinkLocked forgets a link and its sessions.
func (m *MemoryConnects) dropLinkLocked(k ConnectKey) {
	l, ok := m.links[k]
	if !ok {
		return
	}
	for s := range l.sessions {
		delete(m.sessions, s)
	}
	delete(m.links, k)
	own := m.owners[l.Owner]
	delete(own, k)
	if len(own) == 0 {
		delete(m.owners, l.Owner)
	}
}

// sweepLocked drops every expired link, with its sessions. It runs only when the store is full: until then,
// lookups pass over what expired, and the bounds per owner and per link sweep their own.
func (m *MemoryConnects) sweepLocked(now time.Time) {
	for k, l := range m.links {
		if !now.Before(l.Expires) {
			m.dropLinkLocked(k)
		}
	}
}

func (m *MemoryConnects) AddConnectLink(k ConnectKey, l ConnectLink, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for lk := range m.owners[l.Owner] {
		if !now.Before(m.links[lk].Expires) {
			m.dropLinkLocked(lk)
		}
	}
	if len(m.owners[l.Owner]) >= m.limits.LinksPerOwner {
		m.dropLinkLocked(m.oldestLinkLocked(l.Owner))
	}
	if len(m.links) >= m.limits.Links {
		m.sweepLocked(now)
		if len(m.links) >= m.limits.Links {
			return ErrTooManyConnects
		}
	}
	m.links[k] = &memoryLink{ConnectLink: l, sessions: map[ConnectKey]struct{}{}}
	if m.owners[l.Owner] == nil {
		m.owners[l.Owner] = map[ConnectKey]struct{}{}
	}
	m.owners[l.Owner][k] = struct{}{}
	return nil
}

// oldestLinkLocked is the owner's link that expires first.
func (m *MemoryConnects) oldestLinkLocked(owner string) ConnectKey {
	var oldest ConnectKey
	var at time.Time
	found := false
	for k := range m.owners[owner] {
		if e := m.links[k].Expires; !found || e.Before(at) {
			oldest, at, found = k, e, true
		}
	}
	return oldest
}

// sessionToDropLocked is the session of l that makes room for a new one: of those whose browser has not proven
// to be the owner, if any, else of all, the one that expires first.
func (m *MemoryConnects) sessionToDropLocked(l *memoryLink) ConnectKey {
	var drop ConnectKey
	var dropProven bool
	var at time.Time
	found := false
	for k := range l.sessions {
		s := m.sessions[k]
		proven := s.Owner != ""
		if !found || (dropProven && !proven) || (proven == dropProven && s.Expires.Before(at)) {
			drop, dropProven, at, found = k, proven, s.Expires, true
		}
	}
	return drop
}

func (m *MemoryConnects) ConnectLink(k ConnectKey, now time.Time) (ConnectLink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links[k]
	if !ok || !now.Before(l.Expires) {
		return ConnectLink{}, errConnectNotFound("link")
	}
	return l.ConnectLink, nil
}

func (m *MemoryConnects) AddConnectSession(k ConnectKey, s ConnectSession, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links[s.Link]
	if !ok || !now.Before(l.Expires) {
		return errConnectNotFound("link")
	}
	for sk := range l.sessions {
		if !now.Before(m.sessions[sk].Expires) {
			m.deleteSessionLocked(sk)
		}
	}
	if len(l.sessions) >= m.limits.SessionsPerLink {
		m.deleteSessionLocked(m.sessionToDropLocked(l))
	}
	m.sessions[k] = s
	l.sessions[k] = struct{}{}
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

func (m *MemoryConnects) deleteSessionLocked(k ConnectKey) {
	if s, ok := m.sessions[k]; ok {
		delete(m.sessions, k)
		if l, ok := m.links[s.Link]; ok {
			delete(l.sessions, k)
		}
	}
}

func (m *MemoryConnects) DeleteConnectSession(k ConnectKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleteSessionLocked(k)
	return nil
}

func (m *MemoryConnects) SpendConnectLink(k ConnectKey, now time.Time) (ConnectLink, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links[k]
	m.dropLinkLocked(k)
	if !ok || !now.Before(l.Expires) {
		return ConnectLink{}, errConnectNotFound("link")
	}
	return l.ConnectLink, nil
}
