package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
)

func runAuth(ctx context.Context, a *app, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "login":
		return runAuthLogin(ctx, a, args)
	case "status":
		return runAuthStatus(ctx, a, args)
	case "logout":
		return runAuthLogout(ctx, a, args)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, authUsage)
		return nil
	case "":
		return usageError{msg: "auth needs a subcommand", usage: authUsage}
	}
	return usageError{msg: fmt.Sprintf("unknown auth subcommand %q", sub), usage: authUsage}
}

const authUsage = `Usage: e2b-mcp auth login|status|logout [flags]

  login    store an E2B API key (read from the terminal without echo, or from stdin)
  status   say whether a key is stored (showing only its last four characters)
  logout   remove the stored key

Run ` + "`e2b-mcp auth SUBCOMMAND --help`" + ` for its flags.
`

// e2bFlags are the flags that say where E2B is; their defaults come from E2B_DOMAIN, E2B_API_URL and
// E2B_SANDBOX_URL, as in E2B's SDKs.
type e2bFlags struct{ domain, apiURL, sandboxURL string }

func (a *app) addE2BFlags(f *flags, sandbox bool) *e2bFlags {
	env := e2b.ConfigFromEnv(a.getenv)
	e := &e2bFlags{}
	f.StringVar(&e.domain, "domain", env.Domain, "E2B domain (env E2B_DOMAIN; default "+e2b.DefaultDomain+")")
	f.StringVar(&e.apiURL, "api-url", env.APIURL, "E2B API base URL (env E2B_API_URL; default https://api.DOMAIN)")
	if sandbox {
		f.StringVar(&e.sandboxURL, "sandbox-url", env.SandboxURL, "base URL of every sandbox's envd (env E2B_SANDBOX_URL)")
	}
	return e
}

func (e *e2bFlags) config() e2b.Config {
	return e2b.Config{Domain: e.domain, APIURL: e.apiURL, SandboxURL: e.sandboxURL}
}

func (e *e2bFlags) apiBase() string {
	switch {
	case e.apiURL != "":
		return e.apiURL
	case e.domain != "":
		return "https://api." + e.domain
	}
	return "https://api." + e2b.DefaultDomain
}

// authTarget is what an auth or credentials subcommand acts on: an owner's entries in a secret store, and the
// subcommand's positional arguments.
type authTarget struct {
	args  []string
	owner string
	store credentials.SecretStore
}

// authFlags adds the flags every auth and credentials subcommand has: --owner, --state-dir and the key store's.
// The subcommand takes nargs positional arguments.
func (a *app) authFlags(f *flags, ownerWhat string, nargs int) func(args []string) (authTarget, error) {
	ownerOpt := ownerFlag(f, ownerWhat)
	stateDirOpt := f.String("state-dir", "", "state directory, where the encrypted key store is by default")
	storeOpt := f.String("store", "", "postgres:// URL of the database replicas share (serve's --store): with "+
		"--master-key-file, the key store is there")
	keys := addKeyStoreFlags(f)
	return func(args []string) (authTarget, error) {
		rest, err := a.parse(f, args)
		if err != nil {
			return authTarget{}, err
		}
		if err := f.wantArgs(rest, nargs, nargs); err != nil {
			return authTarget{}, err
		}
		owner, err := a.owner(*ownerOpt)
		if err != nil {
			return authTarget{}, err
		}
		if *storeOpt != "" && keys.masterKeyFile == "" {
			return authTarget{}, f.usageErrorf("--store needs --master-key-file: the key store in the database is sealed " +
				"under the master key")
		}
		var stateDir string
		if keys.masterKeyFile != "" && keys.keyStore == "" && *storeOpt == "" {
			if stateDir, err = a.stateDir(*stateDirOpt); err != nil {
				return authTarget{}, err
			}
		}
		store, err := keys.open(f, stateDir, *storeOpt)
		if err != nil {
			return authTarget{}, err
		}
		return authTarget{args: rest, owner: owner, store: store}, nil
	}
}

