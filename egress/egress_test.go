package egress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
)

func TestResolve(t *testing.T) {
	keyring.MockInit()
	k := credentials.Keyring{}
	mustAdd := func(owner string, c credentials.Credential, v string) {
		t.Helper()
		if _, err := credentials.AddCredential(k, owner, c, v); err != nil {
			t.Fatal(err)
		}
	}
	mustAdd("alice", credentials.Credential{Name: "gh", Domain: "github.com", Form: credentials.FormGitHub}, "ghp_alice")
	mustAdd("alice", credentials.Credential{Name: "api", Domain: "github.com", Form: credentials.FormHeader, Header: "X-Api-Key"}, "k_alice")
	mustAdd("alice", credentials.Credential{Name: "npm", Domain: "registry.npmjs.org", Form: credentials.FormBearer, E2BSecret: "NPM"}, "")
	mustAdd("bob", credentials.Credential{Name: "gh", Domain: "github.com", Form: credentials.FormGitHub}, "ghp_bob")

	cases := []struct {
		name    string
		p       *Policy
		owner   string
		network string // JSON of the network sent, "" for none
		summary string
	}{
		{"no policy", nil, "alice", "", `{"credentials":[],"internet":true}`},
		{"no store, no limits", &Policy{}, "alice", "", `{"credentials":[],"internet":true}`},
		{"all of alice's", &Policy{Store: k}, "alice",
			`{"allowOut":null,"denyOut":null,"rules":{"github.com":[{"transform":{"headers":{"Authorization":"Basic eC1hY2Nlc3MtdG9rZW46Z2hwX2FsaWNl","X-Api-Key":"k_alice"}}}],"registry.npmjs.org":[{"transform":{"headers":{"Authorization":"Bearer ${e2b.secrets.NPM}"}}}]}}`,
			`{"credentials":[{"name":"api","domain":"github.com"},{"name":"gh","domain":"github.com"},{"name":"npm","domain":"registry.npmjs.org"}],"internet":true}`},
		{"only named ones", &Policy{Store: k, Credentials: []string{"gh", "nothere"}}, "bob",
			`{"allowOut":null,"denyOut":null,"rules":{"github.com":[{"transform":{"headers":{"Authorization":"Basic eC1hY2Nlc3MtdG9rZW46Z2hwX2JvYg=="}}}]}}`,
			`{"credentials":[{"name":"gh","domain":"github.com"}],"internet":true}`},
		{"none by choice", &Policy{Store: k, Credentials: []string{}}, "alice", "", `{"credentials":[],"internet":true}`},
		{"allow-list", &Policy{Limits: Limits{AllowOut: []string{"github.com", "10.0.0.0/8"}}}, "carol",
			`{"allowOut":["github.com","10.0.0.0/8"],"denyOut":["0.0.0.0/0"],"rules":{}}`,
			`{"credentials":[],"allow_out":["github.com","10.0.0.0/8"],"internet":false}`},
		{"no internet", &Policy{Limits: Limits{NoInternet: true}}, "carol",
			`{"allowOut":null,"denyOut":["0.0.0.0/0"],"rules":{}}`, `{"credentials":[],"internet":false}`},
		{"deny-list", &Policy{Limits: Limits{DenyOut: []string{"169.254.169.254"}}}, "carol",
			`{"allowOut":null,"denyOut":["169.254.169.254"],"rules":{}}`, `{"credentials":[],"deny_out":["169.254.169.254"],"internet":true}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.p.Resolve(tc.owner, "main")
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if cfg.Network != nil {
				b, _ := json.Marshal(cfg.Network)
				got = string(b)
			}
			if got != tc.network {
				t.Errorf("network\n got %s\nwant %s", got, tc.network)
			}
			sum, _ := json.Marshal(cfg.Summary)
			if string(sum) != tc.summary {
				t.Errorf("summary\n got %s\nwant %s", sum, tc.summary)
			}
			for _, v := range []string{"ghp_", "k_alice", "eC1h"} {
				if strings.Contains(string(sum), v) {
					t.Errorf("the summary holds a value: %s", sum)
				}
			}
		})
	}
}

func TestLimitsCheck(t *testing.T) {
	good := Limits{AllowOut: []string{"github.com", "*.npmjs.org", "1.1.1.1", "10.0.0.0/8"}, DenyOut: []string{"169.254.169.254", e2b.AllTraffic}}
	if err := good.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Limits{
		{AllowOut: []string{"https://github.com"}},
		{AllowOut: []string{"github.com:443"}},
		{DenyOut: []string{"evil.com"}},
		{DenyOut: []string{"10.0.0.0/33"}},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v: accepted", bad)
		}
	}
}

func TestScopes(t *testing.T) {
	keyring.MockInit()
	k := credentials.Keyring{}
	for _, name := range []string{"gh", "npm"} {
		if _, err := credentials.AddCredential(k, "alice", credentials.Credential{Name: name, Domain: name + ".example.com", Form: credentials.FormBearer}, "v-"+name); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "egress.yaml")
	if err := os.WriteFile(path, []byte(`
owners:
  alice:
    allow_out: [gh.example.com, npm.example.com]
    credentials: [gh]
    sessions:
      ci:
        no_internet: true
        allow_out: []
        credentials: none
      open:
        allow_out: []
        credentials: all
`), 0o600); err != nil {
		t.Fatal(err)
	}
	owners, err := LoadScopes(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &Policy{Store: k, Owners: owners, Limits: Limits{DenyOut: []string{"169.254.169.254"}}}
	cases := []struct{ owner, session, summary string }{
		{"alice", "main", `{"credentials":[{"name":"gh","domain":"gh.example.com"}],"allow_out":["gh.example.com","npm.example.com"],"deny_out":["169.254.169.254"],"internet":false}`},
		{"alice", "ci", `{"credentials":[],"deny_out":["169.254.169.254"],"internet":false}`},
		{"alice", "open", `{"credentials":[{"name":"gh","domain":"gh.example.com"},{"name":"npm","domain":"npm.example.com"}],"deny_out":["169.254.169.254"],"internet":true}`},
		{"bob", "ci", `{"credentials":[],"deny_out":["169.254.169.254"],"internet":true}`},
	}
	for _, tc := range cases {
		cfg, err := p.Resolve(tc.owner, tc.session)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := json.Marshal(cfg.Summary); string(got) != tc.summary {
			t.Errorf("%s/%s:\n got %s\nwant %s", tc.owner, tc.session, got, tc.summary)
		}
	}
	for _, bad := range []string{
		"owners: {alice: {allow_outt: [x.com]}}",
		"owners: {alice: {deny_out: [evil.com]}}",
		"owners: {alice: {credentials: some}}",
		"owners: {alice: {sessions: {ci: {allow_out: [\"https://x.com\"]}}}}",
		"owners: {state-data-key: {no_internet: true}}",
		"not yaml: [",
	} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadScopes(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
