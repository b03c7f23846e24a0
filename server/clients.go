package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
