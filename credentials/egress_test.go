package credentials

import (
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"
)

const ghToken = "ghp_0123456789abcdefABCDEF0123456789abcd"

func TestCredentialRoundTrip(t *testing.T) {
	keyring.MockInit()
	k := Keyring{}
	c, err := AddCredential(k, "alice", Credential{Name: "gh", Domain: "GitHub.com.", Form: FormGitHub}, ghToken)
	if err != nil {
		t.Fatal(err)
	}
	if c.Domain != "github.com" || c.Header != "Authorization" {
		t.Fatalf("normalized: %+v", c)
	}
	if _, err := AddCredential(k, "alice", Credential{Name: "npm", Domain: "registry.npmjs.org", Form: FormBearer}, "npm_tok"); err != nil {
		t.Fatal(err)
	}
	list, err := Credentials(k, "alice")
	if err != nil || len(list) != 2 || list[0].Name != "gh" || list[1].Name != "npm" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	// The list entry holds no value: listing never reads one.
	raw, _ := keyring.Get(Service, listAccount("alice"))
	if strings.Contains(raw, ghToken) || strings.Contains(raw, "npm_tok") {
		t.Fatalf("the list entry holds a value: %s", raw)
	}
	v, err := CredentialValue(k, "alice", list[0])
	if err != nil || v != ghToken {
		t.Fatalf("value = %q, %v", v, err)
	}
	if other, _ := Credentials(k, "bob"); len(other) != 0 {
		t.Fatalf("bob sees %+v", other)
	}
	// Rotation replaces the value under the same name.
	if _, err := AddCredential(k, "alice", Credential{Name: "gh", Domain: "github.com", Form: FormGitHub}, "ghp_rotated"); err != nil {
		t.Fatal(err)
	}
	if v, _ := CredentialValue(k, "alice", list[0]); v != "ghp_rotated" {
		t.Fatalf("after rotation: %q", v)
	}
	if err := RemoveCredential(k, "alice", "gh"); err != nil {
		t.Fatal(err)
	}
	if _, err := CredentialValue(k, "alice", list[0]); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("value after remove: %v", err)
	}
	if err := RemoveCredential(k, "alice", "gh"); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("second remove: %v", err)
	}
	if err := RemoveCredential(k, "alice", "npm"); err != nil {
		t.Fatal(err)
	}
	if _, err := keyring.Get(Service, listAccount("alice")); !errors.Is(err, keyring.ErrNotFound) {
		t.Fatalf("an empty list is kept: %v", err)
	}
}

func TestHeaderValues(t *testing.T) {
	gh := Credential{Form: FormGitHub, Header: "Authorization"}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ghToken))
	if got := gh.HeaderValue(ghToken); got != want {
		t.Errorf("github: %q", got)
	}
	if got := (Credential{Form: FormBearer}).HeaderValue("t"); got != "Bearer t" {
		t.Errorf("bearer: %q", got)
	}
	if got := (Credential{Form: FormHeader, Header: "X-Api-Key"}).HeaderValue("t"); got != "t" {
		t.Errorf("header: %q", got)
	}
	if got := (Credential{Form: FormBearer, E2BSecret: "NPM_TOKEN"}).HeaderValue(""); got != "Bearer ${e2b.secrets.NPM_TOKEN}" {
		t.Errorf("secret: %q", got)
	}
	for _, c := range []Credential{gh, {Form: FormBearer, Header: "Authorization", E2BSecret: "S"}} {
		if d := c.Describe(); strings.Contains(d, ghToken) || !strings.HasPrefix(d, "Authorization: ") {
			t.Errorf("describe: %q", d)
		}
	}
}

