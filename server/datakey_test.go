package server

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// The state store's envd tokens are sealed under the data key the OS keyring holds (its mock here): a key made
// at random for each installation, without which the store's secrets do not open. Nothing else will do: a
// store opened with an all-zero key cannot read them.
func TestStoreKeyIsTheKeyringsDataKey(t *testing.T) {
	keyring.MockInit()
	keys := map[string][]byte{}
	for _, service := range []string{"e2b-mcp-install-a", "e2b-mcp-install-b"} {
		kr := credentials.Keyring{Service: service}
		if err := credentials.SetAPIKey(kr, "alice", testKey("alice")); err != nil {
			t.Fatal(err)
		}
		var dir string
		f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
			c.Secrets, dir = kr, c.StateDir
		}})
		id := createSandbox(t, connect(t, f.srv, mcp.ProtocolVersion20260728, nil))
		sb, _ := f.emu.Sandbox(id)

		encoded, err := keyring.Get(service, credentials.DataKeyAccount)
		if err != nil {
			t.Fatalf("%s: no data key in the keyring after a sandbox was recorded: %v", service, err)
		}
		key, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil || len(key) != state.DataKeySize || bytes.Equal(key, make([]byte, state.DataKeySize)) {
			t.Fatalf("%s: the keyring's data key is not %d random bytes: %v", service, state.DataKeySize, err)
		}
		keys[service] = key

		for name, k := range map[string][]byte{"the keyring's key": key, "an all-zero key": make([]byte, state.DataKeySize)} {
			st, err := state.Open(dir, state.Options{Keys: state.StaticKeySource(k)})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := st.Sandbox("alice", id)
			st.Close()
			if opens := err == nil && rec.AccessToken == sb.AccessToken; opens != (name == "the keyring's key") {
				t.Errorf("%s: the store read with %s: token read %v (err %v)", service, name, opens, err)
			}
		}

		// Without the keyring entry the store's secrets stay shut: a server on the same state directory refuses
		// calls that need them, with the reason, and seals nothing new over them.
		f.srv.Close()
		if err := keyring.Delete(service, credentials.DataKeyAccount); err != nil {
			t.Fatal(err)
		}
		g, err := New(Config{Owner: "alice", Session: "s1", StateDir: dir, Secrets: kr, Backend: emulatorAt(f.emu.URL()), Logger: testLogger(t)})
		if err == nil {
			msg := mustFail(t, connect(t, g, mcp.ProtocolVersion20260728, nil), "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
			if !strings.Contains(msg, "data key") {
				t.Errorf("%s: without the keyring entry a call on a recorded sandbox answered %q, want the data key named", service, msg)
			}
			g.Close()
		}
		st, err := state.Open(dir, state.Options{Keys: state.StaticKeySource(key)})
		if err != nil {
			t.Fatal(err)
		}
		if rec, err := st.Sandbox("alice", id); err != nil || rec.AccessToken != sb.AccessToken {
			t.Errorf("%s: after a server ran without the keyring entry the token no longer opens with the original key: %v", service, err)
		}
		st.Close()
	}
	if bytes.Equal(keys["e2b-mcp-install-a"], keys["e2b-mcp-install-b"]) {
		t.Error("two installations got the same data key")
	}
}
