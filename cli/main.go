// Package cli is e2b-mcp's command line: one file per command, each with its own flag.FlagSet and --help.
// Exit codes: 0 success, 1 failure, 2 usage error.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// Main runs e2b-mcp with args (without the program name) and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		getenv: os.Getenv,
		now:    time.Now,
		osUser: osUserName,
	}
	return a.main(ctx, args)
}

// app is one run of the command line and what it reads from the environment, so tests can supply their own.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	osUser         func() (string, error)
	// notifySignals, when set, replaces the process's SIGINT/SIGTERM handling in serve (tests cancel ctx instead).
	notifySignals func(ctx context.Context) (context.Context, context.CancelFunc)
}

// command is one subcommand.
type command struct {
	name, args, summary string
	run                 func(ctx context.Context, a *app, args []string) error
}

// commands is the explicit list of subcommands, in the order help shows them.
func commands() []command {
	return []command{
		{"serve", "[flags]", "run the MCP server (stdio by default; --transport http|sse)", runServe},
		{"auth", "login|status|logout [flags]", "connect, inspect or remove an E2B API key (OS keyring or " +
			"encrypted key store)", runAuth},
		{"credentials", "add NAME --domain D | list | remove NAME", "credentials your sandboxes' requests carry " +
			"without holding them", runCredentials},
		{"policy", "check FILE | explain FILE TOOL ARGS_JSON", "validate a policy file, or explain its decision for a call",
			runPolicy},
		{"sync", "in|out --link URL DIR", "sync a directory with a sandbox through a team server's one-time link",
			runSync},
		{"approve", "[ID]", "list the calls waiting for approval, or approve one", runApprove},
		{"audit", "[flags]", "show the audit log of tool calls", runAudit},
		{"usage", "[--owner NAME] [--since DATE]", "show sandbox-hours, sandboxes created and peak running per owner " +
			"and template", runUsage},
		{"tokens", "add OWNER | list | revoke ID|OWNER|TOKEN", "manage the bearer tokens of the HTTP transport", runTokens},
		{"keys", "rotate-master --master-key-file OLD --new-master-key-file NEW", "seal the encrypted key store again " +
			"under a new master key", runKeys},
		{"version", "", "print the version", runVersion},
	}
}

func (a *app) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		a.usage(a.stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return a.exit(c.run(ctx, a, args[1:]))
		}
	}
	fmt.Fprintf(a.stderr, "e2b-mcp: unknown command %q\n\n", name)
	a.usage(a.stderr)
	return exitUsage
}

func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "e2b-mcp: an MCP server that gives AI assistants control of E2B cloud sandboxes.")
	fmt.Fprintln(w, "\nUsage: e2b-mcp COMMAND [ARGS]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `e2b-mcp COMMAND --help` for a command's flags.")
}

// exit maps a command's error to an exit code, printing it.
func (a *app) exit(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "e2b-mcp: %s\n", ue.msg)
		if ue.usage != "" {
			fmt.Fprintf(a.stderr, "\n%s", ue.usage)
		}
		return exitUsage
	case errors.Is(err, errSilent):
		return exitFailure
	default:
		fmt.Fprintf(a.stderr, "e2b-mcp: %v\n", err)
		return exitFailure
	}
}

// errSilent fails a command whose output already said why.
var errSilent = errors.New("failed")

// usageError is a mistake on the command line (exit code 2), with the command's usage to show.
type usageError struct{ msg, usage string }

func (e usageError) Error() string { return e.msg }

// flags is a command's FlagSet with the synopsis its --help shows.
type flags struct {
	*flag.FlagSet
	synopsis, about string
	retired         map[string]bool // flags that are accepted and ignored, not shown by --help
}

func newFlags(name, synopsis, about string) *flags {
	fs := flag.NewFlagSet("e2b-mcp "+name, flag.ContinueOnError)
	// Parse errors and --help are printed by parse, to the right stream.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, synopsis: synopsis, about: about, retired: map[string]bool{}}
}

