// Package tickets issues and redeems the opaque request state of the server's input requests (an approval
// question, a connect request). The state is an HMAC-signed, expiring, single-use ticket bound to the exact call
// (owner, session, tool, argument digest): an answer counts only for the call it was asked about, and only once,
// even from a client that makes up its own answers. Replicas that share a database sign with a key derived from
// the data key they share (SharedKey) and record the used tickets in the database, so that a ticket one issued
// is honoured by any of them, once.
package tickets

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Tickets issues and redeems the tickets of one kind of input request.
type Tickets struct {
	key  []byte
	ttl  time.Duration
	now  func() time.Time
	used state.TicketNonces
}

type ticket struct {
	Nonce   string         `json:"n"`
	Binding policy.Binding `json:"b"`
	Expires int64          `json:"e"`
	// Claims are what a ticket lets its holder do beyond answering a call (a sync link's sandbox, directory and
	// step), signed with the rest; none for a request state.
	Claims json.RawMessage `json:"c,omitempty"`
}

// ErrNotThisCalls is returned by Redeem for a request state that is not an unused, unexpired ticket of this
// server (or of its replicas) for the call. ErrExpired and ErrUsed wrap it, for a caller that answers a stale
// ticket apart from a forged one.
var ErrNotThisCalls = errors.New("not a valid ticket for this call")

// ErrExpired and ErrUsed are the answers to a genuine ticket that is past its expiry or was used before.
var (
	ErrExpired = fmt.Errorf("%w: it expired", ErrNotThisCalls)
	ErrUsed    = fmt.Errorf("%w: it was used already", ErrNotThisCalls)
)

// New makes the tickets of a server alone, redeemable for ttl: a random key, and its memory of the tickets used.
func New(ttl time.Duration, now func() time.Time) (*Tickets, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("tickets: %w", err)
	}
	return &Tickets{key: key, ttl: ttl, now: now, used: state.NewMemoryTicketNonces()}, nil
}

// Shared makes the tickets of replicas: signed with key (SharedKey's, for the kind), the used ones recorded in
// used, which the replicas share.
func Shared(key []byte, ttl time.Duration, now func() time.Time, used state.TicketNonces) *Tickets {
	return &Tickets{key: key, ttl: ttl, now: now, used: used}
}

// SharedKey derives the key of label's tickets (or of another of the replicas' signatures: preview links, approval
// links) from the data key replicas share. Each kind has a label of its own, so that one kind's ticket never
// passes for another's.
func SharedKey(keys state.KeySource, label string) ([]byte, error) {
	dataKey, err := keys.DataKey()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	defer clear(dataKey)
	return hkdf.Key(sha256.New, dataKey, nil, label, 32)
}

// Issue is a ticket for the call bound by b.
func (e *Tickets) Issue(b policy.Binding) (string, error) {
	t, _, err := e.IssueWith(b, nil)
	return t, err
}

// IssueWith is a ticket bound by b that also carries claims (nil: none), which Open gives back, and when it
// expires.
func (e *Tickets) IssueWith(b policy.Binding, claims any) (string, time.Time, error) {
	return e.IssueBefore(b, claims, time.Time{})
}

// IssueBefore is IssueWith's ticket expiring no later than notAfter (zero: no bound), for a ticket issued in place
// of one that was spent, which must not outlive it.
func (e *Tickets) IssueBefore(b policy.Binding, claims any, notAfter time.Time) (string, time.Time, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", time.Time{}, err
	}
	expires := e.now().Add(e.ttl)
	if !notAfter.IsZero() && notAfter.Before(expires) {
		expires = notAfter
	}
	t := ticket{Nonce: base64.RawURLEncoding.EncodeToString(nonce), Binding: b, Expires: expires.Unix()}
	if claims != nil {
		c, err := json.Marshal(claims)
		if err != nil {
			return "", time.Time{}, err
		}
		t.Claims = c
	}
	payload, err := json.Marshal(t)
	if err != nil {
		return "", time.Time{}, err
	}
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(e.sign(payload)),
		time.Unix(t.Expires, 0), nil
}

func (e *Tickets) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, e.key)
	m.Write(payload)
	return m.Sum(nil)
}

// Redeem uses up state if it is a ticket issued for binding b, unexpired and not used before; otherwise it
// returns ErrNotThisCalls (or ErrExpired, ErrUsed), or the store's error when it cannot tell whether the ticket
// was used (then the ticket must not be honoured).
func (e *Tickets) Redeem(state string, b policy.Binding) error {
	o, err := e.Open(state, nil)
	if err != nil {
		return err
	}
	if o.Binding != b {
		return ErrNotThisCalls
	}
	return e.Spend(o)
}

// Opened is a ticket whose signature and expiry were checked, not used up yet.
type Opened struct {
	Binding policy.Binding
	Expires time.Time
	nonce   string
}

// Open checks that state is a ticket these tickets issued and that it has not expired, and decodes its claims
// into claims (nil: they are not read), without using it up: the caller checks the binding first (so that
// someone who may not use the ticket cannot use it up either), then Spends it. A ticket that is not one of
// these tickets' is ErrNotThisCalls, an expired one ErrExpired.
func (e *Tickets) Open(state string, claims any) (Opened, error) {
	p64, s64, ok := strings.Cut(state, ".")
	if !ok {
		return Opened{}, ErrNotThisCalls
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, e.sign(payload)) {
		return Opened{}, ErrNotThisCalls
	}
	var t ticket
	if err := json.Unmarshal(payload, &t); err != nil {
		return Opened{}, ErrNotThisCalls
	}
	if claims != nil && (t.Claims == nil || json.Unmarshal(t.Claims, claims) != nil) {
		return Opened{}, ErrNotThisCalls
	}
	expires := time.Unix(t.Expires, 0)
	if !e.now().Before(expires) {
		return Opened{}, ErrExpired
	}
	return Opened{Binding: t.Binding, Expires: expires, nonce: t.Nonce}, nil
}

// Spend uses up an opened ticket: ErrUsed when it was used before (here or by a replica), ErrExpired when it
// expired since it was opened, or the store's error when it cannot tell (then the ticket must not be honoured).
func (e *Tickets) Spend(o Opened) error {
	now := e.now()
	if !now.Before(o.Expires) {
		return ErrExpired
	}
	spent, err := e.used.Spend(o.nonce, o.Expires, now)
	switch {
	case err != nil:
		return err
	case !spent:
		return ErrUsed
	}
	return nil
}
