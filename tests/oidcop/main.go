// Command oidcop is the OpenID Connect provider the end-to-end tests sign in with: the example provider of
// zitadel/oidc (a certified OpenID Connect library), with its in-memory users ("test-user@127.0.0.1" and
// "test-user2", password "verysecure") and its HTML login page, and one public client (PKCE, no secret) whose
// access tokens are JWTs carrying the resource's URL in their audience, as an identity provider set up for an MCP
// server issues them, for each public client (PKCE, no secret) given as ID=REDIRECT_URI.
//
//	oidcop -listen 127.0.0.1:0 -client e2b-mcp-test=http://127.0.0.1:P/callback -audience http://127.0.0.1:Q/mcp
//
// Once it listens it prints one JSON line, {"issuer": "http://127.0.0.1:PORT"}, and serves until killed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	var clients []*storage.Client
	flag.Func("client", "a public client, as ID=REDIRECT_URI (repeatable)", func(v string) error {
		id, redirect, ok := strings.Cut(v, "=")
		if !ok || id == "" || redirect == "" {
			return fmt.Errorf("want ID=REDIRECT_URI, got %q", v)
		}
		clients = append(clients, storage.NativeClient(id, redirect))
		return nil
	})
	audience := flag.String("audience", "", "the resource URL put in every access token's audience")
	flag.Parse()
	if len(clients) == 0 || *audience == "" {
		fmt.Fprintln(os.Stderr, "oidcop: -client and -audience are required")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcop:", err)
		os.Exit(1)
	}
	issuer := "http://" + ln.Addr().String()
	storage.RegisterClients(clients...)
	st := resourceStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer + "/")), audience: *audience}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, st, logger, false)
	if err := json.NewEncoder(os.Stdout).Encode(map[string]string{"issuer": issuer}); err != nil {
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "oidcop:", http.Serve(ln, router))
	os.Exit(1)
}

// resourceStorage is the example storage with JWT access tokens whose audience names the resource.
type resourceStorage struct {
	*storage.Storage
	audience string
}

func (s resourceStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s resourceStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return resourceRequest{AuthRequest: r, audience: s.audience}, nil
}

type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

type resourceRequest struct {
	op.AuthRequest
	audience string
}

func (r resourceRequest) GetAudience() []string {
	return append(r.AuthRequest.GetAudience(), r.audience)
}
