package server

import (
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
)

// Each mistake in a Config has one message, naming the setting by serve's flag, whether the CLI checks the Config
// or New does; a Config without mistakes gets its defaults.
func TestConfigCheck(t *testing.T) {
	good := Config{Owner: "alice", StateDir: t.TempDir()}
	c, err := good.Check()
	if err != nil {
		t.Fatal(err)
	}
	if c.Session != DefaultSession || c.Transport != TransportStdio || c.Listen != DefaultListen || c.Backend != (E2B{}) ||
		c.Lease != DefaultLease || c.SweepInterval != DefaultSweepInterval || c.OrphanAction != "pause" || c.Now == nil || c.Secrets == nil {
		t.Errorf("defaults: %+v", c)
	}

	for _, tc := range []struct {
		mistake func(*Config)
		want    string
	}{
		{func(c *Config) { c.Transport = "carrier-pigeon" }, `--transport "carrier-pigeon": want stdio, http or sse`},
		{func(c *Config) { c.StateDir = "" }, "no state directory given"},
		{func(c *Config) { c.Lease = -time.Second }, "--lease must be positive"},
		{func(c *Config) { c.SweepInterval = -time.Second }, "--sweep-interval must be positive"},
		{func(c *Config) { c.Store = "mysql://u:hunter2@db/x" }, "--store: want a postgres:// URL"},
		{func(c *Config) { c.Store, c.Backend = "postgres://db/x", Local{} }, "--store and --backend local do not go together"},
		{func(c *Config) { c.OrphanAction = "explode" }, "--orphan-action: "},
		{func(c *Config) { c.Tools.ExecForegroundLimit = -time.Second }, "--exec-foreground-limit -1s: want a duration above 0"},
		{func(c *Config) { c.Session = "a\nb" }, "--session: the session name contains a control character"},
		{func(c *Config) { c.Owner = "" }, "--owner: "},
		{func(c *Config) { c.Egress = egress.Limits{DenyOut: []string{"example.com"}} }, `deny-out "example.com"`},
		{func(c *Config) { c.AllowOrigins = []string{"https://*.example"} }, "--allow-origin: wildcards"},
		{func(c *Config) { c.Transport, c.PublicURL = TransportHTTP, "http://mcp.example.com" }, `--public-url "http://mcp.example.com" must use https`},
		{func(c *Config) { c.OAuth = &oauth.Config{Issuer: "ftp://idp", Resource: oauthtest.Resource} }, "OAuth: the OAuth issuer"},
		{func(c *Config) { c.Transport, c.ClientAddressHeader = TransportHTTP, "X-Forwarded-For: 1.2.3.4" }, `--client-address-header "X-Forwarded-For: 1.2.3.4": want the name`},
		{func(c *Config) { c.ClientAddressHeader = "X-Real-IP" }, "for an HTTP server"},
	} {
		bad := good
		tc.mistake(&bad)
		_, err := bad.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check: %v, want %q", err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the store's password is in %q", err)
		}
		if _, newErr := New(bad); newErr == nil || newErr.Error() != err.Error() {
			t.Errorf("New: %v, want Check's %q", newErr, err)
		}
	}
}
