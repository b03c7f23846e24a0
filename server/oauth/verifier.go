package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

// discoveryTimeout bounds one OpenID Connect discovery request to the authorization server.
const discoveryTimeout = 15 * time.Second

// AuthServer is the team's authorization server, discovered (OpenID Connect discovery) on first use and again
// after a failure, so that a server that starts while its identity provider is briefly unreachable recovers by
// itself.
type AuthServer struct {
	issuer string
	client *http.Client
	now    func() time.Time // the key set's clock

	mu       sync.Mutex
	provider *oidc.Provider
	keys     *providerKeys
	algs     []string // the signing algorithms the provider publishes that the verifier knows
}

// NewAuthServer is the authorization server of issuer, reached through client (not an E2B client: its failures are
// not E2B's), with now the clock of its key set (nil: time.Now).
func NewAuthServer(issuer string, client *http.Client, now func() time.Time) *AuthServer {
	if now == nil {
		now = time.Now
	}
	return &AuthServer{issuer: issuer, client: client, now: now}
}

func (a *AuthServer) discover(ctx context.Context) (*oidc.Provider, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.provider != nil {
		return a.provider, nil
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), a.client), discoveryTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, a.issuer)
	var meta struct {
		KeysURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err == nil {
		err = p.Claims(&meta)
	}
	if err == nil && meta.KeysURL == "" {
		err = errors.New("its metadata names no jwks_uri")
	}
	if err != nil {
		return nil, fmt.Errorf("discovering the authorization server %s: %w", a.issuer, err)
	}
	a.provider, a.keys = p, &providerKeys{url: meta.KeysURL, client: a.client, now: a.now}
	a.algs = slices.DeleteFunc(meta.Algs, func(alg string) bool {
		return !slices.Contains(signingAlgs,
			jose.SignatureAlgorithm(alg))
	})
	return p, nil
}

// verifier checks JWTs of the authorization server meant for audience, with its signing algorithms (RS256 when
// it publishes none the verifier knows) and its one key set, which every verifier shares.
func (a *AuthServer) verifier(ctx context.Context, audience string) (*oidc.IDTokenVerifier, error) {
	if _, err := a.discover(ctx); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return oidc.NewVerifier(a.issuer, a.keys, &oidc.Config{ClientID: audience, SupportedSigningAlgs: a.algs}), nil
}

// Verifier checks access tokens of an authorization server for the resource of a Config.
type Verifier struct {
	cfg Config
	as  *AuthServer

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

// NewVerifier checks the access tokens of as for cfg.Resource, their owner in cfg.OwnerClaim.
func NewVerifier(cfg Config, as *AuthServer) *Verifier {
	return &Verifier{cfg: cfg, as: as}
}

// ErrTokenRefused is wrapped by every reason a well-formed request's token is not accepted.
var ErrTokenRefused = errors.New("access token refused")

// Owner checks raw and returns the owner its claim names. Errors never contain the token; every refusal of the
// token itself wraps ErrTokenRefused, and any other error means the authorization server could not be discovered.
func (v *Verifier) Owner(ctx context.Context, raw string) (string, error) {
	v.mu.Lock()
	verifier := v.verifier
	v.mu.Unlock()
	if verifier == nil {
		var err error
		if verifier, err = v.as.verifier(ctx, v.cfg.Resource); err != nil {
			return "", err
		}
		v.mu.Lock()
		v.verifier = verifier
		v.mu.Unlock()
	}
	tok, err := verifier.Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTokenRefused, err)
	}
	claims, err := tokenClaims(tok)
	if err != nil {
		return "", err
	}
	if err := checkAccessToken(raw, claims, v.cfg.RequireAccessTokenType); err != nil {
		return "", err
	}
	return ownerClaim(claims, v.cfg.OwnerClaim)
}

// The header typ values (compared without regard to case, RFC 7515 §4.1.9) of a JWT access token: at+jwt, as
// RFC 9068 names it, in its short and its media type form; and JWT, the generic type that most providers (zitadel,
// Auth0, Entra ID, Keycloak) put on their access tokens and their ID tokens alike.
var (
	accessTokenTypes = []string{"at+jwt", "application/at+jwt"}
	genericJWTTypes  = []string{"jwt", "application/jwt"}
)

