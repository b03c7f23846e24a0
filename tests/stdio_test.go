package tests

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// allToolNames is the tool list every transport must offer: the catalogue's, in tools/list's order (by name).
var allToolNames = func() []string {
	names := tools.Names()
	slices.Sort(names)
	return names
}()

// allowAll writes a policy that allows every call (the built-in policy asks a human before deletes).
func (x *h) allowAll() string {
	x.t.Helper()
	path := x.path("allow-all.yaml")
	const doc = "default_action: allow\nrules:\n  - id: everything\n    when: { target: \"e2b_*\" }\n    then: { decision: allow }\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		x.t.Fatal(err)
	}
	return path
}

// The core flow over stdio in both protocol eras: every tool of the capability spec, with the results checked
// against the emulator's own view of the sandbox, and every control-plane request carrying the logged-in key.
// Not parallel: it reads every request the shared emulator gets since a mark (keysSince).
func TestStdioFlow(t *testing.T) {
	for _, version := range []string{mcp.ProtocolVersion20260728, mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("flow")
			key := x.login(owner)
			mark := len(the.emu.Requests())
			s := x.startStdio(clientOpts{version: version}, x.serveArgs(owner, "flow", "--policy", x.allowAll())...)
			c := s.Client

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, allToolNames) {
				t.Fatalf("tools/list = %v, want %v", names, allToolNames)
			}

			// A file from the storage root is uploaded at create; env_vars reach every command.
			if err := os.WriteFile(x.path("storage", "input.csv"), []byte("a,b\n1,2\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			id := create(t, c, map[string]any{"title": "stdio flow", "env_vars": map[string]any{"GREETING": "hej"},
				"upload_files": []any{map[string]any{"session_path": "input.csv", "sandbox_path": "/home/user/data/input.csv"}}})
			sb, found := the.emu.Sandbox(id)
			if !found {
				t.Fatalf("sandbox %s is not in the emulator", id)
			}
			for k, want := range map[string]string{"e2b-mcp": "true", "e2b-mcp.owner": owner, "e2b-mcp.title": "stdio flow", "e2b-mcp.session_id": "flow"} {
				if got := sb.Metadata[k]; got != want {
					t.Errorf("sandbox metadata %s = %q, want %q (all: %v)", k, got, want, sb.Metadata)
				}
			}
			if sb.TemplateID != "base" {
				t.Errorf("template %q, want base", sb.TemplateID)
			}

			if out := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo $GREETING; cat data/input.csv"}); str(out, "stdout") != "hej\na,b\n1,2\n" {
				t.Errorf("env_vars and upload_files: %v", out)
			}
			// Uploads come only from the storage root.
			if msg := fails(t, c, "e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": "../allow-all.yaml", "sandbox_path": "/home/user/p.yaml"}}}); !strings.Contains(msg, "storage root") {
				t.Errorf("an upload from outside the storage root: %q", msg)
			}

			const content = "hello\nworld\nthird line\n"
			if out := ok(t, c, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "/home/user/notes/hello.txt", "content": content}); out["success"] != true {
				t.Fatalf("write_file: %v", out)
			}
			// The file is really in the sandbox's filesystem, not only in the server's memory.
			onDisk, err := os.ReadFile(sb.Dir + "/home/notes/hello.txt")
			if err != nil || string(onDisk) != content {
				t.Fatalf("the sandbox's file holds %q (%v), want %q", onDisk, err, content)
			}
			if got := str(ok(t, c, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/home/user/notes/hello.txt"}), "content"); got != content {
				t.Fatalf("read_file = %q, want %q", got, content)
			}
			// Lines are counted from 1.
			if part := str(ok(t, c, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/home/user/notes/hello.txt", "offset": 2, "limit": 1}), "content"); part != "world\n" {
				t.Errorf("read_file offset 2 limit 1 = %q, want the second line", part)
			}

			out := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "wc -l < hello.txt; echo oops >&2; exit 3", "cwd": "/home/user/notes"})
			if strings.TrimSpace(str(out, "stdout")) != "3" || !strings.Contains(str(out, "stderr"), "oops") || num(out, "exit_code") != 3 || out["success"] != false {
				t.Fatalf("exec: %v", out)
			}
			if str(out, "cwd") != "/home/user/notes" {
				t.Errorf("exec cwd = %q", str(out, "cwd"))
			}

			if ids := sandboxIDs(t, c); !slices.Contains(ids, id) {
				t.Fatalf("list_sandboxes = %v, lacks %s", ids, id)
			}

			if out := ok(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"}); out["success"] != true {
				t.Fatalf("pause: %v", out)
			}
			if sb, _ := the.emu.Sandbox(id); sb.State != "paused" {
				t.Fatalf("after pause the emulator says %q", sb.State)
			}
			if out := ok(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume", "timeout_seconds": 600}); out["success"] != true {
				t.Fatalf("resume: %v", out)
			}
			if sb, _ := the.emu.Sandbox(id); sb.State != "running" {
				t.Fatalf("after resume the emulator says %q", sb.State)
			}
			if got := str(ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cat /home/user/notes/hello.txt"}), "stdout"); got != content {
				t.Fatalf("after resume the file holds %q", got)
			}

			// Errors are results the model can read.
			if msg := fails(t, c, "e2b_exec", map[string]any{"sandbox_id": id}); !strings.Contains(msg, "Missing required parameter: command") {
				t.Errorf("missing command: %q", msg)
			}
			if msg := fails(t, c, "e2b_exec", map[string]any{"sandbox_id": "nosuchsandbox", "command": "true"}); !strings.Contains(msg, "Sandbox 'nosuchsandbox' not found") || !strings.Contains(msg, id) {
				t.Errorf("unknown sandbox: %q (want the not-found text naming this session's %s)", msg, id)
			}

			if out := ok(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"}); out["success"] != true {
				t.Fatalf("delete: %v", out)
			}
			if _, still := the.emu.Sandbox(id); still {
				t.Fatalf("sandbox %s still exists after delete", id)
			}
			if ids := sandboxIDs(t, c); slices.Contains(ids, id) {
				t.Fatalf("list_sandboxes still shows %s after delete", id)
			}

			if keys := keysSince(mark); len(keys) != 1 || keys[0] != key {
				t.Errorf("the emulator saw %d distinct X-API-Key values; want exactly the key given to auth login", len(keys))
			}
		})
	}
}

