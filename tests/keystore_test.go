package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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
	t.Parallel()
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
	if !s.stderr.shows("kept in the encrypted key store "+state, 30*time.Second) {
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

// An operator whose master key may have leaked seals the key store again under a new one with `keys
// rotate-master`, on a headless host: every key, credential and the state's data key come through (a sandbox
// made before is still driven after a restart with the new key), the old key opens nothing any more (a server
// still running with it, a new serve, auth status: each names the file), and every wrong rotation is refused
// without changing the store.
func TestHeadlessMasterKeyRotation(t *testing.T) {
	t.Parallel()
	x := newH(t)
	x.headless = true
	owner := x.owner("rotate")
	state := x.path("state")
	oldKey, oldHex := x.masterKeyFile("old.key")
	newKey, newHex := x.masterKeyFile("new.key")
	x.noMasterKeyLeak(oldHex)
	x.noMasterKeyLeak(newHex)
	inStore := func(mk string) []string { return []string{"--master-key-file", mk, "--state-dir", state} }

	key := newAPIKey()
	the.noteKey(key)
	x.mustRun(strings.NewReader(key+"\n"), append([]string{"auth", "login", "--owner", owner, "--api-url", the.emu.URL()}, inStore(oldKey)...)...)
	x.mustRun(strings.NewReader("ghp_rotationtestcredential\n"), append([]string{"credentials", "add", "gh", "--domain", "github.com",
		"--github", "--owner", owner}, inStore(oldKey)...)...)
	before := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotate", "--master-key-file", oldKey)...)
	id := create(t, before.Client, map[string]any{"title": "made under the old key"}) // the data key is made and stored now

	rotate := func(args ...string) result { return x.run(nil, append([]string{"keys", "rotate-master"}, args...)...) }
	r := rotate("--master-key-file", oldKey, "--new-master-key-file", newKey, "--state-dir", state)
	if r.err != nil || !strings.Contains(r.stdout, "Sealed the 4 entries of the key store "+state+"/keys.json again under the master key in "+newKey) {
		t.Fatalf("keys rotate-master (want the API key, the credential's list and value, and the data key):\n%s", r)
	}

	// The server still running with the old key cannot read the store any more, and says why.
	msg := fails(t, before.Client, "e2b_create_sandbox", map[string]any{"title": "after rotation"})
	if !strings.Contains(msg, "the master key in "+oldKey+" does not open the key store") {
		t.Errorf("a call to the server still using the old key: %q", msg)
	}
	before.Close()
	for _, args := range [][]string{
		x.serveArgs(owner, "rotate", "--master-key-file", oldKey),
		append([]string{"auth", "status", "--owner", owner}, inStore(oldKey)...),
	} {
		if r := x.run(nil, args...); r.err == nil || !strings.Contains(r.stderr, "the master key in "+oldKey+" does not open the key store") {
			t.Errorf("e2b-mcp %s with the old master key:\n%s", args[0], r)
		}
	}

	status := x.mustRun(nil, append([]string{"auth", "status", "--owner", owner}, inStore(newKey)...)...)
	if !strings.Contains(status.stdout, "E2B API key ending in "+key[len(key)-4:]) {
		t.Errorf("auth status with the new master key:\n%s", status)
	}
	if list := x.mustRun(nil, append([]string{"credentials", "list", "--owner", owner}, inStore(newKey)...)...); !strings.Contains(list.stdout, "github.com") {
		t.Errorf("credentials list with the new master key:\n%s", list)
	}
	after := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotate", "--master-key-file", newKey)...)
	// The sandbox's envd token, sealed under the data key before the rotation, still opens.
	ok(t, after.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	after.Close()

	// Refusals leave the store as it is.
	storeFile := x.path("state", "keys.json")
	rotated, err := os.ReadFile(storeFile)
	if err != nil {
		t.Fatal(err)
	}
	open, _ := x.masterKeyFile("open.key")
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	third, _ := x.masterKeyFile("third.key")
	inState := x.path("state", "in-state.key")
	if err := os.WriteFile(inState, []byte(randomHex(32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--master-key-file", oldKey, "--new-master-key-file", newKey}, "is sealed under the master key in " + newKey + " already"},
		{[]string{"--master-key-file", newKey, "--new-master-key-file", newKey}, newKey + " holds the same key as " + newKey},
		{[]string{"--master-key-file", newKey, "--new-master-key-file", open}, open + " has mode 0644"},
		{[]string{"--master-key-file", newKey, "--new-master-key-file", x.path("secrets", "none.key")}, "master key file " + x.path("secrets", "none.key") + " does not exist"},
		{[]string{"--master-key-file", third, "--new-master-key-file", oldKey}, "the master key in " + third + " does not open the key store"},
		{[]string{"--master-key-file", newKey, "--new-master-key-file", inState}, inState + " is kept beside the key store"},
	} {
		r := rotate(append(tc.args, "--state-dir", state)...)
		if r.err == nil || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("keys rotate-master %s:\n%s\nwant an error saying %q", strings.Join(tc.args, " "), r, tc.want)
		}
		if now, _ := os.ReadFile(storeFile); !bytes.Equal(now, rotated) {
			t.Fatalf("keys rotate-master %s changed the store", strings.Join(tc.args, " "))
		}
	}
}

// An operator whose state store and data key may have leaked seals the envd tokens again under a new data key
// with `keys rotate-data`: refused while a server has the state directory open, then a sandbox made before is
// still driven after a restart, and a copy of the key store made before the rotation (with the master key that
// opened it) no longer opens the tokens.
func TestHeadlessDataKeyRotation(t *testing.T) {
	t.Parallel()
	x := newH(t)
	x.headless = true
	owner := x.owner("rotdata")
	state := x.path("state")
	masterKey, masterHex := x.masterKeyFile("master.key")
	x.noMasterKeyLeak(masterHex)
	inStore := []string{"--master-key-file", masterKey, "--state-dir", state}

	key := newAPIKey()
	the.noteKey(key)
	x.mustRun(strings.NewReader(key+"\n"), append([]string{"auth", "login", "--owner", owner, "--api-url", the.emu.URL()}, inStore...)...)
	before := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotdata", "--master-key-file", masterKey)...)
	id := create(t, before.Client, map[string]any{"title": "made under the old data key"})

	rotate := append([]string{"keys", "rotate-data"}, inStore...)
	if r := x.run(nil, rotate...); r.err == nil || !strings.Contains(r.stderr, "stop every server using the state directory "+state) {
		t.Fatalf("keys rotate-data beside a running server:\n%s", r)
	}
	ok(t, before.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}) // the refusal changed nothing
	before.Close()

	backup := x.path("backup", "keys.json")
	if err := os.MkdirAll(filepath.Dir(backup), 0o700); err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join(state, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(backup, stored, 0o600); err != nil {
		t.Fatal(err)
	}
	r := x.mustRun(nil, rotate...)
	if !strings.Contains(r.stdout, "Sealed the 1 envd access tokens of the state store "+filepath.Join(state, "state.db")) {
		t.Fatalf("keys rotate-data:\n%s", r)
	}

	after := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotdata", "--master-key-file", masterKey)...)
	ok(t, after.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	after.Close()

	// The old data key, from the key store's backup, opens no token of the rotated state store.
	old := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotdata", "--master-key-file", masterKey, "--key-store", backup)...)
	if msg := fails(t, old.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}); !strings.Contains(msg, "data key") {
		t.Errorf("exec with the data key of the backup: %q", msg)
	}
	old.Close()
}

// With replicas on PostgreSQL the rotation runs beside a running replica: that replica then refuses calls on
// sandboxes, saying to restart it, and a restarted one drives the sandbox made before. A dump of the database
// holds no token (the harness scans it).
func TestHeadlessDataKeyRotationInTheDatabase(t *testing.T) {
	t.Parallel()
	x := newH(t)
	x.headless = true
	pg, db := startPostgres(t)
	owner := x.owner("rotdb")
	masterKey, masterHex := x.masterKeyFile("master.key")
	x.noMasterKeyLeak(masterHex)
	inDB := []string{"--master-key-file", masterKey, "--store", db}

	key := newAPIKey()
	the.noteKey(key)
	x.mustRun(strings.NewReader(key+"\n"), append([]string{"auth", "login", "--owner", owner, "--api-url", the.emu.URL()}, inDB...)...)
	running := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotdb", inDB...)...)
	id := create(t, running.Client, map[string]any{"title": "made under the old data key"})
	// The replica holds the old data key from its first use of a token on (one that has not used one yet reads
	// the new key from the key store when it first needs it).
	ok(t, running.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})

	r := x.mustRun(nil, append([]string{"keys", "rotate-data"}, inDB...)...)
	if !strings.Contains(r.stdout, "Sealed the 1 envd access tokens of the state store in postgres://") {
		t.Fatalf("keys rotate-data --store:\n%s", r)
	}
	if msg := fails(t, running.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}); !strings.Contains(msg, "restart") {
		t.Errorf("exec on the replica still holding the old data key: %q", msg)
	}
	running.Close()
	restarted := x.startStdio(clientOpts{}, x.serveArgs(owner, "rotdb", inDB...)...)
	ok(t, restarted.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	restarted.Close()

	dump, err := pg.Dump(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(x.path("pgdump.sql"), dump, 0o600); err != nil { // the harness scans it for the tokens
		t.Fatal(err)
	}
}
