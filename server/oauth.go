package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

// OAuthConfig makes the server an OAuth 2.1 resource server as the MCP authorization specification describes:
// it publishes Protected Resource Metadata naming the team's authorization server, answers a request without a
// valid token with 401 and a WWW-Authenticate header pointing there, and accepts access tokens that are JWTs
// signed by the authorization server (keys from its JWKS, found through OpenID Connect discovery), issued by it,
// meant for this server (the audience holds Resource) and not expired. A claim of the token names the owner.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer URL (https, or http on a loopback address).
	Issuer string
	// Resource is this server's resource URL as its clients reach it, e.g. https://mcp.example.com/mcp: the
	// audience every token must carry.
	Resource string
	// OwnerClaim names the claim whose value is the owner (default "sub"). With "email", tokens whose
	// email_verified claim is not true are refused.
	OwnerClaim string
	// Scopes are published as scopes_supported, for clients to ask for (optional).
	Scopes []string
	// RequireAccessTokenType lets in only tokens whose header typ is at+jwt (RFC 9068), for providers that mark
	// their access tokens so. Without it, tokens typed JWT or not typed at all are let in too unless they carry
	// a claim of ID tokens (see checkAccessToken).
	RequireAccessTokenType bool
	// ClientID is the connect page's client at the authorization server (public, PKCE), with the redirect URI
	// PUBLIC_URL/connect/callback: members sign in with it to prove who they are before they connect a key.
	// Without it the connect page is off under OAuth.
	ClientID string
}

// DefaultOwnerClaim is the claim that names the owner unless the operator chooses another.
const DefaultOwnerClaim = "sub"

// discoveryTimeout bounds one OpenID Connect discovery request to the authorization server.
const discoveryTimeout = 15 * time.Second

func (c OAuthConfig) check() (OAuthConfig, error) {
	if c.OwnerClaim == "" {
		c.OwnerClaim = DefaultOwnerClaim
	}
	if err := checkPublicURL("the OAuth issuer", c.Issuer); err != nil {
		return c, err
	}
	if err := checkPublicURL("the resource URL", c.Resource); err != nil {
		return c, err
	}
	return c, nil
}

// checkPublicURL accepts absolute https URLs without query or fragment, and http ones on a loopback host (for
// trying things on one machine).
func checkPublicURL(what, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return fmt.Errorf("%s is not set", what)
	case err != nil:
		return fmt.Errorf("%s %q: %w", what, raw, err)
	case u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%s %q must be an absolute URL without user, query or fragment", what, raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s %q must use https (plain http only on a loopback address)", what, raw)
}

// authServer is the team's authorization server, discovered (OpenID Connect discovery) on first use and again
// after a failure, so that a server that starts while its identity provider is briefly unreachable recovers by
// itself.
type authServer struct {
	issuer string
	client *http.Client
	now    func() time.Time // the key set's clock; nil: time.Now

	mu       sync.Mutex
	provider *oidc.Provider
	keys     *providerKeys
	algs     []string // the signing algorithms the provider publishes that the verifier knows
}

func (a *authServer) discover(ctx context.Context) (*oidc.Provider, error) {
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
	now := a.now
	if now == nil {
		now = time.Now
	}
	a.provider, a.keys = p, &providerKeys{url: meta.KeysURL, client: a.client, now: now}
	a.algs = slices.DeleteFunc(meta.Algs, func(alg string) bool {
		return !slices.Contains(signingAlgs,
			jose.SignatureAlgorithm(alg))
	})
	return p, nil
}

// verifier checks JWTs of the authorization server meant for audience, with its signing algorithms (RS256 when
// it publishes none the verifier knows) and its one key set, which every verifier shares.
func (a *authServer) verifier(ctx context.Context, audience string) (*oidc.IDTokenVerifier, error) {
	if _, err := a.discover(ctx); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return oidc.NewVerifier(a.issuer, a.keys, &oidc.Config{ClientID: audience, SupportedSigningAlgs: a.algs}), nil
}

