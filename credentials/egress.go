package credentials

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
)

// Egress credentials are secrets a person registers (`e2b-mcp credentials add`) so that their sandboxes' requests
// to one domain carry them, set as a header by E2B's egress proxy outside the sandbox: nothing inside a sandbox
// can read them. They live in the owner's SecretStore (the OS keyring, or the encrypted key store): each owner's
// list (names, domains, headers; no values) is one entry and each value another, so that listing never reads a
// value. A credential may instead name an E2B project secret, whose value never passes through e2b-mcp at all.

// The forms of a credential's header.
const (
	// FormGitHub is GitHub's token for git over HTTPS: Authorization: Basic base64("x-access-token:" + token).
	FormGitHub = "github"
	// FormBearer is Authorization: Bearer <token>.
	FormBearer = "bearer"
	// FormHeader is any header, set to the value as it is.
	FormHeader = "header"
)

// maxCredentialValue bounds a credential's value: headers longer than this are refused by most servers anyway.
const maxCredentialValue = 8 << 10

var (
	// ErrNoCredential means the owner has no credential of that name.
	ErrNoCredential = errors.New("no such credential")
	// ErrCredential is wrapped by every refusal of a credential's name, domain, header or value.
	ErrCredential = errors.New("invalid credential")
)

// Credential is what is known of a registered credential besides its value, which only CredentialValue reads.
type Credential struct {
	Name string `json:"name"`
	// Domain is where the header is set: a host name (github.com) or every subdomain of one (*.example.com).
	Domain string `json:"domain"`
	// Header is the header's name, e.g. Authorization.
	Header string `json:"header"`
	// Form says how the value becomes the header's value: FormGitHub, FormBearer or FormHeader.
	Form string `json:"form"`
	// E2BSecret, when set, names the E2B project secret holding the value; E2B's egress proxy puts it in.
	E2BSecret string `json:"e2b_secret,omitempty"`
}

var (
	credentialName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	domainLabel    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	headerToken    = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
)

// reservedHeaders are headers a rule must not set: they frame the request or name its destination, and
// changing them would break or redirect every request to the domain.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer",
	"Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Expect"}

// Normalize checks a credential and returns it in canonical form: the domain in lower case, the header in its
// canonical spelling (Authorization for the GitHub and bearer forms).
func (c Credential) Normalize() (Credential, error) {
	if !credentialName.MatchString(c.Name) {
		return c, fmt.Errorf("%w: the name %q must be 1 to 64 letters, digits, '.', '_' or '-', starting "+
			"with a letter or digit", ErrCredential, c.Name)
	}
	d, err := NormalizeDomain(c.Domain)
	if err != nil {
		return c, err
	}
	c.Domain = d
	switch c.Form {
	case FormGitHub, FormBearer:
		if c.Header != "" && !strings.EqualFold(c.Header, "Authorization") {
			return c, fmt.Errorf("%w: the %s form sets Authorization, not %q", ErrCredential, c.Form, c.Header)
		}
		c.Header = "Authorization"
	case FormHeader:
		if !headerToken.MatchString(c.Header) {
			return c, fmt.Errorf("%w: %q is not a header name", ErrCredential, c.Header)
		}
		c.Header = textproto.CanonicalMIMEHeaderKey(c.Header)
		if slices.Contains(reservedHeaders, c.Header) {
			return c, fmt.Errorf("%w: the header %s cannot be set by a credential", ErrCredential, c.Header)
		}
	default:
		return c, fmt.Errorf("%w: unknown form %q (want %s, %s or %s)", ErrCredential, c.Form, FormGitHub,
			FormBearer, FormHeader)
	}
	if c.E2BSecret != "" {
		if err := checkE2BSecretName(c.E2BSecret); err != nil {
			return c, err
		}
		if c.Form == FormGitHub {
			return c, fmt.Errorf("%w: E2B cannot base64-encode a secret, so the github form cannot use one; store the "+
				"whole header value (Basic base64 of x-access-token:TOKEN) as the E2B secret and use --header Authorization",
				ErrCredential)
		}
	}
	return c, nil
}

