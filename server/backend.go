package server

import (
	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Backend names, as serve's --backend takes them.
const (
	BackendE2B   = "e2b"
	BackendLocal = "local"
)

// A Backend is where a server's sandboxes live: E2B, or Local (an emulator on this machine). Config.Backend holds
// one; nil means E2B{}, E2B's cloud.
type Backend interface {
	// String is the backend's name in the logs: e2b or local.
	String() string
	// start readies the backend for a server of cfg, whose E2B answers it counts in m.
	start(cfg Config, m *metrics) (*startedBackend, error)
}

// startedBackend is a backend as a running server uses it.
type startedBackend struct {
	clients tools.ClientSource
	// secrets is where owners' E2B keys and the credentials sandboxes get are read: Config.Secrets, or nil for a
	// backend that makes its own keys, where there is no key to connect and no credential to give.
	secrets credentials.SecretStore
	// storeAt is where the records are kept (a state directory or a PostgreSQL URL), sealed with keys.
	storeAt string
	keys    state.KeySource
	// local is the local backend's emulator, nil for E2B.
	local *localBackend
}

func (b *startedBackend) close() {
	if b.local != nil {
		b.local.close()
	}
}

// E2B is E2B's cloud, or the self-hosted E2B or stand-in that Location names. Each owner's calls are made with
// the owner's key as Config.Secrets holds it at that moment, and the records are sealed with the data key kept
// there.
type E2B struct {
	// Location locates E2B (Domain, APIURL, SandboxURL; empty: E2B's cloud); its APIKey and HTTPClient are ignored.
	Location e2b.Config
}

func (E2B) String() string { return BackendE2B }

func (b E2B) start(cfg Config, m *metrics) (*startedBackend, error) {
	storeAt := cfg.StateDir
	if cfg.Store != "" {
		storeAt = cfg.Store
	}
	return &startedBackend{
		clients: newStoredKeyClients(cfg.Secrets, b.Location, cfg.Logger, m),
		secrets: cfg.Secrets,
		storeAt: storeAt,
		keys:    credentials.StateKeys(cfg.Secrets),
	}, nil
}