// oauthVerifier checks access tokens.
type oauthVerifier struct {
	cfg OAuthConfig
	as  *authServer

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

func newOAuthVerifier(cfg OAuthConfig, as *authServer) *oauthVerifier {
	return &oauthVerifier{cfg: cfg, as: as}
}

// errTokenRefused is wrapped by every reason a well-formed request's token is not accepted.
var errTokenRefused = errors.New("access token refused")

// owner checks raw and returns the owner its claim names. Errors never contain the token.
func (v *oauthVerifier) owner(ctx context.Context, raw string) (string, error) {
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
		return "", fmt.Errorf("%w: %v", errTokenRefused, err)
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
			errTokenRefused)
	case requireAT:
		return fmt.Errorf("%w: the token's type is %q, and this server accepts only tokens typed at+jwt (RFC 9068)",
			errTokenRefused, typ)
	case typ != "" && !oneOf(typ, genericJWTTypes):
		return fmt.Errorf("%w: the token's type %q is not an access token's", errTokenRefused, typ)
	}
	if kind, ok := claims["typ"]; ok {
		if s, _ := kind.(string); strings.EqualFold(s, "Bearer") {
			return nil
		}
		return fmt.Errorf("%w: the token says it is of kind %q, not an access token (Bearer)",
			errTokenRefused, fmt.Sprint(kind))
	}
	for _, c := range notAccessTokenClaims {
		if _, ok := claims[c]; ok {
			return fmt.Errorf("%w: the token carries %q, a claim of ID tokens or security event tokens, not of access tokens",
				errTokenRefused, c)
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
		return "", fmt.Errorf("%w: its header: %v", errTokenRefused, err)
	}
	if header.Typ == nil {
		return "", nil
	}
	if *header.Typ == "" {
		return "", fmt.Errorf("%w: the token's type is empty", errTokenRefused)
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
		return nil, fmt.Errorf("%w: %v", errTokenRefused, err)
	}
	return claims, nil
}

// ownerClaim is the owner that the claim named claim of a verified token names.
func ownerClaim(claims map[string]any, claim string) (string, error) {
	owner, ok := claims[claim].(string)
	if !ok || owner == "" {
		return "", fmt.Errorf("%w: the token has no %q claim naming its owner", errTokenRefused, claim)
	}
	if claim == "email" {
		if verified, _ := claims["email_verified"].(bool); !verified {
			return "", fmt.Errorf("%w: the token's email is not verified", errTokenRefused)
		}
		if !isEmailAddress(owner) {
			return "", fmt.Errorf("%w: the token's email is not an address", errTokenRefused)
		}
	}
	if err := credentials.CheckOwner(owner); err != nil {
		return "", fmt.Errorf("%w: the %q claim cannot name an owner: %v", errTokenRefused, claim, err)
	}
	return owner, nil
}

// isEmailAddress reports whether owner has the form of an email address (something, @, something): with the email
// owner claim every OAuth owner has it, and no tokens-file owner beside OAuth may (tokensFileRule).
func isEmailAddress(owner string) bool {
	local, domain, ok := strings.Cut(owner, "@")
	return ok && local != "" && domain != ""
}

// tokensFileRule is the rule for the owners of a tokens file beside OAuth. Tokens-file owners and OAuth owners
// must never name each other: an account of the identity provider whose owner claim is a tokens-file owner's
// name would act as that owner, with their E2B key and sandboxes. With the email owner claim every OAuth owner
// is a verified email address, so a tokens-file owner must not be one; any other claim (sub,
// preferred_username, ...) can be any name the provider gives or lets its users choose, so a tokens file
// beside it is refused.
func (c OAuthConfig) tokensFileRule() (credentials.OwnerRule, error) {
	if c.OwnerClaim != "email" {
		return nil, fmt.Errorf("a tokens file beside OAuth needs --oauth-owner-claim email: the owner claim %q can "+
			"carry any name, a tokens-file owner's too, and the identity provider's account of that name "+
			"would act as that owner", c.OwnerClaim)
	}
	return func(owner string) error {
		if isEmailAddress(owner) {
			return fmt.Errorf("the owner %q has the form of an email address, which beside OAuth (owner claim email) "+
				"only the identity provider's accounts may have: name the tokens' owners otherwise", owner)
		}
		return nil
	}, nil
}

// metadataURL is where the Protected Resource Metadata of the resource is published (RFC 9728 §3.1: the
// well-known path, followed by the resource's path).
func (c OAuthConfig) metadataURL() string {
	u, _ := url.Parse(c.Resource) // checked by check
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: mcpserver.ProtectedResourceMetadataPath(c.Resource)}).String()
}

// metadataHandler serves the Protected Resource Metadata.
func (c OAuthConfig) metadataHandler() http.Handler {
	return mcpserver.NewProtectedResourceMetadataHandler(mcpserver.ProtectedResourceMetadataConfig{
		Resource:               c.Resource,
		AuthorizationServers:   []string{c.Issuer},
		ScopesSupported:        c.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "e2b-mcp",
	})
}

// challenge is the WWW-Authenticate header of a 401: where the metadata is, and (RFC 6750) why a token that was
// sent is refused.
func (c OAuthConfig) challenge(tokenSent bool) string {
	h := fmt.Sprintf(`Bearer resource_metadata=%q`, c.metadataURL())
	if len(c.Scopes) > 0 {
		h += fmt.Sprintf(`, scope=%q`, strings.Join(c.Scopes, " "))
	}
	if tokenSent {
		h += `, error="invalid_token", error_description="the access token is not valid for this server"`
	}
	return h
}
