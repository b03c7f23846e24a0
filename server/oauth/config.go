package oauth

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

// Config makes a server an OAuth 2.1 resource server as the MCP authorization specification describes:
// it publishes Protected Resource Metadata naming the team's authorization server, answers a request without a
// valid token with 401 and a WWW-Authenticate header pointing there, and accepts access tokens that are JWTs
// signed by the authorization server (keys from its JWKS, found through OpenID Connect discovery), issued by it,
// meant for this server (the audience holds Resource) and not expired. A claim of the token names the owner.
type Config struct {
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

// TokensFileRule is the rule for the owners of a tokens file beside OAuth. Tokens-file owners and OAuth owners
// must never name each other: an account of the identity provider whose owner claim is a tokens-file owner's
// name would act as that owner, with their E2B key and sandboxes. With the email owner claim every OAuth owner
// is a verified email address, so a tokens-file owner must not be one; any other claim (sub,
// preferred_username, ...) can be any name the provider gives or lets its users choose, so a tokens file
// beside it is refused.
func (c Config) TokensFileRule() (credentials.OwnerRule, error) {
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

// MetadataURL is where the Protected Resource Metadata of the resource is published (RFC 9728 §3.1: the
// well-known path, followed by the resource's path).
func (c Config) MetadataURL() string {
	u, _ := url.Parse(c.Resource) // checked by the server's configuration
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: mcpserver.ProtectedResourceMetadataPath(c.Resource)}).String()
}

// MetadataHandler serves the Protected Resource Metadata.
func (c Config) MetadataHandler() http.Handler {
	return mcpserver.NewProtectedResourceMetadataHandler(mcpserver.ProtectedResourceMetadataConfig{
		Resource:               c.Resource,
		AuthorizationServers:   []string{c.Issuer},
		ScopesSupported:        c.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "e2b-mcp",
	})
}

// Challenge is the WWW-Authenticate header of a 401: where the metadata is, and (RFC 6750) why a token that was
// sent is refused.
func (c Config) Challenge(tokenSent bool) string {
	h := fmt.Sprintf(`Bearer resource_metadata=%q`, c.MetadataURL())
	if len(c.Scopes) > 0 {
		h += fmt.Sprintf(`, scope=%q`, strings.Join(c.Scopes, " "))
	}
	if tokenSent {
		h += `, error="invalid_token", error_description="the access token is not valid for this server"`
	}
	return h
}

// isEmailAddress reports whether owner has the form of an email address (something, @, something): with the email
// owner claim every OAuth owner has it, and no tokens-file owner beside OAuth may (TokensFileRule).
func isEmailAddress(owner string) bool {
	local, domain, ok := strings.Cut(owner, "@")
	return ok && local != "" && domain != ""
}
