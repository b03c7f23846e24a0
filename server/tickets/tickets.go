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
}

// ErrNotThisCalls is returned by Redeem for a request state that is not an unused, unexpired ticket of this
// server (or of its replicas) for the call.
var ErrNotThisCalls = errors.New("not a valid ticket for this call")

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
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	payload, err := json.Marshal(ticket{
		Nonce:   base64.RawURLEncoding.EncodeToString(nonce),
		Binding: b,
		Expires: e.now().Add(e.ttl).Unix(),
	})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(e.sign(payload)), nil
}

func (e *Tickets) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, e.key)
	m.Write(payload)
	return m.Sum(nil)
}

// Redeem uses up state if it is a ticket issued for binding b, unexpired and not used before; otherwise it
// returns ErrNotThisCalls, or the store's error when it cannot tell whether the ticket was used (then the
// ticket must not be honoured).
func (e *Tickets) Redeem(state string, b policy.Binding) error {
	p64, s64, ok := strings.Cut(state, ".")
	if !ok {
		return ErrNotThisCalls
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, e.sign(payload)) {
		return ErrNotThisCalls
	}
	var t ticket
	if err := json.Unmarshal(payload, &t); err != nil || t.Binding != b {
		return ErrNotThisCalls
	}
	now := e.now()
	expires := time.Unix(t.Expires, 0)
	if !now.Before(expires) {
		return ErrNotThisCalls
	}
	spent, err := e.used.Spend(t.Nonce, expires, now)
	switch {
	case err != nil:
		return err
	case !spent:
		return ErrNotThisCalls
	}
	return nil
}
