package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
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

// readEarly starts reading, for a call of the tool by caller that may now run, what it will read of its owner's
// secret store: the owner's E2B client, and for a tool that makes sandboxes the egress configuration (see
// tools.EarlyRead). It returns ctx carrying the reads for withEarlyClient and the tools, and a function that waits
// for them to end.
func (s *Server) readEarly(ctx context.Context, tool string, caller tools.Caller) (context.Context, func()) {
	var waits []func()
	callCtx := ctx // the reads' own; ctx gains their values below
	if s.clients != nil {
		read := tools.StartEarlyRead(func() (*e2b.Client, error) { return s.clients.Client(callCtx, caller.Owner) })
		ctx = context.WithValue(ctx, earlyClientKey{}, earlyClient{owner: caller.Owner, read: read})
		waits = append(waits, read.Wait)
	}
	if s.egress != nil && s.tools[tool].ReadsEgress {
		read := tools.StartEarlyRead(func() (egress.Config, error) { return s.egress.Resolve(caller.Owner, caller.Session) })
		ctx = tools.WithEarlyEgress(ctx, caller, read)
		waits = append(waits, read.Wait)
	}
	return ctx, func() {
		for _, wait := range waits {
			wait()
		}
	}
}

// earlyClient is an owner's E2B client read early for a call.
type earlyClient struct {
	owner string
	read  *tools.EarlyRead[*e2b.Client]
}

type earlyClientKey struct{}

// withEarlyClient is a ClientSource that gives a call the client read early for it, the first time it asks.
type withEarlyClient struct{ tools.ClientSource }

func (w withEarlyClient) Client(ctx context.Context, owner string) (*e2b.Client, error) {
	if e, ok := ctx.Value(earlyClientKey{}).(earlyClient); ok && e.owner == owner {
		if c, ok := e.read.Take(); ok {
			return c, nil
		}
	}
	return w.ClientSource.Client(ctx, owner)
}
