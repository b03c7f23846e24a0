package cli

import (
	"strings"
	"testing"
)

// The flags of the key store and of OAuth are checked before anything starts: each mistake is a usage error
// that says what is missing.
func TestKeyStoreAndOAuthFlagMistakes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "status", "--key-store", "/tmp/keys.json"}, "--key-store needs --master-key-file"},
		{[]string{"serve", "--key-store", "/tmp/keys.json"}, "--key-store needs --master-key-file"},
		{[]string{"auth", "status", "--store", "postgres://db.internal/e2b_mcp"}, "--store needs --master-key-file"},
		{[]string{"auth", "login", "--store", "/var/lib/e2b-mcp", "--master-key-file", "/etc/e2b-mcp/master.key"}, "--store: want a postgres:// URL"},
		{[]string{"auth", "logout", "--store", "postgres://db.internal/e2b_mcp", "--master-key-file", "/etc/e2b-mcp/master.key",
			"--key-store", "/tmp/keys.json"}, "--key-store and --store do not go together"},
		{[]string{"serve", "--store", "postgres://db.internal/e2b_mcp", "--master-key-file", "/etc/e2b-mcp/master.key",
			"--key-store", "/tmp/keys.json"}, "--key-store and --store do not go together"},
		{[]string{"serve", "--transport", "http", "--oauth-issuer", "https://login.example.com"}, "--oauth-issuer needs --public-url"},
		{[]string{"serve", "--oauth-issuer", "https://login.example.com", "--public-url", "https://mcp.example.com"}, "--oauth-issuer is for --transport http or sse"},
		{[]string{"serve", "--transport", "http", "--oauth-client-id", "x"}, "need --oauth-issuer"},
		{[]string{"serve", "--transport", "http", "--oauth-scope", "openid"}, "need --oauth-issuer"},
		{[]string{"serve", "--transport", "http", "--oauth-require-at-jwt"}, "need --oauth-issuer"},
		{[]string{"keys"}, "keys needs a subcommand"},
		{[]string{"keys", "rotate"}, `unknown keys subcommand "rotate"`},
		{[]string{"keys", "rotate-master"}, "give the master key in use (--master-key-file) and the new one (--new-master-key-file)"},
		{[]string{"keys", "rotate-master", "--master-key-file", "/a"}, "and the new one (--new-master-key-file)"},
		{[]string{"keys", "rotate-master", "--new-master-key-file", "/b"}, "give the master key in use"},
		{[]string{"keys", "rotate-master", "--master-key-file", "/a", "--new-master-key-file", "/b", "extra"}, `unexpected argument "extra"`},
	} {
		r := e.run(t, "", tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("e2b-mcp %s: exit %d\n%s\nwant a usage error saying %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
	// A master key file that is missing is an error naming it, before anything is stored or served.
	r := e.run(t, "", "auth", "status", "--master-key-file", "/nonexistent/master.key")
	if r.code != exitFailure || !strings.Contains(r.stderr, "master key file /nonexistent/master.key does not exist") {
		t.Errorf("missing master key file: exit %d\n%s", r.code, r.stderr)
	}
}
