package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

func TestCredentialsCommands(t *testing.T) {
	keyring.MockInit()
	e := newEnv(t)
	const token = "ghp_cli0123456789abcdefghijklmnopqrstuv"

	r := e.run(t, token+"\n", "credentials", "add", "gh", "--domain", "github.com", "--github", "--owner", "alice")
	if r.code != exitOK || !strings.Contains(r.stdout, "Authorization: Basic base64(x-access-token:<the stored value>)") {
		t.Fatalf("add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r2 := e.run(t, "", "credentials", "add", "npm", "--domain", "registry.npmjs.org", "--bearer", "--e2b-secret", "NPM_TOKEN", "--owner", "alice")
	if r2.code != exitOK {
		t.Fatalf("add with an E2B secret: exit %d\n%s", r2.code, r2.stderr)
	}
	list := e.run(t, "", "credentials", "list", "--owner", "alice")
	for _, want := range []string{"gh", "github.com", "npm", "registry.npmjs.org", "E2B secret NPM_TOKEN"} {
		if !strings.Contains(list.stdout, want) {
			t.Errorf("list lacks %q:\n%s", want, list.stdout)
		}
	}
	for _, out := range []result{r, r2, list} {
		if strings.Contains(out.stdout+out.stderr, token) || strings.Contains(out.stdout+out.stderr, "eC1hY2Nlc3Mt") {
			t.Fatalf("the value is shown:\n%s%s", out.stdout, out.stderr)
		}
	}
	if v, _ := credentials.CredentialValue(credentials.Keyring{}, "alice", credentials.Credential{Name: "gh"}); v != token {
		t.Fatalf("stored value %q", v)
	}

	// Mistakes are usage errors or refusals, and store nothing.
	for _, args := range [][]string{
		{"credentials", "add", "x", "--github"},
		{"credentials", "add", "x", "--domain", "github.com"},
		{"credentials", "add", "x", "--domain", "github.com", "--github", "--bearer"},
		{"credentials", "add", "x", "--domain", "https://github.com/", "--github"},
		{"credentials", "add", "x", "--domain", "github.com", "--header", "Host"},
	} {
		if r := e.run(t, "v\n", append(args, "--owner", "alice")...); r.code == exitOK {
			t.Errorf("%v: accepted", args)
		}
	}
	if r := e.run(t, "tok\rX-Injected: 1\n", "credentials", "add", "x", "--domain", "github.com", "--bearer", "--owner", "bob"); r.code != exitFailure {
		t.Errorf("a value with a CR: exit %d", r.code)
	}
	if r := e.run(t, "", "credentials", "add", "x", "--domain", "github.com", "--bearer", "--owner", "bob"); r.code != exitFailure ||
		!strings.Contains(r.stderr, "nothing was stored") {
		t.Errorf("no value: exit %d %s", r.code, r.stderr)
	}
	if got, _ := credentials.Credentials(credentials.Keyring{}, "bob"); len(got) != 0 {
		t.Fatalf("refused credentials stored: %+v", got)
	}

	if r := e.run(t, "", "credentials", "remove", "gh", "--owner", "alice"); r.code != exitOK {
		t.Fatalf("remove: %d %s", r.code, r.stderr)
	}
	if r := e.run(t, "", "credentials", "remove", "gh", "--owner", "alice"); r.code != exitFailure {
		t.Fatalf("second remove: %d", r.code)
	}
	got, _ := credentials.Credentials(credentials.Keyring{}, "alice")
	if len(got) != 1 || got[0].Name != "npm" {
		t.Fatalf("after remove: %+v", got)
	}
}

func TestServeEgressFlags(t *testing.T) {
	e := newEnv(t)
	cfg, err := parseServe(t, e)
	if err != nil || cfg.Credentials != nil || len(cfg.Egress.AllowOut)+len(cfg.Egress.DenyOut) != 0 || cfg.Egress.NoInternet {
		t.Fatalf("defaults: %+v %v", cfg.Egress, err)
	}
	cfg, err = parseServe(t, e, "--allow-out", "github.com,*.npmjs.org", "--allow-out", "10.1.0.0/16", "--deny-out", "169.254.169.254",
		"--no-internet", "--credentials", "gh,npm")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Egress.AllowOut, []string{"github.com", "*.npmjs.org", "10.1.0.0/16"}) || !cfg.Egress.NoInternet ||
		!slices.Equal(cfg.Egress.DenyOut, []string{"169.254.169.254"}) || !slices.Equal(cfg.Credentials, []string{"gh", "npm"}) {
		t.Fatalf("flags: %+v %v", cfg.Egress, cfg.Credentials)
	}
	if cfg, _ := parseServe(t, e, "--credentials", "none"); cfg.Credentials == nil || len(cfg.Credentials) != 0 {
		t.Fatalf("--credentials none: %#v", cfg.Credentials)
	}
	file := filepath.Join(t.TempDir(), "egress.yaml")
	if err := os.WriteFile(file, []byte("owners:\n  alice:\n    sessions:\n      ci: {no_internet: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := parseServe(t, e, "--egress-file", file); err != nil || cfg.EgressScopes["alice"].Sessions["ci"].NoInternet == nil {
		t.Fatalf("--egress-file: %+v %v", cfg.EgressScopes, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("owners: {alice: {deny_out: [evil.com]}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"--deny-out", "evil.com"}, {"--allow-out", "https://x.com"}, {"--credentials", ","},
		{"--egress-file", bad}, {"--egress-file", filepath.Join(t.TempDir(), "missing.yaml")}} {
		if _, err := parseServe(t, e, bad...); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}
