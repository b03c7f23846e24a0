package server

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

// elicitations issues and redeems the opaque request state of the server's input requests (an approval
// question, a connect request). The state is an HMAC-signed, expiring, single-use ticket bound to the exact call
// (owner, session, tool, argument digest): an answer counts only for the call it was asked about, and only once,
// even from a client that makes up its own answers.
type elicitations struct {
	key  []byte
	now  func() time.Time
	used state.TicketNonces
}

type ticket struct {
	Nonce   string         `json:"n"`
	Binding policy.Binding `json:"b"`
	Expires int64          `json:"e"`
}

// errNotThisCallsTicket is returned by redeem for a request state that is not an unused, unexpired ticket of
// this server (or of its replicas) for the call.
var errNotThisCallsTicket = errors.New("not a valid ticket for this call")

// newElicitations makes the tickets of a server alone: a random key, and its memory of the tickets used.
func newElicitations(now func() time.Time) (*elicitations, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("tickets: %w", err)
	}
	return &elicitations{key: key, now: now, used: state.NewMemoryTicketNonces()}, nil
}

// sharedStore is the database the server shares with its replicas, if it has one: a stdio server's requests
// come from its own client only, whatever its store.
func (s *Server) sharedStore() (*state.Postgres, bool) {
	pg, ok := s.store.(*state.Postgres)
	return pg, ok && s.cfg.Transport != TransportStdio
}

// newTickets makes the tickets of one kind of input request, label naming the kind. Replicas that share a
// database sign with a key derived from the data key they share and record the used tickets in the database:
// the repeated call that answers a request (in protocol 2026-07-28 a request of its own, which a load balancer
// may send to any replica) is honoured wherever it lands, and only once between them. Each kind has a key of its
// own, so that one kind's ticket never passes for another's.
func (s *Server) newTickets(label string) (*elicitations, error) {
	pg, shared := s.sharedStore()
	if !shared {
		return newElicitations(s.cfg.Now)
	}
	key, err := sharedTicketKey(s.dataKeys, label)
	if err != nil {
		return nil, err
	}
	return &elicitations{key: key, now: s.cfg.Now, used: pg.TicketNonces()}, nil
}

// sharedTicketKey derives the key of label's tickets from the data key replicas share.
func sharedTicketKey(keys state.KeySource, label string) ([]byte, error) {
	dataKey, err := keys.DataKey()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	defer clear(dataKey)
	return hkdf.Key(sha256.New, dataKey, nil, label, 32)
}

func (e *elicitations) issue(b policy.Binding) (string, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	payload, err := json.Marshal(ticket{
		Nonce:   base64.RawURLEncoding.EncodeToString(nonce),
		Binding: b,
		Expires: e.now().Add(elicitationTTL).Unix(),
	})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(e.sign(payload)), nil
}

func (e *elicitations) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, e.key)
	m.Write(payload)
	return m.Sum(nil)
}

// redeem uses up state if it is a ticket issued for binding b, unexpired and not used before; otherwise it
// returns errNotThisCallsTicket, or the store's error when it cannot tell whether the ticket was used (then the
// ticket must not be honoured).
func (e *elicitations) redeem(state string, b policy.Binding) error {
	p64, s64, ok := strings.Cut(state, ".")
	if !ok {
		return errNotThisCallsTicket
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(s64)
	if err1 != nil || err2 != nil || !hmac.Equal(sig, e.sign(payload)) {
		return errNotThisCallsTicket
	}
	var t ticket
	if err := json.Unmarshal(payload, &t); err != nil || t.Binding != b {
		return errNotThisCallsTicket
	}
	now := e.now()
	expires := time.Unix(t.Expires, 0)
	if !now.Before(expires) {
		return errNotThisCallsTicket
	}
	spent, err := e.used.Spend(t.Nonce, expires, now)
	switch {
	case err != nil:
		return err
	case !spent:
		return errNotThisCallsTicket
	}
	return nil
}
