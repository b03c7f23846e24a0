package server

import (
	"path/filepath"

	"github.com/e2b-mcp/e2b-mcp/internal/scratch"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// localDirPrefix names the local backend's temporary directories in the system's temporary directory.
const localDirPrefix = "e2b-mcp-local-"

// localBackend is the E2B emulator run in-process for --backend local: sandboxes are emulated on this machine
// in a temporary directory that goes away with the server (the next server removes it if this one is killed),
// and no E2B account or keyring key is needed.
type localBackend struct {
	url  string
	stop func()
	dir  *scratch.Dir // sandboxes/ (the emulator's) and state/ (their records)
}

// storeDir is where the emulated sandboxes' records are kept, beside the sandboxes and removed with them.
func (l *localBackend) storeDir() string { return filepath.Join(l.dir.Path, "state") }

// clients points every owner at the emulator with a key of its own (each owner is its own team there). The
// location flags are ignored: the emulator is the only E2B the local backend knows.
func (l *localBackend) clients() tools.ClientSource {
	return StaticClients(l.url, newSharedHTTPClient(), localKey)
}

func (l *localBackend) close() {
	l.stop()
	_ = l.dir.Remove()
}
