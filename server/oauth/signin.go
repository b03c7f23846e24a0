package oauth

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// SignIn is how a page learns who is at the browser when the server uses OAuth: the member signs in with the
// team's identity provider (authorization code with PKCE, as a public client), and the ID token's owner claim
// names them.
type SignIn struct {
	as                 *AuthServer
	clientID, redirect string
	ownerClaim         string
}

// NewSignIn signs members in at as with the public client clientID, whose redirect URI is redirect; ownerClaim
// is the ID token's claim that names the owner.
func NewSignIn(as *AuthServer, clientID, redirect, ownerClaim string) *SignIn {
	return &SignIn{as: as, clientID: clientID, redirect: redirect, ownerClaim: ownerClaim}
}

func (s *SignIn) config(p *oidc.Provider) oauth2.Config {
	scopes := []string{oidc.ScopeOpenID}
	switch s.ownerClaim {
	case "email":
		scopes = append(scopes, "email")
	case "sub":
	default:
		scopes = append(scopes, "profile")
	}
	return oauth2.Config{ClientID: s.clientID, Endpoint: p.Endpoint(), RedirectURL: s.redirect, Scopes: scopes}
}

// AuthURL is where the browser goes to sign in, state, nonce and PKCE verifier being the sign-in's.
func (s *SignIn) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	p, err := s.as.discover(ctx)
	if err != nil {
		return "", err
	}
	cfg := s.config(p)
	return cfg.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// Owner exchanges the code the provider sent back and returns the owner the ID token names.
func (s *SignIn) Owner(ctx context.Context, code, verifier, nonce string) (string, error) {
	if code == "" {
		return "", errors.New("no code")
	}
	p, err := s.as.discover(ctx)
	if err != nil {
		return "", err
	}
	cfg := s.config(p)
	tok, err := cfg.Exchange(oidc.ClientContext(ctx, s.as.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", fmt.Errorf("exchanging the code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", errors.New("the provider sent no ID token")
	}
	v, err := s.as.verifier(ctx, s.clientID)
	if err != nil {
		return "", err
	}
	idt, err := v.Verify(ctx, raw)
	if err != nil {
		return "", err
	}
	if idt.Nonce != nonce || !slices.Contains(idt.Audience, s.clientID) {
		return "", errors.New("the ID token is not for this sign-in")
	}
	claims, err := tokenClaims(idt)
	if err != nil {
		return "", err
	}
	return ownerClaim(claims, s.ownerClaim)
}
