package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const keysUsage = `Usage: e2b-mcp keys rotate-master --master-key-file OLD --new-master-key-file NEW [--key-store FILE | --state-dir DIR | --store URL]
       e2b-mcp keys rotate-data [--master-key-file FILE [--key-store FILE]] [--state-dir DIR | --store URL]

The encrypted key store (serve --master-key-file, for hosts without an OS keyring) holds the members' E2B API
keys, their credentials and the state's data key, sealed under the master key. The state's data key (in the OS
keyring, or in the encrypted key store) seals the envd access token of every sandbox in the state store.

  rotate-master    seal the whole key store again under a new master key (when the old one may have leaked)
  rotate-data      seal every envd token of the state store again under a new data key (when the state store
                   and its data key may have leaked)

Run ` + "`e2b-mcp keys SUBCOMMAND --help`" + ` for its flags.
`

func runKeys(ctx context.Context, a *app, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "rotate-master":
		return runKeysRotateMaster(ctx, a, args)
	case "rotate-data":
		return runKeysRotateData(ctx, a, args)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, keysUsage)
		return nil
	case "":
		return usageError{msg: "keys needs a subcommand", usage: keysUsage}
	}
	return usageError{msg: fmt.Sprintf("unknown keys subcommand %q", sub), usage: keysUsage}
}

func runKeysRotateMaster(_ context.Context, a *app, args []string) error {
	f := newFlags("keys rotate-master", "--master-key-file OLD --new-master-key-file NEW [--key-store FILE | "+
		"--state-dir DIR | --store URL]",
		"Seal every entry of the encrypted key store again under the master key in NEW, in one atomic step: if it\n"+
			"fails or is stopped, the store is whole under OLD or whole under NEW. Nothing is written in the clear.\n"+
			"NEW must be a new key (`umask 077; openssl rand -hex 32 > NEW`), private, and kept outside the state\n"+
			"directory. Then restart `serve` (and run every other command) with --master-key-file NEW: a server still\n"+
			"using OLD fails each call that needs a key, saying that OLD does not open the store.")
	oldFile := f.String("master-key-file", "", "the master key the store is sealed under now (OLD)")
	newFile := f.String("new-master-key-file", "", "the master key to seal it under from now on (NEW)")
	keyStore := f.String("key-store", "", "the encrypted key store's file (default STATE_DIR/"+DefaultKeyStoreFile+")")
	stateDirOpt := f.String("state-dir", "", "state directory, where the encrypted key store is by default")
	storeURL := f.String("store", "", "postgres:// URL of the database whose key store replicas share (serve's --store)")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	if *oldFile == "" || *newFile == "" {
		return f.usageErrorf("give the master key in use (--master-key-file) and the new one (--new-master-key-file)")
	}
	if *storeURL != "" {
		if *keyStore != "" {
			return f.usageErrorf("--key-store and --store do not go together: with --store the key store is in the database")
		}
		return a.rotateDatabaseStore(f, *storeURL, *oldFile, *newFile)
	}
	path := *keyStore
	if path == "" {
		dir, err := a.stateDir(*stateDirOpt)
		if err != nil {
			return err
		}
		path = filepath.Join(dir, DefaultKeyStoreFile)
	}
	n, err := credentials.RotateFileStore(path, *oldFile, *newFile)
	if err != nil {
		if _, nerr := credentials.OpenFileStore(path, *newFile); nerr == nil {
			return err // it says that the store is sealed under NEW
		}
		return fmt.Errorf("%w; the key store was not changed", err)
	}
	path, _ = filepath.Abs(path)
	a.rotated(n, "the key store "+path, *newFile)
	return nil
}

