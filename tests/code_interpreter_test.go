package tests

import (
	"fmt"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// `serve --backend local` offers E2B's code-interpreter template where the machine has Jupyter: state lives
// between e2b_run_code calls, in the sandbox's kernel.
func TestLocalBackendCodeInterpreter(t *testing.T) {
	t.Parallel()
	if err := emulator.CodeInterpreterAvailable(); err != nil {
		optional.Missing(t, err.Error())
	}
	x := newH(t)
	s := x.startStdio(clientOpts{}, "serve", "--backend", "local", "--owner", x.owner("local"), "--state-dir", x.path("state"))
	id := ok(t, s.Client, "e2b_create_sandbox", map[string]any{"template": "code-interpreter-v1"})["sandbox_id"].(string)
	ok(t, s.Client, "e2b_run_code", map[string]any{"sandbox_id": id, "code": "x = 21"})
	out := ok(t, s.Client, "e2b_run_code", map[string]any{"sandbox_id": id, "code": "x * 2"})
	if results, _ := out["results"].([]any); len(results) != 1 || fmt.Sprint(results[0].(map[string]any)["text"]) != "42" {
		t.Fatalf("x * 2 on the local backend: %v", out)
	}
}
