package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

const credentialsUsage = `Usage: e2b-mcp credentials add NAME --domain DOMAIN (--github | --bearer | --header NAME) | list | remove NAME

Credentials are secrets your sandboxes' requests carry without the sandboxes ever holding them: E2B's egress
proxy sets the header on each HTTP(S) request a sandbox makes to the domain, outside the sandbox, so that
` + "`git push`" + ` to github.com authenticates while env, files and /proc inside hold nothing. Values live in the
OS keyring (or the encrypted key store) under the owner; no tool can read, set or list them.

  add NAME       store a credential (the value is read without echo, or from a pipe)
  list           show the credentials' names, domains and headers (never the values)
  remove NAME    delete a credential

A credential is applied to every sandbox that comes alive after the change: new ones, resumed ones, forks.
Run ` + "`e2b-mcp credentials SUBCOMMAND --help`" + ` for its flags.
`

func runCredentials(ctx context.Context, a *app, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "add":
		return runCredentialsAdd(ctx, a, args)
	case "list":
		return runCredentialsList(ctx, a, args)
	case "remove":
		return runCredentialsRemove(ctx, a, args)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, credentialsUsage)
		return nil
	case "":
		return usageError{msg: "credentials needs a subcommand", usage: credentialsUsage}
	}
	return usageError{msg: fmt.Sprintf("unknown credentials subcommand %q", sub), usage: credentialsUsage}
}

func runCredentialsAdd(_ context.Context, a *app, args []string) error {
	f := newFlags("credentials add", "NAME --domain DOMAIN (--github | --bearer | --header NAME) [--e2b-secret "+
		"SECRET] [--owner NAME]",
		"Store a credential for an owner's sandboxes, in the OS keyring or, with --master-key-file, in the\n"+
			"encrypted key store. Its value is read from the terminal without echo, or from the first line of\n"+
			"standard input when it is piped. Adding a credential of an existing name replaces it (a rotated token).\n"+
			"With --e2b-secret the value stays in E2B (a project secret of that name) and never passes through\n"+
			"e2b-mcp; no value is read then.")
	target := a.authFlags(f, "owner whose sandboxes get the credential", 1)
	domain := f.String("domain", "", "the domain whose requests carry the header: a host name "+
		"(github.com) or *.example.com")
	github := f.Bool("github", false, "a GitHub token for git over HTTPS: Authorization: Basic "+
		"base64(x-access-token:TOKEN)")
	bearer := f.Bool("bearer", false, "a bearer token: Authorization: Bearer TOKEN")
	header := f.String("header", "", "set this header to the value as it is (e.g. X-Api-Key)")
	secret := f.String("e2b-secret", "", "name of an E2B project secret holding the value (with --bearer or --header)")
	t, err := target(args)
	if err != nil {
		return err
	}
	c := credentials.Credential{Name: t.args[0], Domain: *domain, E2BSecret: *secret}
	forms := 0
	for form, on := range map[string]bool{credentials.FormGitHub: *github, credentials.FormBearer: *bearer,
		credentials.FormHeader: *header != ""} {
		if on {
			c.Form = form
			forms++
		}
	}
	switch {
	case *domain == "":
		return f.usageErrorf("--domain is required")
	case forms != 1:
		return f.usageErrorf("give exactly one of --github, --bearer and --header NAME")
	}
	c.Header = *header
	if c, err = c.Normalize(); err != nil {
		return fmt.Errorf("%w; nothing was stored", err)
	}
	owner := t.owner
	value := ""
	if c.E2BSecret == "" {
		prompt := fmt.Sprintf("Value of credential %s for %s (input is hidden): ", c.Name, c.Domain)
		if value, err = a.readSecret(prompt, "value", "credentials add "+c.Name+" --domain "+c.Domain); err != nil {
			return err
		}
	}
	c, err = credentials.AddCredential(t.store, owner, c, value)
	if err != nil {
		if errors.Is(err, credentials.ErrCredential) {
			return fmt.Errorf("%w; nothing was stored", err)
		}
		return err
	}
	fmt.Fprintf(a.stdout, "Stored credential %s for %s in %s: requests of %s's sandboxes to %s get\n    %s\n"+
		"It is in force in sandboxes created, resumed or forked from now on.\n", c.Name, owner, t.store, owner,
		c.Domain, c.Describe())
	return nil
}

func runCredentialsList(_ context.Context, a *app, args []string) error {
	f := newFlags("credentials list", "[--owner NAME]", "List an owner's credentials: names, domains and "+
		"headers, never the values.")
	t, err := a.authFlags(f, "owner", 0)(args)
	if err != nil {
		return err
	}
	owner := t.owner
	list, err := credentials.Credentials(t.store, owner)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintf(a.stdout, "No credentials for %s. Add one with `e2b-mcp credentials add NAME --domain DOMAIN "+
			"--github`.\n", owner)
		return nil
	}
	tw := newTable(a.stdout, "NAME\tDOMAIN\tHEADER")
	for _, c := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Domain, c.Describe())
	}
	return tw.Flush()
}

func runCredentialsRemove(_ context.Context, a *app, args []string) error {
	f := newFlags("credentials remove", "NAME [--owner NAME]",
		"Delete an owner's credential. Running sandboxes lose it at their next resume;\n"+
			"delete or pause and resume them to take it out at once.")
	t, err := a.authFlags(f, "owner", 1)(args)
	if err != nil {
		return err
	}
	if err := credentials.RemoveCredential(t.store, t.owner, t.args[0]); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "Removed credential %s of %s.\n", t.args[0], t.owner)
	return nil
}