// rotateDatabaseStore is rotate-master for the key store in the database at storeURL.
func (a *app) rotateDatabaseStore(f *flags, storeURL, oldFile, newFile string) error {
	if err := checkStoreURL(f, storeURL); err != nil {
		return err
	}
	where := "the key store in " + state.URLWithoutPassword(storeURL)
	store, err := credentials.OpenDatabaseStore(storeURL, oldFile)
	if err != nil {
		if done, nerr := credentials.OpenDatabaseStore(storeURL, newFile); nerr == nil {
			done.Close()
			return fmt.Errorf("%w: %s is sealed under the master key in %s already (an earlier rotation); nothing "+
				"was changed: use that file from now on", credentials.ErrMasterKey, where, newFile)
		}
		return fmt.Errorf("%w; the key store was not changed", err)
	}
	defer store.Close()
	n, err := credentials.RotateMasterKey(store, newFile)
	if err != nil {
		return fmt.Errorf("%w; the key store was not changed", err)
	}
	a.rotated(n, where, newFile)
	return nil
}

// rotated tells the operator what a rotation did and what to do next.
func (a *app) rotated(n int, where, newFile string) {
	newAbs, _ := filepath.Abs(newFile)
	fmt.Fprintf(a.stdout, "Sealed the %d entries of %s again under the master key in %s.\n"+
		"Now restart serve, and run every other command, with --master-key-file %s; the old master key no longer\n"+
		"opens the store. Destroy the old key file. Copies of the store made before now (backups) still open under\n"+
		"the old key: if the old key may have leaked with such a copy, have members replace their E2B keys too.\n",
		n, where, newAbs, newAbs)
}

func runKeysRotateData(_ context.Context, a *app, args []string) error {
	f := newFlags("keys rotate-data", "[--master-key-file FILE [--key-store FILE]] [--state-dir DIR | --store URL]",
		"Make a new random data key and seal the envd access token of every sandbox in the state store again under\n"+
			"it, in one transaction, then replace the data key in the key store (the OS keyring, or with\n"+
			"--master-key-file the encrypted key store). Stopped between the two steps, servers still read every\n"+
			"token, and running it again finishes. Choose the stores as serve does. With the embedded store, stop every\n"+
			"server using the state directory first; with --store, replicas may run on, but each one refuses calls on\n"+
			"sandboxes until it is restarted.")
	keys := addKeyStoreFlags(f)
	stateDirOpt := f.String("state-dir", "", "state directory (serve's --state-dir)")
	storeURL := f.String("store", "", "postgres:// URL of the database replicas share (serve's --store)")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	if err := checkStoreURL(f, *storeURL); err != nil {
		return err
	}
	stateDir, err := a.stateDir(*stateDirOpt)
	if err != nil {
		return err
	}
	secrets, err := keys.open(f, stateDir, *storeURL)
	if err != nil {
		return err
	}
	if c, ok := secrets.(interface{ Close() error }); ok {
		defer c.Close()
	}
	opts := state.Options{Keys: credentials.StateKeys(secrets), Exclusive: true}
	var (
		st    state.Rekeyer
		where string
	)
	if *storeURL != "" {
		pg, err := state.OpenPostgres(*storeURL, opts)
		if err != nil {
			return err
		}
		defer pg.Close()
		st, where = pg, "the state store in "+state.URLWithoutPassword(*storeURL)
	} else {
		b, err := state.Open(stateDir, opts)
		if err != nil {
			return err
		}
		defer b.Close()
		st, where = b, "the state store "+b.Path()
	}
	done, err := credentials.RotateDataKey(secrets, st)
	if err != nil {
		return err
	}
	if done.Finished {
		fmt.Fprintf(a.stdout, "Finished an earlier rotation of the data key: %s was sealed under the new data key "+
			"already, and %s now holds it. Run `e2b-mcp keys rotate-data` again for another new key.\n", where, secrets)
		return nil
	}
	fmt.Fprintf(a.stdout, "Sealed the %d envd access tokens of %s again under a new data key, now held in %s.\n"+
		"Restart every server using it: one still holding the old key refuses calls on sandboxes. Copies of the\n"+
		"state store made before now (backups) still open under the old key.\n", done.Resealed, where, secrets)
	return nil
}
