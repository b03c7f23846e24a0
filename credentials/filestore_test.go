package credentials

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// masterKey writes a master key file (mode 0600) in a directory of its own and returns its path and the key.
func masterKey(t testing.TB, encode func([]byte) []byte) (string, []byte) {
	t.Helper()
	key := bytes.Repeat([]byte{0}, MasterKeySize)
	for i := range key {
		key[i] = byte(i*7 + len(t.Name()))
	}
	path := filepath.Join(t.TempDir(), "master.key")
	if err := os.WriteFile(path, encode(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

func hexForm(k []byte) []byte { return []byte(hex.EncodeToString(k) + "\n") }

func newFileStore(t *testing.T) (*FileStore, string, string) {
	t.Helper()
	mk, _ := masterKey(t, hexForm)
	path := filepath.Join(t.TempDir(), "state", "keys.json")
	s, err := OpenFileStore(path, mk)
	if err != nil {
		t.Fatal(err)
	}
	return s, path, mk
}

func wantErr(t *testing.T, err error, kind error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Errorf("error %q does not wrap %v", err, kind)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func TestFileStoreRoundTrip(t *testing.T) {
	s, path, mk := newFileStore(t)
	if _, err := APIKey(s, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("before any login: %v", err)
	}
	if err := SetAPIKey(s, "alice", testKey); err != nil {
		t.Fatal(err)
	}
	if got, err := APIKey(s, "alice"); err != nil || got != testKey {
		t.Fatalf("APIKey = %q, %v", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key store mode: %v, %v; want 0600", fi.Mode(), err)
	}

	// Another process (another FileStore on the same files) sees the key, and its logout is seen here at once.
	other, err := OpenFileStore(path, mk)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := APIKey(other, "alice"); err != nil || got != testKey {
		t.Fatalf("from a second opening: %q, %v", got, err)
	}
	if err := DeleteAPIKey(other, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := APIKey(s, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("after logout elsewhere: %v", err)
	}
	if err := DeleteAPIKey(s, "alice"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("second logout: %v", err)
	}
	if !strings.Contains(s.String(), path) || !strings.Contains(s.String(), mk) {
		t.Errorf("String() = %q; want both files named", s)
	}
}

// The key store looks at its file on every read and parses it again only when it changed. A change made through
// another opening is seen at the next read even when the file's size and modification time are as they were
// (keys of one length, a clock stepped back): each write is a new file.
func TestFileStoreFollowsAnotherWriter(t *testing.T) {
	s, path, mk := newFileStore(t)
	other, err := OpenFileStore(path, mk)
	if err != nil {
		t.Fatal(err)
	}
	// Every write lands at one time, as on a clock stepped back to it each time.
	stepped := time.Unix(1_700_000_000, 0)
	followsAnotherWriter(t, s, other, func() {
		if err := os.Chtimes(path, stepped, stepped); err != nil {
			t.Fatal(err)
		}
	})
}

// Two logins elsewhere between two reads: the second login's file may get the inode number of the file the
// reader last parsed (freed by the first login; ext4 gives it out again at once) and, with keys of one length and
// a modification time kept (a clock stepped back, a copy that keeps times), its size and time too.
func TestFileStoreTwoWritesBetweenReads(t *testing.T) {
	s, path, mk := newFileStore(t)
	other, err := OpenFileStore(path, mk)
	if err != nil {
		t.Fatal(err)
	}
	key := func(n int) string { return "e2b_" + strings.Repeat(string(rune('0'+n)), 40) }
	stepped := time.Unix(1_700_000_000, 0)
	set := func(n int) {
		t.Helper()
		if err := SetAPIKey(other, "alice", key(n)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, stepped, stepped); err != nil {
			t.Fatal(err)
		}
	}
	for round := 1; round <= 3; round++ {
		set(1)
		if got, err := APIKey(s, "alice"); err != nil || got != key(1) {
			t.Fatalf("round %d, first read: %q, %v", round, LastFour(got), err)
		}
		set(2)
		set(3)
		if got, err := APIKey(s, "alice"); err != nil || got != key(3) {
			t.Fatalf("round %d: after two logins elsewhere: APIKey = %q, %v; want the key ending in %s", round,
				LastFour(got), err, LastFour(key(3)))
		}
	}
}

// Nothing secret is in the file: neither the key, nor the master key, in any usual encoding.
func TestFileStoreKeepsNothingInTheClear(t *testing.T) {
	mk, key := masterKey(t, hexForm)
	path := filepath.Join(t.TempDir(), "keys.json")
	s, err := OpenFileStore(path, mk)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetAPIKey(s, "alice", testKey); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{testKey, strings.TrimPrefix(testKey, "e2b_"), hex.EncodeToString(key),
		base64.StdEncoding.EncodeToString(key), base64.StdEncoding.EncodeToString([]byte(testKey)), string(key)} {
		if bytes.Contains(data, []byte(secret)) {
			t.Fatalf("the key store holds a secret in the clear:\n%s", data)
		}
	}
}

func TestMasterKeyForms(t *testing.T) {
	for name, enc := range map[string]func([]byte) []byte{
		"raw":       func(k []byte) []byte { return k },
		"hex":       hexForm,
		"base64":    func(k []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(k) + "\n") },
		"base64url": func(k []byte) []byte { return []byte(base64.RawURLEncoding.EncodeToString(k)) },
	} {
		t.Run(name, func(t *testing.T) {
			mk, _ := masterKey(t, enc)
			path := filepath.Join(t.TempDir(), "keys.json")
			s, err := OpenFileStore(path, mk)
			if err != nil {
				t.Fatal(err)
			}
			if err := SetAPIKey(s, "alice", testKey); err != nil {
				t.Fatal(err)
			}
			// The same key in hex opens what the other form sealed.
			raw, err := readMasterKey(mk)
			if err != nil {
				t.Fatal(err)
			}
			hexFile := filepath.Join(t.TempDir(), "hex.key")
			if err := os.WriteFile(hexFile, hexForm(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			again, err := OpenFileStore(path, hexFile)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := APIKey(again, "alice"); err != nil || got != testKey {
				t.Fatalf("APIKey = %q, %v", got, err)
			}
		})
	}
}

func TestMasterKeyProblemsNameTheFile(t *testing.T) {
	_, path, mk := newFileStore(t)
	s, _ := OpenFileStore(path, mk)
	if err := SetAPIKey(s, "alice", testKey); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	dir := t.TempDir()
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrong := write("wrong.key", hexForm(bytes.Repeat([]byte{9}, 32)), 0o600)
	shared := write("shared.key", hexForm(bytes.Repeat([]byte{9}, 32)), 0o644)
	short := write("short.key", []byte("0123abcd\n"), 0o600)
	secretText := "correct horse battery staple, not a key"
	words := write("words.key", []byte(secretText), 0o600)
	missing := filepath.Join(dir, "missing.key")

	for _, tc := range []struct {
		name, file string
		parts      []string
	}{
		{"wrong key", wrong, []string{wrong, "does not open the key store " + path}},
		{"group readable", shared, []string{shared, "mode 0644", "chmod 600"}},
		{"too short", short, []string{short, "does not hold a 32-byte key"}},
		{"not a key", words, []string{words, "does not hold a 32-byte key"}},
		{"missing", missing, []string{missing, "does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenFileStore(path, tc.file)
			wantErr(t, err, ErrMasterKey, tc.parts...)
			if strings.Contains(err.Error(), secretText) || strings.Contains(err.Error(), "0123abcd") {
				t.Errorf("the error shows the file's content: %v", err)
			}
		})
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a refused master key changed the key store")
	}
}

func TestMasterKeyBesideTheStoreIsRefused(t *testing.T) {
	dir := t.TempDir()
	mk := filepath.Join(dir, "master.key")
	if err := os.WriteFile(mk, hexForm(bytes.Repeat([]byte{1}, 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{filepath.Join(dir, "keys.json"), filepath.Join(filepath.Dir(dir), "keys.json")} {
		_, err := OpenFileStore(store, mk)
		wantErr(t, err, ErrMasterKey, mk, "beside the key store")
	}
	// Through a symbolic link to the same directory too.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		optional.Skip(t, "no symbolic links here: "+err.Error())
	}
	_, err := OpenFileStore(filepath.Join(link, "keys.json"), mk)
	wantErr(t, err, ErrMasterKey, "beside the key store")
}

// An attacker who can write the store file cannot make one owner's key pass for another's: each sealed entry is
// bound to its account.
func TestFileStoreEntriesAreBoundToTheirAccount(t *testing.T) {
	s, path, _ := newFileStore(t)
	if err := SetAPIKey(s, "mallory", testKey); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var f keyStoreJSON
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	f.Secrets["alice"] = f.Secrets["mallory"]
	data, _ = json.Marshal(f)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a new modification time for the reader's cache on coarse clocks
	_, err := APIKey(s, "alice")
	wantErr(t, err, ErrKeyStore, `"alice"`, "does not open")
}

func TestFileStoreRefusesADamagedOrSharedFile(t *testing.T) {
	mk, _ := masterKey(t, hexForm)
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		data  string
		mode  os.FileMode
		parts []string
	}{
		"garbage":         {"not json", 0o600, []string{"is not an e2b-mcp key store"}},
		"future version":  {`{"version": 9, "check": "", "secrets": {}}`, 0o600, []string{"version 9"}},
		"no check value":  {`{"version": 1, "check": "", "secrets": {}}`, 0o600, []string{"does not open the key store"}},
		"world readable":  {`{"version": 1, "check": "", "secrets": {}}`, 0o644, []string{"mode 0644"}},
		"unknown members": {`{"version": 1, "check": "", "secrets": {}, "plain": "x"}`, 0o600, []string{"unknown field"}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			if err := os.WriteFile(path, []byte(tc.data), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := OpenFileStore(path, mk)
			wantErr(t, err, nil, append(tc.parts, path)...)
			if got, _ := os.ReadFile(path); string(got) != tc.data {
				t.Fatal("the refused file was changed")
			}
		})
	}
}

// Two processes storing keys at once both keep theirs: writes take the lock file and re-read the store.
func TestFileStoreConcurrentWriters(t *testing.T) {
	_, path, mk := newFileStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			s, err := OpenFileStore(path, mk)
			if err == nil {
				err = SetAPIKey(s, fmt.Sprintf("owner%d", i), testKey)
			}
			errs <- err
		})
	}
	waitfor.Return(t, time.Minute, "the concurrent writers of the secrets file", wg.Wait)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, _ := OpenFileStore(path, mk)
	accounts, err := s.Accounts()
	if err != nil || len(accounts) != 20 {
		t.Fatalf("accounts after 20 concurrent logins: %v, %v", accounts, err)
	}
}

// The state store's data key lives in whichever secret store is in use; in the key store it is sealed like any
// other secret, and a state store sealed under it opens again from a new process.
func TestStateKeysInFileStore(t *testing.T) {
	s, path, mk := newFileStore(t)
	first, err := StateKeys(s).DataKey()
	if err != nil || len(first) != state.DataKeySize {
		t.Fatalf("DataKey = %x, %v", first, err)
	}
	again, _ := OpenFileStore(path, mk)
	second, err := StateKeys(again).DataKey()
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("data key not stable across openings: %x vs %x, %v", first, second, err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte(base64.StdEncoding.EncodeToString(first))) {
		t.Fatal("the data key is in the key store in the clear")
	}

	dir := t.TempDir()
	st, err := state.Open(dir, state.Options{Keys: StateKeys(s)})
	if err != nil {
		t.Fatal(err)
	}
	rec := state.SandboxRecord{Owner: "alice", ID: "sbx1", AccessToken: "envd-token", State: state.StateRunning}
	if err := st.PutSandbox(rec); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = state.Open(dir, state.Options{Keys: StateKeys(again)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, err := st.Sandbox("alice", "sbx1"); err != nil || got.AccessToken != "envd-token" {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
}

func TestStateKeysErrors(t *testing.T) {
	keyring.MockInit()
	k := Keyring{Service: "svc"}
	if err := keyring.Set("svc", DataKeyAccount, "bm90IGEga2V5"); err != nil { // base64 of "not a key"
		t.Fatal(err)
	}
	_, err := StateKeys(k).DataKey()
	wantErr(t, err, nil, `"state-data-key"`, `does not hold a 32-byte`)
	if strings.Contains(err.Error(), "bm90IGEga2V5") || strings.Contains(err.Error(), "not a key") {
		t.Fatal("the error reveals the entry")
	}

	keyring.MockInitWithError(errors.New("no secret service"))
	t.Cleanup(keyring.MockInit)
	_, err = StateKeys(k).DataKey()
	wantErr(t, err, nil, "OS keyring", "no secret service", "--master-key-file")
}
