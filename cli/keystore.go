package cli

import (
	"path/filepath"

	"github.com/e2b-mcp/e2b-mcp/credentials"
)

// DefaultKeyStoreFile is the encrypted key store's file in the state directory.
const DefaultKeyStoreFile = "keys.json"

// keyStoreFlags choose where E2B API keys (and the state store's data key) are kept: the OS keyring, or with
// --master-key-file the encrypted key store, for a host without a desktop keyring.
type keyStoreFlags struct{ masterKeyFile, keyStore string }

func addKeyStoreFlags(f *flags) *keyStoreFlags {
	k := &keyStoreFlags{}
	f.StringVar(&k.masterKeyFile, "master-key-file", "", "keep keys in the encrypted key store, sealed under the 32-byte key in this file "+
		"(for hosts without an OS keyring; mode 0600, kept outside the state directory) (default: the OS keyring)")
	f.StringVar(&k.keyStore, "key-store", "", "the encrypted key store's file, with --master-key-file (default STATE_DIR/"+DefaultKeyStoreFile+")")
	return k
}

// open is the chosen store. stateDir places the key store when --key-store is not given.
func (k *keyStoreFlags) open(f *flags, stateDir string) (credentials.SecretStore, error) {
	if k.masterKeyFile == "" {
		if k.keyStore != "" {
			return nil, f.usageErrorf("--key-store needs --master-key-file: the key store is sealed under the master key")
		}
		return credentials.Keyring{}, nil
	}
	path := k.keyStore
	if path == "" {
		path = filepath.Join(stateDir, DefaultKeyStoreFile)
	}
	return credentials.OpenFileStore(path, k.masterKeyFile)
}
