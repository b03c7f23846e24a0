package tests

import (
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var tokenPattern = regexp.MustCompile(`e2bmcp_[A-Za-z0-9_-]{20,}`)

// addToken makes a bearer token for owner with `e2b-mcp tokens add`, which prints it once and keeps only its
// hash in the tokens file.
func (x *h) addToken(owner, file string) string {
	x.t.Helper()
	r := x.mustRun(nil, "tokens", "add", "--owner", owner, "--tokens-file", file)
	tok := tokenPattern.FindString(r.stdout)
	if tok == "" {
		x.t.Fatalf("tokens add printed no token:\n%s", r)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		x.t.Fatal(err)
	}
	if strings.Contains(string(data), tok) {
		x.t.Fatal("the tokens file holds the token itself, not its hash")
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm()&0o077 != 0 {
		x.t.Fatalf("the tokens file is readable by others (%v, %v)", fi.Mode(), err)
	}
	return tok
}

// Two owners share one HTTP server, each with a token and an E2B key of their own: neither can see or touch
// the other's sandboxes whatever IDs it sends, and each one's calls reach E2B with its own key.
func TestHTTPOwnersAreIsolated(t *testing.T) {
	t.Parallel()
	x := newH(t)
	alice, bob := x.owner("alice"), x.owner("bob")
	aliceKey, bobKey := x.login(alice), x.login(bob)
	tokens := x.path("tokens.json")
	aliceTok := x.addToken(alice, tokens)
	bobTok := x.addToken(bob, tokens)

	listed := x.mustRun(nil, "tokens", "list", "--tokens-file", tokens)
	if !strings.Contains(listed.stdout, alice) || !strings.Contains(listed.stdout, bob) {
		t.Errorf("tokens list does not name both owners:\n%s", listed)
	}

	srv := x.startHTTP("serve", "--transport", "http", "--tokens-file", tokens,
		"--api-url", the.emu.URL(), "--sandbox-url", the.emu.URL(),
		"--state-dir", x.path("state"), "--policy", x.allowAll())

	// Without a valid token nothing but the health check answers.
	for _, auth := range []string{"", "Bearer not-a-token", "Bearer " + aliceTok + "x"} {
		req, _ := http.NewRequest(http.MethodPost, srv.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("POST /mcp with Authorization %q: status %d, want 401", strings.Fields(auth + " ")[0], resp.StatusCode)
		}
	}

	a := x.connectHTTP(srv.base, aliceTok, "")
	b := x.connectHTTP(srv.base, bobTok, "")
	aID := create(t, a, map[string]any{"title": "alice's"})
	bID := create(t, b, map[string]any{"title": "bob's"})
	ok(t, a, "e2b_write_file", map[string]any{"sandbox_id": aID, "path": "/home/user/secret.txt", "content": "alice only\n"})

	if sb, _ := the.emu.Sandbox(aID); sb.Team != aliceKey || sb.Metadata["e2b-mcp.owner"] != alice {
		t.Errorf("alice's sandbox was made with another key or owner tag (%v)", sb.Metadata)
	}
	if sb, _ := the.emu.Sandbox(bID); sb.Team != bobKey || sb.Metadata["e2b-mcp.owner"] != bob {
		t.Errorf("bob's sandbox was made with another key or owner tag (%v)", sb.Metadata)
	}

	if ids := sandboxIDs(t, a); !slices.Equal(ids, []string{aID}) {
		t.Errorf("alice lists %v, want only %s", ids, aID)
	}
	if ids := sandboxIDs(t, b); !slices.Equal(ids, []string{bID}) {
		t.Errorf("bob lists %v, want only %s", ids, bID)
	}

	// Every tool that names a sandbox refuses alice's sandbox to bob, with the not-found text.
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"e2b_exec", map[string]any{"sandbox_id": aID, "command": "cat /home/user/secret.txt"}},
		{"e2b_read_file", map[string]any{"sandbox_id": aID, "path": "/home/user/secret.txt"}},
		{"e2b_write_file", map[string]any{"sandbox_id": aID, "path": "/home/user/secret.txt", "content": "bob was here"}},
		{"e2b_manage_sandbox", map[string]any{"sandbox_id": aID, "action": "pause"}},
		{"e2b_manage_sandbox", map[string]any{"sandbox_id": aID, "action": "delete"}},
		{"e2b_checkpoint_sandbox", map[string]any{"sandbox_id": aID}},
		{"e2b_fork_sandbox", map[string]any{"sandbox_id": aID}},
	} {
		msg := fails(t, b, tc.tool, tc.args)
		if !strings.Contains(msg, "Sandbox '"+aID+"' not found") {
			t.Errorf("bob's %s on alice's sandbox: %q, want the not-found text", tc.tool, msg)
		}
		if strings.Contains(msg, "alice only") {
			t.Errorf("bob's %s revealed alice's file", tc.tool)
		}
	}
	sb, found := the.emu.Sandbox(aID)
	if !found || sb.State != "running" {
		t.Fatalf("alice's sandbox was touched by bob's calls (found %v, state %q)", found, sb.State)
	}
	if got := str(ok(t, a, "e2b_read_file", map[string]any{"sandbox_id": aID, "path": "/home/user/secret.txt"}), "content"); got != "alice only\n" {
		t.Errorf("alice's file now holds %q", got)
	}

	// Revoking bob's token locks him out without a restart.
	x.mustRun(nil, "tokens", "revoke", bob, "--tokens-file", tokens)
	resp := postMCP(t, srv.base, bobTok)
	if resp != http.StatusUnauthorized {
		t.Errorf("after revoke bob's token gets %d, want 401", resp)
	}
	if resp := postMCP(t, srv.base, aliceTok); resp == http.StatusUnauthorized {
		t.Errorf("revoking bob's token also locked alice out")
	}
}

// postMCP sends a tools/list to /mcp with a token and returns the status.
func postMCP(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
