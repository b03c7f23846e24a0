package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// storedKeyClients makes an E2B client per call with the owner's key as the secret store (OS keyring or
// encrypted key store) holds it at that moment, so `e2b-mcp auth login` or `logout` in another terminal, or a
// key connected through the connect page, takes effect on the next call.
type storedKeyClients struct {
	secrets credentials.SecretStore
	base    e2b.Config
}

func newStoredKeyClients(secrets credentials.SecretStore, loc e2b.Config, log *slog.Logger,
	m *metrics) *storedKeyClients {
	base := e2b.Config{
		Domain:     loc.Domain,
		APIURL:     loc.APIURL,
		SandboxURL: loc.SandboxURL,
		HTTPClient: newSharedHTTPClient(m),
		Logger:     log,
	}
	return &storedKeyClients{secrets: secrets, base: base}
}

// Client returns owner's E2B client; with no key stored the error wraps tools.ErrNoAPIKey.
func (k *storedKeyClients) Client(_ context.Context, owner string) (*e2b.Client, error) {
	key, err := credentials.APIKey(k.secrets, owner)
	if errors.Is(err, credentials.ErrNoKey) {
		return nil, fmt.Errorf("%w: %w", tools.ErrNoAPIKey, err)
	}
	if err != nil {
		return nil, err
	}
	cfg := k.base
	cfg.APIKey = key
	return e2b.NewClient(cfg)
}

// staticClients serves every owner from one E2B deployment with a key per owner: the local backend's emulator.
type staticClients struct {
	base e2b.Config
	key  func(owner string) string
}

func (c staticClients) Client(_ context.Context, owner string) (*e2b.Client, error) {
	cfg := c.base
	cfg.APIKey = c.key(owner)
	return e2b.NewClient(cfg)
}

// A call's E2B client is read while its started record is written (readClientEarly): the owner's key is a round
// trip to the secret store (D-Bus on Linux) and the started record's sync is the wait every call has, so the two
// overlap instead of adding up. The read begins once the call is allowed to run, so a login or logout before the
// call still decides it, and it is over before the call runs, so nothing of the call runs beside it. Only the
// call's first client is the one read early, and only when that read found a client: a call that found no key
// (the connect flow then waits for one and runs the call) or asks again reads afresh, as it would have.
type earlyClient struct {
	owner string
	taken atomic.Bool
	done  chan struct{}
	c     *e2b.Client
	err   error
}

type earlyClientKey struct{}

// readClientEarly starts reading owner's client from src for the call of ctx, and returns ctx carrying it for
// withEarlyClient, and a function that waits for the read to end.
func readClientEarly(ctx context.Context, src tools.ClientSource, owner string) (context.Context, func()) {
	e := &earlyClient{owner: owner, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer func() {
			if r := recover(); r != nil {
				e.c, e.err = nil, fmt.Errorf("reading the E2B key failed: %v", r)
			}
		}()
		e.c, e.err = src.Client(ctx, owner)
	}()
	return context.WithValue(ctx, earlyClientKey{}, e), func() { <-e.done }
}

// withEarlyClient is a ClientSource that gives a call the client read early for it, the first time it asks.
type withEarlyClient struct{ tools.ClientSource }

func (w withEarlyClient) Client(ctx context.Context, owner string) (*e2b.Client, error) {
	if e, ok := ctx.Value(earlyClientKey{}).(*earlyClient); ok && e.owner == owner && e.taken.CompareAndSwap(false, true) {
		<-e.done
		if e.err == nil {
			return e.c, nil
		}
	}
	return w.ClientSource.Client(ctx, owner)
}
