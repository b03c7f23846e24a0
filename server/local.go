package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"path/filepath"
	"sync"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/internal/scratch"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// localDirPrefix names the local backend's temporary directories in the system's temporary directory.
const localDirPrefix = "e2b-mcp-local-"

// Local is the E2B emulator run in-process, for trying the server without an E2B account: sandboxes are emulated
// on this machine and vanish with the server (see localBackend). It takes no Config.Store.
type Local struct {
	// checks replace what is asked of this machine (tests); nil: this machine is asked. A pointer keeps Local
	// comparable.
	checks *localChecks
}

// localChecks stand in for the local backend's questions to this machine.
type localChecks struct {
	// codeInterpreter says whether the code-interpreter template can be offered
	// (emulator.CodeInterpreterAvailableContext); ctx ends when the backend closes.
	codeInterpreter func(ctx context.Context) error
}

func (Local) String() string { return BackendLocal }

func (b Local) start(cfg Config, m *metrics) (*startedBackend, error) {
	// Emulated sandboxes vanish with the process, and so do their records: a store of its own in a temporary
	// directory, sealed with a key that lives only in memory, so that the local backend needs no keyring at all
	// and never mixes its records with those of real sandboxes.
	key := make([]byte, state.DataKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	var codeInterpreterCheck func(context.Context) error
	if b.checks != nil {
		codeInterpreterCheck = b.checks.codeInterpreter
	}
	l, err := startLocalBackend(cfg.Logger, codeInterpreterCheck)
	if err != nil {
		return nil, err
	}
	return &startedBackend{
		clients: l.clients(m),
		storeAt: l.storeDir(),
		keys:    state.StaticKeySource(key),
		local:   l,
	}, nil
}

// localBackend is the E2B emulator run in-process for --backend local: sandboxes are emulated on this machine
// in a temporary directory that goes away with the server (the next server removes it if this one is killed),
// and no E2B account or keyring key is needed.
type localBackend struct {
	url  string
	keys *localKeys
	stop func()       // stops the emulator and the checks of this machine it is running
	dir  *scratch.Dir // sandboxes/ (the emulator's) and state/ (their records)
}

// storeDir is where the emulated sandboxes' records are kept, beside the sandboxes and removed with them.
func (l *localBackend) storeDir() string { return filepath.Join(l.dir.Path, "state") }

// clients points every owner at the emulator with a key of its own (each owner is its own team there). The
// location flags are ignored: the emulator is the only E2B the local backend knows.
func (l *localBackend) clients(m *metrics) tools.ClientSource {
	return staticClients{base: e2b.Config{APIURL: l.url, SandboxURL: l.url,
		HTTPClient: newSharedHTTPClient(m)}, key: l.keys.key}
}

func (l *localBackend) close() {
	l.stop()
	_ = l.dir.Remove()
}

// localKeys are the local backend's API keys: a random one per owner, made on the owner's first call and known
// only to this process. The emulator listens on a loopback port that every local user and every web page the
// browser opens can reach; it accepts these keys and no others, so that it hands sandboxes and their envd
// tokens to this server alone, whose calls pass the policy and the audit.
type localKeys struct {
	mu      sync.Mutex
	byOwner map[string]string
}

func newLocalKeys() *localKeys { return &localKeys{byOwner: map[string]string{}} }

// key is owner's key, made on first use.
func (k *localKeys) key(owner string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.byOwner[owner]
	if !ok {
		b := make([]byte, 20)
		_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
		key = "e2b_" + hex.EncodeToString(b)
		k.byOwner[owner] = key
	}
	return key
}

// accepts reports whether key is one this process made (compared in constant time).
func (k *localKeys) accepts(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	found := false
	for _, made := range k.byOwner {
		if subtle.ConstantTimeCompare([]byte(made), []byte(key)) == 1 {
			found = true
		}
	}
	return found
}
