package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// The demo runs a whole session against the local backend of a freshly built binary and prints every call.
func TestDemoRunsWholeSession(t *testing.T) {
	if testing.Short() {
		optional.Skip(t, "-short: builds the binary and runs a session")
	}
	bin := filepath.Join(t.TempDir(), "e2b-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("building the binary: %v\n%s", err, out)
	}
	var out bytes.Buffer
	if err := run(bin, false, false, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"e2b_create_sandbox", "e2b_checkpoint_sandbox", "e2b_fork_sandbox",
		`"stdout": "2\n3\n5\n7\n11\n13\n17\n19\n23\n29\n"`, // the primes script ran in the sandbox
		"Sandbox 'sbx-does-not-exist' not found",
		"the server asks the human",                        // delete needs approval under the built-in policy
		"e2b_get_url", "200 OK", "Directory listing for /", // the preview link opened
		"demo finished",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, got)
		}
	}
}

// A server that fails at start shows its own error, not only the client's "transport closed".
func TestDemoShowsTheServersError(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "e2b-mcp")
	script := "#!/bin/sh\necho 'e2btest: bubblewrap (/usr/bin/bwrap) is not installed; install the bubblewrap package' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(bin, false, false, &out)
	if err == nil || !strings.Contains(err.Error(), "install the bubblewrap package") {
		t.Fatalf("run with a server that fails at start: %v", err)
	}
}

func TestDemoNeedsTheBinary(t *testing.T) {
	var out bytes.Buffer
	if err := run(filepath.Join(t.TempDir(), "missing"), false, false, &out); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("run without a binary: %v", err)
	}
}
