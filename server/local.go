package server

import (
	"os"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// localBackend is the E2B emulator run in-process for --backend local: sandboxes are emulated on this machine
// in a temporary directory that goes away with the server, and no E2B account or keyring key is needed.
type localBackend struct {
	url      string
	stop     func()
	storeDir string // the emulated sandboxes' records, removed with them
}

// clients points every owner at the emulator with a key of its own (each owner is its own team there). The
// location flags are ignored: the emulator is the only E2B the local backend knows.
func (l *localBackend) clients() tools.ClientSource {
	return StaticClients(l.url, newSharedHTTPClient(), localKey)
}

func (l *localBackend) close() {
	l.stop()
	if l.storeDir != "" {
		_ = os.RemoveAll(l.storeDir)
	}
}
