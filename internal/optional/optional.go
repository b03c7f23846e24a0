// Package optional is for tests with a half that needs what a machine may lack (E2B's real envd, the TypeScript
// SDK, a D-Bus session, PostgreSQL, root): such a half skips where it cannot run, and the skip is recorded so that
// `make test` says at its end which halves did not run, instead of letting them pass unseen. Every skip of the
// suite goes through here. What `make test` provides itself (scripts/prereqs.sh installs it; CI runs as root) is
// Missing, not Skip: in CI its absence fails the test, since there a skip would hide it.
package optional

import (
	"fmt"
	"os"
	"testing"
)

// LogEnv names the file that skips are appended to, one line each; `make test` sets it and prints the file.
const LogEnv = "E2B_MCP_SKIP_LOG"

// CIEnv is set (to anything but the empty string) in CI: .ci/run sets CI=1.
const CIEnv = "CI"

// Skip records why t does not run here, then skips it. It is for what a machine, CI's included, may lack: another
// platform's feature, a -short run, the real envd where it is not beside the repository.
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

// Missing is for what `make test` provides itself and this machine lacks (PostgreSQL, the keyring, python3,
// root): in CI it fails t, saying why; elsewhere it is Skip.
func Missing(t testing.TB, why string) {
	t.Helper()
	missing(t, why, "`make test` installs it, and .ci/run runs it as root", "`make test` provides it")
}

// MissingFromRelease is Missing for what `make release-check` provides (the release build in dist/), which CI
// runs after `make test`.
func MissingFromRelease(t testing.TB, why string) {
	t.Helper()
	missing(t, why, ".ci/run runs `make release-check`, which makes it", "`make release-check` makes it and runs this")
}

func missing(t testing.TB, why, inCI, provider string) {
	t.Helper()
	if os.Getenv(CIEnv) != "" {
		t.Fatalf("%s (CI must provide it: %s)", why, inCI)
	}
	Skip(t, why+"; "+provider)
}