func runAuthLogin(ctx context.Context, a *app, args []string) error {
	f := newFlags("auth login", "[--owner NAME] [--master-key-file FILE [--store URL]] [--domain D | "+
		"--api-url URL] [--no-verify]",
		"Store an E2B API key (e2b_...) for an owner, in the OS keyring or, with --master-key-file, in the\n"+
			"encrypted key store. The key is read from the terminal without echo, or from the first line of\n"+
			"standard input when it is piped. It is checked with E2B first: a key E2B refuses is not stored.")
	target := a.authFlags(f, "owner the key belongs to", 0)
	loc := a.addE2BFlags(f, false)
	noVerify := f.Bool("no-verify", false, "store the key even if E2B cannot be reached to check it")
	t, err := target(args)
	if err != nil {
		return err
	}
	owner := t.owner

	key, err := a.readKey(owner)
	if err != nil {
		return err
	}
	if err := credentials.CheckAPIKeyForm(key); err != nil {
		return fmt.Errorf("%w; nothing was stored", err)
	}

	cfg := loc.config()
	cfg.APIKey = key
	switch err := credentials.VerifyAPIKey(ctx, cfg); {
	case err == nil:
	case errors.Is(err, e2b.ErrUnauthorized):
		return fmt.Errorf("E2B at %s refused the key (%s); nothing was stored", loc.apiBase(), apiMessage(err))
	case *noVerify:
		fmt.Fprintf(a.stderr, "warning: could not check the key with E2B at %s (%v); storing it unchecked (--no-verify)\n",
			loc.apiBase(), err)
	default:
		return fmt.Errorf("could not check the key with E2B at %s: %v; nothing was stored (check the network, "+
			"--domain or --api-url, or pass --no-verify to store it unchecked)", loc.apiBase(), err)
	}

	if err := credentials.SetAPIKey(t.store, owner, key); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Stored the E2B API key ending in %s for %s in %s.\n", credentials.LastFour(key), owner, t.store)
	return nil
}

// apiMessage is E2B's own words in err, or err itself.
func apiMessage(err error) string {
	var apiErr *e2b.APIError
	if errors.As(err, &apiErr) {
		if apiErr.Message != "" {
			return fmt.Sprintf("%d: %s", apiErr.Status, apiErr.Message)
		}
		return fmt.Sprintf("status %d", apiErr.Status)
	}
	return err.Error()
}

// maxSecretLine bounds what is read from a piped stdin.
const maxSecretLine = 16 << 10

// readKey reads an E2B API key from the terminal without echo, or the first line of a piped stdin.
func (a *app) readKey(owner string) (string, error) {
	return a.readSecret(fmt.Sprintf("E2B API key for %s (https://e2b.dev/dashboard?tab=keys; input is hidden): ", owner),
		"key", "auth login")
}

// readSecret reads a secret (what: "key", "value") from the terminal without echo after prompt, or the first line
// of a piped stdin; command is how the error tells to pipe it in.
func (a *app) readSecret(prompt, what, command string) (string, error) {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(a.stderr, prompt)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("reading the %s from the terminal: %w", what, err)
		}
		secret := strings.TrimSpace(string(b))
		if secret == "" {
			return "", fmt.Errorf("no %s was entered; nothing was stored", what)
		}
		return secret, nil
	}
	if a.stdin == nil {
		return "", fmt.Errorf("no %s on standard input; nothing was stored", what)
	}
	line, err := bufio.NewReaderSize(io.LimitReader(a.stdin, maxSecretLine), maxSecretLine).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the %s from standard input: %w", what, err)
	}
	secret := strings.TrimSpace(line)
	if secret == "" {
		return "", fmt.Errorf("no %s on standard input (pipe it in, e.g. `printf '%%s\\n' \"$SECRET\" | e2b-mcp %s`, "+
			"or run the command in a terminal); nothing was stored", what, command)
	}
	return secret, nil
}

func runAuthStatus(_ context.Context, a *app, args []string) error {
	f := newFlags("auth status", "[--owner NAME] [--master-key-file FILE [--store URL]]", "Say whether an E2B API key "+
		"is stored for an owner. Exit status 1 when none is.")
	target := a.authFlags(f, "owner", 0)
	t, err := target(args)
	if err != nil {
		return err
	}
	key, err := credentials.APIKey(t.store, t.owner)
	if errors.Is(err, credentials.ErrNoKey) {
		fmt.Fprintf(a.stdout, "%s: not connected (no E2B API key in %s). Run `e2b-mcp auth login --owner %s`.\n",
			t.owner, t.store, t.owner)
		return errSilent
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s: connected (E2B API key ending in %s, in %s)\n", t.owner, credentials.LastFour(key), t.store)
	return nil
}

func runAuthLogout(_ context.Context, a *app, args []string) error {
	f := newFlags("auth logout", "[--owner NAME] [--master-key-file FILE [--store URL]]", "Remove an owner's E2B API key.")
	target := a.authFlags(f, "owner", 0)
	t, err := target(args)
	if err != nil {
		return err
	}
	err = credentials.DeleteAPIKey(t.store, t.owner)
	if errors.Is(err, credentials.ErrNoKey) {
		fmt.Fprintf(a.stdout, "No E2B API key was stored for %s in %s.\n", t.owner, t.store)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Removed the E2B API key of %s from %s.\n", t.owner, t.store)
	return nil
}
