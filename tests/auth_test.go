package tests

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// keyringLookup reads an entry straight from the Secret Service with libsecret's own tool, to check that
// `auth login` really stored the key in the OS keyring (and `auth logout` really removed it). go-keyring keeps
// an entry under the attributes service and username.
func keyringLookup(t *testing.T, account string) (string, bool) {
	t.Helper()
	if _, err := exec.LookPath("secret-tool"); err != nil {
		requireEnv(t, false, "secret-tool (libsecret-tools) is not installed")
	}
	out, err := exec.Command("secret-tool", "lookup", "service", "e2b-mcp", "username", account).Output()
	if err != nil || len(out) == 0 {
		return "", false
	}
	return string(out), true
}

// `auth login` keeps the key in the real Secret Service; `serve` finds it on every call and sends exactly that
// key to E2B; `auth logout` removes it and the tools then say how to connect.
// Not parallel: it reads every request the shared emulator gets since a mark (keysSince).
func TestAuthKeyringLifecycle(t *testing.T) {
	x := newH(t)
	owner := x.owner("auth")
	requireKeyring(t)

	if before := x.run(nil, "auth", "status", "--owner", owner); before.err == nil || !strings.Contains(before.stdout, "not connected") {
		t.Fatalf("auth status before login (want exit status 1, not connected):\n%s", before)
	}

	// A key that is not of E2B's form is refused before anything is stored.
	if r := x.run(strings.NewReader("not-a-key\n"), "auth", "login", "--owner", owner, "--api-url", the.emu.URL()); r.err == nil {
		t.Fatalf("auth login accepted a malformed key:\n%s", r)
	}
	if _, found := keyringLookup(t, owner); found {
		t.Fatal("a malformed key was stored in the keyring")
	}
	// No key at all (stdin is empty, as in CI) is an error too, not a hang.
	if r := x.run(nil, "auth", "login", "--owner", owner, "--api-url", the.emu.URL()); r.err == nil {
		t.Fatalf("auth login with empty stdin succeeded:\n%s", r)
	}

	key := x.login(owner)
	if stored, found := keyringLookup(t, owner); !found || stored != key {
		t.Fatalf("the Secret Service holds no key or another key for %s after auth login", owner)
	}
	status := x.mustRun(nil, "auth", "status", "--owner", owner)
	if !strings.Contains(status.stdout, "connected (E2B API key ending in "+key[len(key)-4:]) {
		t.Errorf("auth status does not show the key's last four characters:\n%s", status)
	}

	// The server keeps a key it read in memory while the Secret Service says the entry has not changed, and an
	// entry's Modified counts whole seconds: starting in the second after the login, the calls below are served a
	// remembered key, which the login and logout that follow in other processes must still replace at once.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	mark := len(the.emu.Requests())
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "auth")...)
	id := create(t, s.Client, map[string]any{"title": "auth"})
	if sb, _ := the.emu.Sandbox(id); sb.Team != key {
		t.Errorf("the sandbox belongs to another E2B team than the logged-in key's")
	}
	if keys := keysSince(mark); len(keys) != 1 || keys[0] != key {
		t.Errorf("the emulator saw %d distinct X-API-Key values; want exactly the logged-in key", len(keys))
	}

	// The key is checked on every call: a new login takes effect without restarting the server.
	key2 := x.login(owner)
	mark = len(the.emu.Requests())
	id2 := create(t, s.Client, map[string]any{"title": "auth after re-login"})
	if sb, _ := the.emu.Sandbox(id2); sb.Team != key2 {
		t.Errorf("after a second auth login the server still used the first key")
	}
	if keys := keysSince(mark); len(keys) != 1 || keys[0] != key2 {
		t.Errorf("after re-login the emulator saw %d distinct keys; want exactly the new one", len(keys))
	}

	x.mustRun(nil, "auth", "logout", "--owner", owner)
	if r := x.run(nil, "auth", "status", "--owner", owner); r.err == nil || !strings.Contains(r.stdout, "not connected") {
		t.Errorf("auth status after logout:\n%s", r)
	}
	if _, found := keyringLookup(t, owner); found {
		t.Fatal("auth logout left the key in the keyring")
	}
	mark = len(the.emu.Requests())
	want := "No E2B API key is connected for " + owner
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"e2b_create_sandbox", map[string]any{}},
		{"e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}},
		{"e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"}},
	} {
		msg := fails(t, s.Client, tc.tool, tc.args)
		if !strings.Contains(msg, want) || !strings.Contains(msg, "e2b-mcp auth login") {
			t.Errorf("%s after logout: %q, want the ConnectionRequired text", tc.tool, msg)
		}
	}
	for _, r := range the.emu.Requests()[mark:] {
		if r.Header.Get("X-API-Key") != "" {
			t.Errorf("after logout a request still carried an API key: %s %s", r.Method, r.Path)
		}
	}
	if sb, _ := the.emu.Sandbox(id); sb.State != "running" {
		t.Errorf("a refused pause still paused the sandbox (%s)", sb.State)
	}
}

// The key comes from the keyring only: an E2B_API_KEY in the server's environment is not used.
func TestAPIKeyNotTakenFromEnvironment(t *testing.T) {
	t.Parallel() // the requests it looks for carry a key of its own
	x := newH(t)
	requireKeyring(t)
	owner := x.owner("noenv")
	envKey := newAPIKey()
	the.noteKey(envKey)
	mark := len(the.emu.Requests())
	s := x.startStdio(clientOpts{env: []string{"E2B_API_KEY=" + envKey}}, x.serveArgs(owner, "noenv")...)
	msg := fails(t, s.Client, "e2b_create_sandbox", map[string]any{})
	if !strings.Contains(msg, "No E2B API key is connected for "+owner) {
		t.Errorf("with E2B_API_KEY set and no login: %q, want the ConnectionRequired text", msg)
	}
	for _, r := range the.emu.Requests()[mark:] {
		if r.Header.Get("X-API-Key") == envKey {
			t.Fatal("the server sent the key from its environment to E2B")
		}
	}
}