// NormalizeDomain checks a domain as E2B's allowOut and rules take it (a host name, or *. and a host name) and
// returns it in lower case, without a trailing dot.
func NormalizeDomain(domain string) (string, error) {
	d := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	host := strings.TrimPrefix(d, "*.")
	labels := strings.Split(host, ".")
	ok := host != "" && len(host) <= 253 && len(labels) >= 2
	for _, l := range labels {
		ok = ok && domainLabel.MatchString(l)
	}
	if !ok {
		return "", fmt.Errorf("%w: %q is not a domain (want a host name such as github.com, or *.example.com; no "+
			"scheme, port or path)", ErrCredential, domain)
	}
	return d, nil
}

// checkE2BSecretName applies E2B's rule for secret names (no braces, no control characters).
func checkE2BSecretName(name string) error {
	if name == "" || len(name) > 256 || strings.ContainsAny(name, "{}") || strings.ContainsFunc(name, isControl) {
		return fmt.Errorf("%w: %q is not an E2B secret name (1 to 256 characters, no braces or control characters)",
			ErrCredential, name)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// CheckValue refuses a value that cannot be a header value: empty, too long, or holding a control character (a
// CR or LF would let a value add headers of its own).
func CheckValue(value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%w: the value is empty", ErrCredential)
	case len(value) > maxCredentialValue:
		return fmt.Errorf("%w: the value is longer than %d bytes", ErrCredential, maxCredentialValue)
	case strings.ContainsFunc(value, isControl):
		return fmt.Errorf("%w: the value contains a control character (a line break?)", ErrCredential)
	}
	return nil
}

// HeaderValue is the header value the egress proxy sets for c, given the credential's value (ignored when c
// names an E2B secret: the value is then E2B's placeholder for it).
func (c Credential) HeaderValue(value string) string {
	if c.E2BSecret != "" {
		value = "${e2b.secrets." + c.E2BSecret + "}"
	}
	switch c.Form {
	case FormGitHub:
		return "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+value))
	case FormBearer:
		return "Bearer " + value
	}
	return value
}

// Describe says in words which header c sets and how, never with its value.
func (c Credential) Describe() string {
	src := "the stored value"
	if c.E2BSecret != "" {
		src = "E2B secret " + c.E2BSecret
	}
	switch c.Form {
	case FormGitHub:
		return fmt.Sprintf("%s: Basic base64(x-access-token:<%s>)", c.Header, src)
	case FormBearer:
		return fmt.Sprintf("%s: Bearer <%s>", c.Header, src)
	}
	return fmt.Sprintf("%s: <%s>", c.Header, src)
}

// Credential storage in a SecretStore.

// Accounts of credentials hold a control character, which no owner name may (CheckOwner), so they never meet
// an owner's API key: the list of an owner's credentials is under "egress<US>OWNER", each value under
// "egress-value<US>OWNER<US>NAME" (US is the unit separator, 0x1f; credential names hold none either).
const accountSep = "\x1f"

func listAccount(owner string) string { return "egress" + accountSep + owner }
func valueAccount(owner, name string) string {
	return "egress-value" + accountSep + owner + accountSep + name
}

type credentialList struct {
	Credentials []Credential `json:"credentials"`
}

// Credentials lists owner's credentials in store (names, domains, headers; never values), sorted by name.
func Credentials(store SecretStore, owner string) ([]Credential, error) {
	if err := CheckOwner(owner); err != nil {
		return nil, err
	}
	raw, err := store.Secret(listAccount(owner))
	if errors.Is(err, ErrNotFound) {
		return []Credential{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the credentials of %q: %w", owner, err)
	}
	var list credentialList
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		return nil, fmt.Errorf("the list of credentials of %q in %s is damaged (%v); remove the "+
			"credentials and add them again",
			owner, store, err)
	}
	if list.Credentials == nil {
		list.Credentials = []Credential{}
	}
	return list.Credentials, nil
}

// AddCredential stores a credential for owner in store, replacing one of the same name, and returns it as stored
// (normalized). value is the secret (empty when c names an E2B secret). Two credentials may not set the same
// header for the same domain. Concurrent adds for one owner are not serialized: the later list wins.
func AddCredential(store SecretStore, owner string, c Credential, value string) (Credential, error) {
	c, err := c.Normalize()
	if err != nil {
		return c, err
	}
	if c.E2BSecret == "" {
		if err := CheckValue(value); err != nil {
			return c, err
		}
	} else if value != "" {
		return c, fmt.Errorf("%w: a credential naming an E2B secret takes no value", ErrCredential)
	}
	list, err := Credentials(store, owner)
	if err != nil {
		return c, err
	}
	list = slices.DeleteFunc(list, func(o Credential) bool { return o.Name == c.Name })
	for _, o := range list {
		if o.Domain == c.Domain && o.Header == c.Header {
			return c, fmt.Errorf("%w: credential %s already sets %s for %s; remove it first", ErrCredential,
				o.Name, o.Header, o.Domain)
		}
	}
	// The value goes first: a list entry never names a value that is not there (a failure in between leaves
	// at most an unlisted value, which the next add of that name replaces).
	acct := valueAccount(owner, c.Name)
	if c.E2BSecret == "" {
		if err := store.SetSecret(acct, value); err != nil {
			return c, fmt.Errorf("storing credential %q of %q: %w", c.Name, owner, err)
		}
	} else if err := store.DeleteSecret(acct); err != nil && !errors.Is(err, ErrNotFound) {
		return c, fmt.Errorf("removing the old value of credential %q of %q: %w", c.Name, owner, err)
	}
	list = append(list, c)
	slices.SortFunc(list, func(a, b Credential) int { return strings.Compare(a.Name, b.Name) })
	return c, putCredentials(store, owner, list)
}

func putCredentials(store SecretStore, owner string, list []Credential) error {
	if len(list) == 0 {
		err := store.DeleteSecret(listAccount(owner))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("removing the credentials list of %q: %w", owner, err)
		}
		return nil
	}
	raw, err := json.Marshal(credentialList{Credentials: list})
	if err != nil {
		return err
	}
	if err := store.SetSecret(listAccount(owner), string(raw)); err != nil {
		return fmt.Errorf("storing the credentials list of %q: %w", owner, err)
	}
	return nil
}