// A long command reports progress as its output arrives, and cancelling the call kills the process in the
// sandbox rather than leaving it running.
func TestStdioProgressAndCancel(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("cancel")
	x.login(owner)
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "cancel")...)
	c := s.Client
	id := create(t, c, map[string]any{"title": "cancel"})

	var mu sync.Mutex
	progress := map[any]int{}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		mu.Lock()
		progress[n.Params.AdditionalFields["progressToken"]]++
		mu.Unlock()
	})
	progressFor := func(token string) int {
		mu.Lock()
		defer mu.Unlock()
		return progress[token]
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := callCtx(ctx, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "for i in 1 2 3 4 5; do echo tick $i; sleep 0.1; done"},
		&mcp.Meta{ProgressToken: "ticks"})
	if err != nil || res.IsError {
		t.Fatalf("exec: %v %v", err, res)
	}
	if got := str(fields(t, res), "stdout"); !strings.Contains(got, "tick 5") {
		t.Fatalf("stdout %q", got)
	}
	if progressFor("ticks") == 0 {
		t.Errorf("no progress notification for a command that printed five lines over half a second")
	}

	// The process is watched through envd directly, with the sandbox's own token, as E2B's SDK would.
	sb, _ := the.emu.Sandbox(id)
	ec, err := e2b.NewClient(e2b.Config{APIURL: the.emu.URL(), SandboxURL: the.emu.URL()})
	if err != nil {
		t.Fatal(err)
	}
	envd := ec.Envd(e2b.SandboxConn{ID: id, EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken})
	sleeping := func() bool {
		procs, err := envd.ListProcesses(t.Context())
		if err != nil {
			t.Fatalf("listing the sandbox's processes: %v", err)
		}
		for _, p := range procs {
			if strings.Contains(strings.Join(append([]string{p.Config.Cmd}, p.Config.Args...), " "), "sleep 4242") {
				return true
			}
		}
		return false
	}

	longCtx, cancelCall := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := callCtx(longCtx, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo started; sleep 4242"}, &mcp.Meta{ProgressToken: "long"})
		done <- err
	}()
	waitfor.Until(t, 30*time.Second, "the long command runs in the sandbox", sleeping)
	cancelCall()
	if err := waitfor.Recv(t, done, 30*time.Second, "the cancelled call to return"); !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled call returned %v, want context.Canceled", err)
	}
	waitfor.Until(t, 30*time.Second, "the cancelled command is gone from the sandbox", func() bool { return !sleeping() })

	// The server goes on serving after a cancellation.
	if got := str(ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo still here"}), "stdout"); got != "still here\n" {
		t.Fatalf("exec after cancel: %q", got)
	}
}
