package cli

import (
	"path/filepath"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/server"
)

// DefaultKeyStoreFile is the encrypted key store's file in the state directory.
const DefaultKeyStoreFile = "keys.json"

// keyStoreFlags choose where E2B API keys (and the state store's data key) are kept: the OS keyring, or with
// --master-key-file the encrypted key store, for a host without a desktop keyring: its file, or with --store the
// PostgreSQL database that replicas on several hosts share.
type keyStoreFlags struct{ masterKeyFile, keyStore string }

func addKeyStoreFlags(f *flags) *keyStoreFlags {
	k := &keyStoreFlags{}
	f.StringVar(&k.masterKeyFile, "master-key-file", "", "keep keys in the encrypted key store, sealed under the "+
		"32-byte key in this file (for hosts without an OS keyring; mode 0600, kept outside the state directory); with "+
		"--store the store is in that database (default: the OS keyring)")
	f.StringVar(&k.keyStore, "key-store", "", "the encrypted key store's file, with --master-key-file and no "+
		"--store (default STATE_DIR/"+DefaultKeyStoreFile+")")
	return k
}

// open is the chosen store. stateDir places the key store file when --key-store is not given; with storeURL (a
// postgres:// URL) and a master key, the key store is in that database.
func (k *keyStoreFlags) open(f *flags, stateDir, storeURL string) (credentials.SecretStore, error) {
	switch {
	case k.masterKeyFile == "" && k.keyStore != "":
		return nil, f.usageErrorf("--key-store needs --master-key-file: the key store is sealed under the master key")
	case k.masterKeyFile == "":
		return credentials.NewKeyringCache(credentials.Keyring{}), nil
	case storeURL != "" && k.keyStore != "":
		return nil, f.usageErrorf("--key-store and --store do not go together: with --store the key store is in the database")
	case storeURL != "":
		if err := checkStoreURL(f, storeURL); err != nil {
			return nil, err
		}
		return credentials.OpenDatabaseStore(storeURL, k.masterKeyFile)
	}
	path := k.keyStore
	if path == "" {
		path = filepath.Join(stateDir, DefaultKeyStoreFile)
	}
	return credentials.OpenFileStore(path, k.masterKeyFile)
}

// checkStoreURL refuses a --store that is not a postgres:// URL, as serve does; "" (no --store) is fine.
func checkStoreURL(f *flags, storeURL string) error {
	if err := server.CheckStoreURL(storeURL); err != nil {
		return f.usageErrorf("%v", err)
	}
	return nil
}