// notAccessTokenClaims are claims that an access token never carries: those of ID tokens (OpenID Connect Core
// §2 and §3.3.2.11: nonce, at_hash, c_hash; FAPI: s_hash) and of security event tokens such as logout tokens
// (RFC 8417: events).
var notAccessTokenClaims = []string{"nonce", "at_hash", "c_hash", "s_hash", "events"}

// checkAccessToken refuses a verified JWT of the authorization server that is not an access token, such as an
// ID token that names this server in its audience (providers that add a requested audience to every token do).
// The header typ decides when it is at+jwt (an access token) or anything but JWT (a logout token, a DPoP proof,
// ...). A token typed JWT, or not typed, is refused when it carries a claim an access token never has, or when
// the provider names its kind in a typ claim (Keycloak: Bearer for access tokens, which older versions give the
// sign-in's nonce too; ID or Refresh for the others). requireAT lets in only at+jwt.
func checkAccessToken(raw string, claims map[string]any, requireAT bool) error {
	typ, err := headerType(raw)
	if err != nil {
		return err
	}
	switch {
	case oneOf(typ, accessTokenTypes):
		return nil
	case requireAT && typ == "":
		return fmt.Errorf("%w: the token has no type, and this server accepts only tokens typed at+jwt (RFC 9068)",
			ErrTokenRefused)
	case requireAT:
		return fmt.Errorf("%w: the token's type is %q, and this server accepts only tokens typed at+jwt (RFC 9068)",
			ErrTokenRefused, typ)
	case typ != "" && !oneOf(typ, genericJWTTypes):
		return fmt.Errorf("%w: the token's type %q is not an access token's", ErrTokenRefused, typ)
	}
	if kind, ok := claims["typ"]; ok {
		if s, _ := kind.(string); strings.EqualFold(s, "Bearer") {
			return nil
		}
		return fmt.Errorf("%w: the token says it is of kind %q, not an access token (Bearer)",
			ErrTokenRefused, fmt.Sprint(kind))
	}
	for _, c := range notAccessTokenClaims {
		if _, ok := claims[c]; ok {
			return fmt.Errorf("%w: the token carries %q, a claim of ID tokens or security event tokens, not of access tokens",
				ErrTokenRefused, c)
		}
	}
	return nil
}

// headerType is the typ of a compact JWS's protected header ("" when there is none).
func headerType(raw string) (string, error) {
	encoded, _, _ := strings.Cut(raw, ".")
	data, err := base64.RawURLEncoding.DecodeString(encoded)
	var header struct {
		Typ *string `json:"typ"`
	}
	if err == nil {
		err = json.Unmarshal(data, &header)
	}
	if err != nil {
		return "", fmt.Errorf("%w: its header: %v", ErrTokenRefused, err)
	}
	if header.Typ == nil {
		return "", nil
	}
	if *header.Typ == "" {
		return "", fmt.Errorf("%w: the token's type is empty", ErrTokenRefused)
	}
	return *header.Typ, nil
}

func oneOf(s string, set []string) bool {
	return slices.ContainsFunc(set, func(t string) bool { return strings.EqualFold(s, t) })
}

// tokenClaims are the claims of a verified token.
func tokenClaims(tok *oidc.IDToken) (map[string]any, error) {
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTokenRefused, err)
	}
	return claims, nil
}

// ownerClaim is the owner that the claim named claim of a verified token names.
func ownerClaim(claims map[string]any, claim string) (string, error) {
	owner, ok := claims[claim].(string)
	if !ok || owner == "" {
		return "", fmt.Errorf("%w: the token has no %q claim naming its owner", ErrTokenRefused, claim)
	}
	if claim == "email" {
		if verified, _ := claims["email_verified"].(bool); !verified {
			return "", fmt.Errorf("%w: the token's email is not verified", ErrTokenRefused)
		}
		if !isEmailAddress(owner) {
			return "", fmt.Errorf("%w: the token's email is not an address", ErrTokenRefused)
		}
	}
	if err := credentials.CheckOwner(owner); err != nil {
		return "", fmt.Errorf("%w: the %q claim cannot name an owner: %v", ErrTokenRefused, claim, err)
	}
	return owner, nil
}