// retire adds a flag that is no longer used, so that a saved client configuration that still passes it keeps
// starting: its value is ignored, with a warning on stderr naming the flag that took its place (instead), and
// --help does not show it.
func (a *app) retire(f *flags, name, instead string) {
	f.retired[name] = true
	f.Func(name, "no longer used: see --"+instead, func(string) error {
		fmt.Fprintf(a.stderr, "e2b-mcp: --%s is no longer used and is ignored; use --%s\n", name, instead)
		return nil
	})
}

func (f *flags) usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s %s\n", f.Name(), f.synopsis)
	if f.about != "" {
		fmt.Fprintf(&b, "\n%s\n", f.about)
	}
	first := true
	f.VisitAll(func(fl *flag.Flag) {
		if f.retired[fl.Name] {
			return
		}
		if first {
			b.WriteString("\nFlags:\n")
			first = false
		}
		name, usage := flag.UnquoteUsage(fl)
		fmt.Fprintf(&b, "  --%s", fl.Name)
		if name != "" {
			fmt.Fprintf(&b, " %s", name)
		}
		fmt.Fprintf(&b, "\n      %s", usage)
		if showDefault(fl) {
			fmt.Fprintf(&b, " (default %s)", fl.DefValue)
		}
		b.WriteString("\n")
	})
	return b.String()
}

// showDefault tells defaults worth printing from zero values.
func showDefault(fl *flag.Flag) bool {
	switch fl.DefValue {
	case "", "0", "false", "[]":
		return false
	}
	return true
}

func (f *flags) usageErrorf(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...), usage: f.hint()}
}

// hint points at --help after a usage error, rather than burying the error under every flag.
func (f *flags) hint() string {
	return fmt.Sprintf("Usage: %s %s\nRun '%s --help' for the flags.\n", f.Name(), f.synopsis, f.Name())
}

// parse parses args, allowing flags and positional arguments in any order ("revoke bob --tokens-file F" as well
// as "revoke --tokens-file F bob"); "--" ends the flags. --help prints the usage to stdout.
func (a *app) parse(f *flags, args []string) ([]string, error) {
	var positional []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(a.stdout, f.usage())
				return nil, flag.ErrHelp
			}
			return nil, usageError{msg: err.Error(), usage: f.hint()}
		}
		rest := f.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// wantArgs checks the number of positional arguments (max < 0: no upper bound).
func (f *flags) wantArgs(got []string, min, max int) error {
	switch {
	case len(got) < min:
		return f.usageErrorf("missing argument")
	case max >= 0 && len(got) > max:
		return f.usageErrorf("unexpected argument %q", got[max])
	}
	return nil
}

// logLevelFlag adds --log-level to fs.
func logLevelFlag(fs *flags) *slog.LevelVar {
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelInfo)
	fs.Func("log-level", "log level: debug, info, warn or error (logs go to stderr) (default info)", func(s string) error {
		return lv.UnmarshalText([]byte(s))
	})
	return lv
}

// logger writes text logs to stderr, never stdout (which belongs to the protocol in stdio mode).
func (a *app) logger(level *slog.LevelVar) *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
}

// osUserName is the local user running e2b-mcp: the default owner.
func osUserName() (string, error) {
	u, err := user.Current()
	if err == nil && u.Username != "" {
		return u.Username, nil
	}
	for _, v := range []string{"USER", "USERNAME", "LOGNAME"} {
		if name := os.Getenv(v); name != "" {
			return name, nil
		}
	}
	if err == nil {
		err = errors.New("no user name")
	}
	return "", fmt.Errorf("cannot tell the local user name (%v); pass --owner NAME", err)
}

// ownerFlag adds --owner, whose default is the OS user running e2b-mcp.
func ownerFlag(f *flags, what string) *string {
	return f.String("owner", "", what+" (default: the OS user)")
}

// owner is --owner's value, or the OS user; the name must be usable as a keyring account.
func (a *app) owner(flagValue string) (string, error) {
	owner := flagValue
	if owner == "" {
		var err error
		if owner, err = a.osUser(); err != nil {
			return "", err
		}
	}
	if err := credentials.CheckOwner(owner); err != nil {
		return "", err
	}
	return owner, nil
}
