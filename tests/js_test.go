package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// requireNode skips (fails in CI) when node or the TypeScript SDK is not installed.
func requireNode(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	requireEnv(t, err == nil, "node is not installed")
	_, err = os.Stat(filepath.Join("js", "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	requireEnv(t, err == nil, "the TypeScript MCP SDK is not installed (run npm ci in tests/js)")
	return node
}

// runFlow runs tests/js/flow.mjs with args and checks that it ran every step of the flow.
func (x *h) runFlow(node string, args ...string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("js", "flow.mjs")}, args...)...)
	cmd.Env = x.env()
	stdout, stderr := x.capture("node "+args[0]+" stdout"), x.capture("node "+args[0]+" stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if err != nil {
		x.t.Fatalf("flow.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", args[0], err, stdout, stderr)
	}
	last, perr := lastJSONLine(stdout.String())
	if perr != nil || last["step"] != "done" || last["ok"] != true || last["transport"] != args[0] {
		x.t.Fatalf("flow.mjs %s did not finish its steps:\n%s\nstderr:\n%s", args[0], stdout, stderr)
	}
	id := str(last, "sandbox_id")
	the.noteSandbox(id)
	if _, found := the.emu.Sandbox(id); found {
		x.t.Errorf("flow.mjs %s deleted %s, but the emulator still has it", args[0], id)
	}
	x.t.Logf("flow.mjs %s: %d progress notifications", args[0], int(num(last, "progress")))
}

// The official TypeScript SDK client runs the core flow over stdio, streamable HTTP and SSE.
func TestTypeScriptSDK(t *testing.T) {
	t.Parallel()
	node := requireNode(t)

	t.Run("stdio", func(t *testing.T) {
		x := newH(t)
		owner := x.owner("js")
		x.login(owner)
		x.runFlow(node, append([]string{"stdio", the.bin}, x.serveArgs(owner, "js", "--policy", x.allowAll())...)...)
	})

	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("js")
			x.login(owner)
			tokens := x.path("tokens.json")
			tok := x.addToken(owner, tokens)
			srv := x.startHTTP("serve", "--transport", transport, "--tokens-file", tokens,
				"--api-url", the.emu.URL(), "--sandbox-url", the.emu.URL(),
				"--state-dir", x.path("state"), "--policy", x.allowAll())
			x.runFlow(node, transport, srv.base, tok, "js-"+transport)
		})
	}
}