// RemoveCredential deletes owner's credential name and its value from store; an error wrapping ErrNoCredential
// when there is none.
func RemoveCredential(store SecretStore, owner, name string) error {
	list, err := Credentials(store, owner)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(list, func(c Credential) bool { return c.Name == name })
	if i < 0 {
		return fmt.Errorf("%w: %q of owner %q", ErrNoCredential, name, owner)
	}
	// The list goes first: once the credential is unlisted no sandbox gets it, whatever happens to the value.
	if err := putCredentials(store, owner, slices.Delete(list, i, i+1)); err != nil {
		return err
	}
	err = store.DeleteSecret(valueAccount(owner, name))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("removing the value of credential %q of %q: %w", name, owner, err)
	}
	return nil
}

// CredentialValue reads the value of owner's credential c from store (empty for one naming an E2B secret).
func CredentialValue(store SecretStore, owner string, c Credential) (string, error) {
	if c.E2BSecret != "" {
		return "", nil
	}
	v, err := store.Secret(valueAccount(owner, c.Name))
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("%w: the value of credential %q of owner %q is missing from %s; add it again", ErrNoCredential,
			c.Name, owner, store)
	}
	if err != nil {
		return "", fmt.Errorf("reading credential %q of %q: %w", c.Name, owner, err)
	}
	return v, nil
}
