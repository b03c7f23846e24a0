package tests

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// masterKeyFile writes a fresh master key (64 hex digits, mode 0600) outside the state directory, as an
// operator would (a systemd credential, a mounted secret), and returns its path and content.
func (x *h) masterKeyFile(name string) (string, string) {
	x.t.Helper()
	dir := x.path("secrets")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		x.t.Fatal(err)
	}
	key := randomHex(32)
	path := x.path("secrets", name)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		x.t.Fatal(err)
	}
	return path, key
}

// On a host without a desktop keyring (no D-Bus session at all), keys live in the encrypted key store: `auth
// login`, `auth status` and `serve` work with it, `serve` says so, a wrong or missing master key is an error
// naming its file, and neither an E2B key nor the master key is ever written in the clear.
func TestHeadlessEncryptedKeyStore(t *testing.T) {
	x := newH(t)
	x.headless = true
	owner := x.owner("headless")
	state := x.path("state")
	mk, masterHex := x.masterKeyFile("master.key")
	store := []string{"--master-key-file", mk, "--state-dir", state}

	// Without the key store, the keyring is unreachable here, and the error says what to do instead.
	key := newAPIKey()
	the.noteKey(key)
	r := x.run(strings.NewReader(key+"\n"), "auth", "login", "--owner", owner, "--api-url", the.emu.URL())
	if r.err == nil || !strings.Contains(r.stderr, "--master-key-file") {
		t.Fatalf("auth login without a D-Bus session and without --master-key-file:\n%s", r)
	}

	if r := x.run(nil, append([]string{"auth", "status", "--owner", owner}, store...)...); r.err == nil || !strings.Contains(r.stdout, "not connected") {
		t.Fatalf("auth status before login (want exit status 1, not connected):\n%s", r)
	}
	login := x.mustRun(strings.NewReader(key+"\n"), append([]string{"auth", "login", "--owner", owner, "--api-url", the.emu.URL()}, store...)...)
	if !strings.Contains(login.stdout, "the encrypted key store "+state) {
		t.Errorf("auth login does not say where the key went:\n%s", login)
	}
	status := x.mustRun(nil, append([]string{"auth", "status", "--owner", owner}, store...)...)
	if !strings.Contains(status.stdout, "connected (E2B API key ending in "+key[len(key)-4:]+", in the encrypted key store") {
		t.Errorf("auth status:\n%s", status)
	}

	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "headless", "--master-key-file", mk)...)
	id := create(t, s.Client, map[string]any{"title": "headless"})
	if sb, _ := the.emu.Sandbox(id); sb.Team != key {
		t.Error("the sandbox was not made with the key from the encrypted key store")
	}
	ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	if !strings.Contains(s.stderr.String(), "kept in the encrypted key store "+state) {
		t.Errorf("serve does not say which key store it uses:\n%s", s.stderr)
	}
	s.Close()

	// A wrong master key, or none where one is named: clear errors naming the file, for serve and auth alike.
	wrong, _ := x.masterKeyFile("wrong.key")
	for _, args := range [][]string{
		x.serveArgs(owner, "headless", "--master-key-file", wrong),
		{"auth", "status", "--owner", owner, "--master-key-file", wrong, "--state-dir", state},
	} {
		r := x.run(nil, args...)
		if r.err == nil || !strings.Contains(r.stderr, "the master key in "+wrong+" does not open the key store") {
			t.Errorf("e2b-mcp %s with a wrong master key:\n%s", args[0], r)
		}
	}
	missing := x.path("secrets", "missing.key")
	r = x.run(nil, "auth", "status", "--owner", owner, "--master-key-file", missing, "--state-dir", state)
	if r.err == nil || !strings.Contains(r.stderr, "master key file "+missing+" does not exist") {
		t.Errorf("auth status with a missing master key file:\n%s", r)
	}
	if err := os.Chmod(mk, 0o644); err != nil {
		t.Fatal(err)
	}
	r = x.run(nil, "auth", "status", "--owner", owner, "--master-key-file", mk, "--state-dir", state)
	if r.err == nil || !strings.Contains(r.stderr, mk+" has mode 0644") {
		t.Errorf("auth status with a master key others can read:\n%s", r)
	}

	x.noMasterKeyLeak(masterHex)
}

// noMasterKeyLeak checks, when the test ends, that the master key is in no output of the test and in no file of
// its state directory (the E2B keys are scanned for everywhere by the harness).
func (x *h) noMasterKeyLeak(masterHex string) {
	x.t.Cleanup(func() {
		x.mu.Lock()
		caps := slices.Clone(x.captures)
		x.mu.Unlock()
		for _, leak := range findLeaks(map[string]string{masterHex: "the master key"}, caps, x.path("state")) {
			x.t.Errorf("secret leaked: %s", leak)
		}
	})
}
