// Package optional is for tests with a half that needs what a machine may lack (E2B's real envd, the TypeScript
// SDK, a D-Bus session): such a half skips where it cannot run, and the skip is recorded so that `make test`
// says at its end which halves did not run, instead of letting them pass unseen.
package optional

import (
	"fmt"
	"os"
	"testing"
)

// LogEnv names the file that skips are appended to, one line each; `make test` sets it and prints the file.
const LogEnv = "E2B_MCP_SKIP_LOG"

// Skip records why t does not run here, then skips it.
func Skip(t testing.TB, why string) {
	t.Helper()
	if path := os.Getenv(LogEnv); path != "" {
		// One short O_APPEND write per skip: lines of test binaries running in parallel do not interleave.
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			_, _ = fmt.Fprintf(f, "%s: %s\n", t.Name(), why)
			_ = f.Close()
		}
	}
	t.Skip(why)
}
