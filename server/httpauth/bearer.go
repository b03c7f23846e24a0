// Package httpauth names the caller of an HTTP request by its bearer token: a token of the tokens file, or an
// OAuth access token. A request it cannot name is answered 401 with the challenge that starts a client's sign-in;
// the refused tokens of each client address are counted (refusals.go), so that one sending junk in a loop is told
// to back off and cannot flood the log, while every token is still checked.
package httpauth

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/server/oauth"
)

// TokenOwners are the owners of the tokens file's tokens (credentials.Tokens).
type TokenOwners interface {
	Owner(token string) (owner string, ok bool)
}

// AccessTokens name the owner of an OAuth access token (oauth.Verifier); a token they refuse is an error wrapping
// oauth.ErrTokenRefused, any other error means the authorization server could not be asked.
type AccessTokens interface {
	Owner(ctx context.Context, raw string) (string, error)
}

// Options are what a Bearer needs. At least one of Tokens and OAuth is set.
type Options struct {
	Tokens TokenOwners  // nil: no tokens file
	OAuth  AccessTokens // nil: no OAuth
	// Challenge is the WWW-Authenticate header of a 401 under OAuth (oauth.Config.Challenge), told whether a token
	// was sent; nil without OAuth.
	Challenge func(tokenSent bool) string
	// ClientAddressHeader names the header in which the trusted proxy in front gives the client's address ("":
	// the connection's address is the client's).
	ClientAddressHeader string
	Now                 func() time.Time
	Log                 *slog.Logger
}

// Bearer names the callers of HTTP requests by their bearer tokens.
type Bearer struct {
	o        Options
	refusals *refusals
}

// New makes a Bearer.
func New(o Options) *Bearer {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Bearer{o: o, refusals: newRefusals(o.Now)}
}

// errNoToken means a request carries no bearer token.
var errNoToken = errors.New("no bearer token")

// Owner is the owner r's bearer token names; false, with the 401 written, when it names none.
func (b *Bearer) Owner(w http.ResponseWriter, r *http.Request) (string, bool) {
	owner, err := b.tokenOwner(r.Context(), bearerToken(r.Header.Get("Authorization")))
	if err != nil {
		b.refuse(w, r, err)
		return "", false
	}
	return owner, true
}

// tokenOwner is the owner a bearer token names: a token of the tokens file, or an OAuth access token.
func (b *Bearer) tokenOwner(ctx context.Context, token string) (string, error) {
	if token == "" {
		return "", errNoToken
	}
	if b.o.Tokens != nil {
		if owner, ok := b.o.Tokens.Owner(token); ok {
			return owner, nil
		}
	}
	if b.o.OAuth != nil {
		return b.o.OAuth.Owner(ctx, token)
	}
	return "", oauth.ErrTokenRefused
}

// refuse answers 401, telling an OAuth client where to find the authorization server (a client starts its
// sign-in on that answer). The reason is logged, not sent: it may say which checks a forged token passed. Past
// its address's budget of refused tokens (see refusals), the answer adds Retry-After and is not logged.
func (b *Bearer) refuse(w http.ResponseWriter, r *http.Request, err error) {
	sent := !errors.Is(err, errNoToken)
	addr := clientAddr(r, b.o.ClientAddressHeader)
	level := slog.LevelInfo
	switch {
	case !sent:
		level = slog.LevelDebug
	case errors.Is(err, oauth.ErrTokenRefused):
		wait, logIt := b.refusals.refuse(addr)
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		}
		if !logIt {
			level = slog.LevelDebug
		}
	default:
		level = slog.LevelError // the authorization server could not be reached: no token can be checked
	}
	b.o.Log.Log(r.Context(), level, "HTTP request refused", "remote", addr, "reason", err)
	if b.o.Challenge != nil {
		w.Header().Set("WWW-Authenticate", b.o.Challenge(sent))
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="e2b-mcp"`)
	}
	http.Error(w, "unauthorized: send Authorization: Bearer <token> (an access token of the team's identity "+
		"provider, or one from `e2b-mcp tokens add`)", http.StatusUnauthorized)
}

// bearerToken is the token of an "Authorization: Bearer <token>" header value, "" for any other.
func bearerToken(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}
