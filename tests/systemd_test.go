package tests

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The example systemd unit's command line starts a server on a host without a keyring: every flag exists, the
// values fit together, and the server says which key store and which authentication it uses. systemd's
// specifiers are replaced as systemd would: %S by the state root, %d by the credentials directory.
func TestExampleSystemdUnit(t *testing.T) {
	t.Parallel()
	x := newH(t)
	x.headless = true
	unit, err := os.ReadFile("../examples/e2b-mcp.service")
	if err != nil {
		t.Fatal(err)
	}
	var execStart string
	for _, line := range strings.Split(strings.ReplaceAll(string(unit), "\\\n", " "), "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = rest
		}
	}
	args := strings.Fields(execStart)
	if len(args) < 2 || args[0] != "/usr/local/bin/e2b-mcp" || args[1] != "serve" {
		t.Fatalf("ExecStart = %q", execStart)
	}
	mk, _ := x.masterKeyFile("master-key")
	credentials := strings.TrimSuffix(mk, "/master-key")
	args = args[1:]
	if i := slices.Index(args, "--listen"); i >= 0 {
		args = slices.Delete(args, i, i+2) // the test listens on a free port instead
	}
	for i, a := range args {
		a = strings.ReplaceAll(a, "%S", x.path("var-lib"))
		args[i] = strings.ReplaceAll(a, "%d", credentials)
	}
	srv := x.startHTTPOn(freePort(t), args...)
	for _, want := range []string{"kept in the encrypted key store " + x.path("var-lib", "e2b-mcp", "keys.json"),
		"OAuth access tokens of https://login.example.com for https://mcp.example.com/mcp"} {
		if !srv.stderr.shows(want, 30*time.Second) {
			t.Errorf("serve with the unit's flags does not say %q:\n%s", want, srv.stderr)
		}
	}
}