// Attacks on what a credential sets: a value that would add headers of its own (CR LF), a header that frames
// or redirects requests, a domain that smuggles a path or port, a name with a '/' that would reach another
// owner's value entry, a secret name that closes the placeholder.
func TestCredentialRefusals(t *testing.T) {
	keyring.MockInit()
	k := Keyring{}
	cases := []struct {
		c     Credential
		value string
	}{
		{Credential{Name: "gh", Domain: "github.com", Form: FormBearer}, "tok\r\nX-Evil: 1"},
		{Credential{Name: "gh", Domain: "github.com", Form: FormBearer}, "tok\n"},
		{Credential{Name: "gh", Domain: "github.com", Form: FormBearer}, ""},
		{Credential{Name: "gh", Domain: "github.com", Form: FormBearer}, strings.Repeat("a", 9000)},
		{Credential{Name: "h", Domain: "github.com", Form: FormHeader, Header: "Host"}, "evil.com"},
		{Credential{Name: "h", Domain: "github.com", Form: FormHeader, Header: "transfer-encoding"}, "chunked"},
		{Credential{Name: "h", Domain: "github.com", Form: FormHeader, Header: "X Bad"}, "v"},
		{Credential{Name: "h", Domain: "github.com", Form: FormBearer, Header: "Cookie"}, "v"},
		{Credential{Name: "d", Domain: "https://github.com", Form: FormBearer}, "v"},
		{Credential{Name: "d", Domain: "github.com:443", Form: FormBearer}, "v"},
		{Credential{Name: "d", Domain: "github.com/org", Form: FormBearer}, "v"},
		{Credential{Name: "d", Domain: "com", Form: FormBearer}, "v"},
		{Credential{Name: "d", Domain: "*", Form: FormBearer}, "v"},
		{Credential{Name: "../bob/gh", Domain: "github.com", Form: FormBearer}, "v"},
		{Credential{Name: "a/b", Domain: "github.com", Form: FormBearer}, "v"},
		{Credential{Name: "", Domain: "github.com", Form: FormBearer}, "v"},
		{Credential{Name: "s", Domain: "github.com", Form: FormBearer, E2BSecret: "X}${evil"}, ""},
		{Credential{Name: "s", Domain: "github.com", Form: FormGitHub, E2BSecret: "GH"}, ""},
		{Credential{Name: "s", Domain: "github.com", Form: FormBearer, E2BSecret: "GH"}, "a value too"},
		{Credential{Name: "f", Domain: "github.com", Form: "basic"}, "v"},
	}
	for _, tc := range cases {
		_, err := AddCredential(k, "alice", tc.c, tc.value)
		if !errors.Is(err, ErrCredential) {
			t.Errorf("%+v: want ErrCredential, got %v", tc.c, err)
		}
		if err != nil && len(tc.value) > 2 && strings.Contains(err.Error(), tc.value) {
			t.Errorf("%+v: the error repeats the value: %v", tc.c, err)
		}
	}
	if list, _ := Credentials(k, "alice"); len(list) != 0 {
		t.Fatalf("refused credentials were stored: %+v", list)
	}
	// Two credentials setting the same header on the same domain would fight; the second is refused.
	if _, err := AddCredential(k, "alice", Credential{Name: "a", Domain: "github.com", Form: FormGitHub}, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := AddCredential(k, "alice", Credential{Name: "b", Domain: "github.com", Form: FormBearer}, "v2"); !errors.Is(err, ErrCredential) {
		t.Fatalf("a second Authorization for github.com: %v", err)
	}
}

// On a host without a keyring the credentials live in the encrypted key store, sealed like the API keys: the
// store's file never holds a value in the clear, and an owner name can never reach a credential's entry.
func TestCredentialsInTheEncryptedKeyStore(t *testing.T) {
	s, path, _ := newFileStore(t)
	if _, err := AddCredential(s, "alice", Credential{Name: "gh", Domain: "github.com", Form: FormGitHub}, ghToken); err != nil {
		t.Fatal(err)
	}
	list, err := Credentials(s, "alice")
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v, %v", list, err)
	}
	if v, err := CredentialValue(s, "alice", list[0]); err != nil || v != ghToken {
		t.Fatalf("value %q, %v", v, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), ghToken) || strings.Contains(string(raw), "github.com") {
		t.Fatalf("the key store holds a credential in the clear:\n%s", raw)
	}
	for _, owner := range []string{listAccount("alice"), valueAccount("alice", "gh")} {
		if err := SetAPIKey(s, owner, testKey); !errors.Is(err, ErrOwnerName) {
			t.Errorf("an API key under the account %q: %v", owner, err)
		}
	}
}
