package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

const tokensUsage = `Usage: e2b-mcp tokens add OWNER | list | revoke ID|OWNER|TOKEN [--tokens-file FILE]

Bearer tokens authenticate callers of the HTTP transport (serve --transport http --tokens-file FILE); each
token names the owner whose E2B key and sandboxes the caller uses. The file keeps only SHA-256 hashes.

  add OWNER      make a token for OWNER and print it (once)
  list           list the tokens' IDs and owners
  revoke WHAT    remove a token by its ID, all tokens of an owner, or the token itself

Run ` + "`e2b-mcp tokens SUBCOMMAND --help`" + ` for its flags.
`

func runTokens(ctx context.Context, a *app, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "add":
		return runTokensAdd(ctx, a, args)
	case "list":
		return runTokensList(ctx, a, args)
	case "revoke":
		return runTokensRevoke(ctx, a, args)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, tokensUsage)
		return nil
	case "":
		return usageError{msg: "tokens needs a subcommand", usage: tokensUsage}
	}
	return usageError{msg: fmt.Sprintf("unknown tokens subcommand %q", sub), usage: tokensUsage}
}

func (a *app) tokensFileFlag(f *flags) *string {
	return f.String("tokens-file", "", "the tokens file (default STATE_DIR/tokens.json)")
}

// tokensPath is --tokens-file, or tokens.json in the default state directory.
func (a *app) tokensPath(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	dir, err := a.defaultStateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "tokens.json"), nil
}

// parseTokens parses the flags of a tokens subcommand that takes between min and max arguments, and names the
// tokens file it works on (see tokensPath).
func (a *app) parseTokens(f *flags, file *string, args []string, min, max int) (rest []string, path string, err error) {
	if rest, err = a.parse(f, args); err != nil {
		return nil, "", err
	}
	if err := f.wantArgs(rest, min, max); err != nil {
		return nil, "", err
	}
	if path, err = a.tokensPath(*file); err != nil {
		return nil, "", err
	}
	return rest, path, nil
}

// readTokensOrEmpty reads the tokens file; a missing file has no tokens yet.
func readTokensOrEmpty(path string) ([]credentials.TokenEntry, error) {
	entries, err := credentials.ReadTokenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return entries, err
}

func runTokensAdd(_ context.Context, a *app, args []string) error {
	f := newFlags("tokens add", "OWNER [--tokens-file FILE]", "Make a bearer token for OWNER, print it once and keep "+
		"its hash in the tokens file.")
	ownerFlag := f.String("owner", "", "the token's owner (instead of the OWNER argument)")
	file := a.tokensFileFlag(f)
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	owner := *ownerFlag
	if owner == "" {
		if err := f.wantArgs(rest, 1, 1); err != nil {
			return err
		}
		owner = rest[0]
	} else if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	path, err := a.tokensPath(*file)
	if err != nil {
		return err
	}
	token, entry, err := credentials.NewTokenEntry(owner, a.now())
	if err != nil {
		return err
	}
	add := func(entries []credentials.TokenEntry) ([]credentials.TokenEntry, error) {
		return append(entries, entry), nil
	}
	if err := credentials.UpdateTokenFile(path, add); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "New bearer token for %s (id %s):\n\n    %s\n\n", owner, entry.ID, token)
	fmt.Fprintf(a.stdout, "It is shown only now: %s keeps only its hash. Callers send it as\n"+
		"`Authorization: Bearer <token>`; serve with --tokens-file %s.\n", path, path)
	return nil
}

func runTokensList(_ context.Context, a *app, args []string) error {
	f := newFlags("tokens list", "[--tokens-file FILE]", "List the tokens in the tokens file (IDs and "+
		"owners; never the tokens).")
	_, path, err := a.parseTokens(f, a.tokensFileFlag(f), args, 0, 0)
	if err != nil {
		return err
	}
	entries, err := readTokensOrEmpty(path)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintf(a.stdout, "No tokens in %s. Add one with `e2b-mcp tokens add OWNER`.\n", path)
		return nil
	}
	tw := newTable(a.stdout, "ID\tOWNER\tCREATED")
	plain := 0
	for _, e := range entries {
		created := "-"
		if !e.Created.IsZero() {
			created = e.Created.Local().Format("2006-01-02 15:04")
		}
		if e.Plain {
			plain++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", e.ID, e.Owner, created)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if plain > 0 {
		fmt.Fprintf(a.stderr, "warning: %s holds %d token(s) in plain text; `e2b-mcp tokens add` or `revoke` "+
			"rewrites it with hashes only\n", path, plain)
	}
	return nil
}

func runTokensRevoke(_ context.Context, a *app, args []string) error {
	f := newFlags("tokens revoke", "ID|OWNER|TOKEN [--tokens-file FILE]",
		"Remove a token by its ID, every token of an owner, or the token given itself. A running server\n"+
			"refuses the token at once.")
	rest, path, err := a.parseTokens(f, a.tokensFileFlag(f), args, 1, 1)
	if err != nil {
		return err
	}
	var removed []credentials.TokenEntry
	err = credentials.UpdateTokenFile(path, func(entries []credentials.TokenEntry) ([]credentials.TokenEntry, error) {
		var kept []credentials.TokenEntry
		kept, removed = credentials.RevokeTokens(entries, rest[0])
		if len(removed) == 0 {
			return nil, fmt.Errorf("no token in %s has that ID, owner or value", path)
		}
		return kept, nil
	})
	if err != nil {
		return err
	}
	for _, e := range removed {
		fmt.Fprintf(a.stdout, "Revoked token %s of %s.\n", e.ID, e.Owner)
	}
	return nil
}
