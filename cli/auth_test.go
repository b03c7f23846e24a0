package cli

import (
	"net"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

const (
	goodKey = "e2b_0123456789abcdef0123456789abcdef0123cafe"
	badKey  = "e2b_fedcba9876543210fedcba9876543210fedcdead"
)

// stored is the key the (mock) keyring holds for owner, "" for none.
func stored(t *testing.T, owner string) string {
	t.Helper()
	k, err := credentials.APIKey(credentials.Keyring{}, owner)
	if err != nil {
		return ""
	}
	return k
}

// noKeyIn fails the test if a full key appears in the command's output.
func noKeyIn(t *testing.T, r result, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if strings.Contains(r.stdout+r.stderr, k) {
			t.Errorf("the output repeats a key:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
		}
	}
}

func TestAuthLoginChecksTheKeyWithE2B(t *testing.T) {
	keyring.MockInit()
	emu, err := e2btest.New(e2btest.Options{APIKeys: []string{goodKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	e := newEnv(t)
	api := emu.URL()

	// E2B refuses the key: nothing is stored.
	r := e.run(t, badKey+"\n", "auth", "login", "--owner", "alice", "--api-url", api)
	if r.code != exitFailure || !strings.Contains(r.stderr, "refused the key") || !strings.Contains(r.stderr, "nothing was stored") {
		t.Errorf("rejected key: exit %d\n%s", r.code, r.stderr)
	}
	noKeyIn(t, r, badKey)
	if stored(t, "alice") != "" {
		t.Fatal("a key E2B refused was stored")
	}

	// Not of E2B's form: refused before any request.
	mark := len(emu.Requests())
	for _, in := range []string{"not-a-key\n", "E2B_ABCDEF\n", "\n", ""} {
		r = e.run(t, in, "auth", "login", "--owner", "alice", "--api-url", api)
		if r.code != exitFailure || stored(t, "alice") != "" {
			t.Errorf("stdin %q: exit %d, stored %v\n%s", in, r.code, stored(t, "alice") != "", r.stderr)
		}
		if strings.TrimSpace(in) != "" && strings.Contains(r.stderr, strings.TrimSpace(in)) {
			t.Errorf("the error repeats the input: %s", r.stderr)
		}
	}
	if n := len(emu.Requests()) - mark; n != 0 {
		t.Errorf("malformed keys were sent to E2B (%d requests)", n)
	}

	// Accepted: stored under service e2b-mcp, account alice; only the last four characters are shown.
	mark = len(emu.Requests())
	r = e.run(t, goodKey+"\n", "auth", "login", "--owner", "alice", "--api-url", api)
	if r.code != exitOK || !strings.Contains(r.stdout, "ending in cafe") {
		t.Fatalf("good key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noKeyIn(t, r, goodKey)
	if v, err := keyring.Get("e2b-mcp", "alice"); err != nil || v != goodKey {
		t.Fatalf("keyring entry e2b-mcp/alice: %v", err)
	}
	reqs := emu.Requests()[mark:]
	if len(reqs) != 1 || reqs[0].Header.Get("X-API-Key") != goodKey || reqs[0].Method != "GET" {
		t.Errorf("verification: want one authenticated GET, got %d requests", len(reqs))
	}

	// The owner defaults to the OS user.
	r = e.run(t, goodKey+"\n", "auth", "login", "--api-url", api)
	if r.code != exitOK || stored(t, "tester") != goodKey {
		t.Errorf("login for the OS user: exit %d %s", r.code, r.stderr)
	}
}

func TestAuthLoginUnreachable(t *testing.T) {
	keyring.MockInit()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	e := newEnv(t)

	r := e.run(t, goodKey+"\n", "auth", "login", "--owner", "carol", "--api-url", dead)
	if r.code != exitFailure || !strings.Contains(r.stderr, "--no-verify") || stored(t, "carol") != "" {
		t.Errorf("unreachable E2B: exit %d, stored %v\n%s", r.code, stored(t, "carol") != "", r.stderr)
	}
	r = e.run(t, goodKey+"\n", "auth", "login", "--owner", "carol", "--api-url", dead, "--no-verify")
	if r.code != exitOK || stored(t, "carol") != goodKey || !strings.Contains(r.stderr, "unchecked") {
		t.Errorf("--no-verify: exit %d\n%s", r.code, r.stderr)
	}
	noKeyIn(t, r, goodKey)
}

func TestAuthStatusAndLogout(t *testing.T) {
	keyring.MockInit()
	e := newEnv(t)
	r := e.run(t, "", "auth", "status", "--owner", "dave")
	if r.code != exitFailure || !strings.Contains(r.stdout, "dave: not connected") {
		t.Errorf("status without a key: exit %d %q", r.code, r.stdout)
	}
	if err := credentials.SetAPIKey(credentials.Keyring{}, "dave", goodKey); err != nil {
		t.Fatal(err)
	}
	r = e.run(t, "", "auth", "status", "--owner", "dave")
	if r.code != exitOK || !strings.Contains(r.stdout, "dave: connected (E2B API key ending in cafe") {
		t.Errorf("status with a key: exit %d %q", r.code, r.stdout)
	}
	noKeyIn(t, r, goodKey, goodKey[:len(goodKey)-4], goodKey[4:20])

	r = e.run(t, "", "auth", "logout", "--owner", "dave")
	if r.code != exitOK || stored(t, "dave") != "" {
		t.Errorf("logout: exit %d %q", r.code, r.stdout)
	}
	if r = e.run(t, "", "auth", "logout", "--owner", "dave"); r.code != exitOK || !strings.Contains(r.stdout, "No E2B API key was stored") {
		t.Errorf("second logout: exit %d %q", r.code, r.stdout)
	}
	if r = e.run(t, "", "auth", "status", "--owner", "dave"); r.code != exitFailure {
		t.Errorf("status after logout: exit %d", r.code)
	}
}

func TestVersionFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "devel-0123456789ab-dirty"},
	} {
		if got := versionFrom(&tc.info); got != tc.want {
			t.Errorf("versionFrom(%+v) = %q, want %q", tc.info.Main, got, tc.want)
		}
	}
}
