package credentials

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// newMasterKeyFile writes a fresh random master key (64 hex digits, mode 0600) in a directory of its own.
func newMasterKeyFile(t *testing.T) (string, []byte) {
	t.Helper()
	key := make([]byte, MasterKeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "master.key")
	if err := os.WriteFile(path, hexForm(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// storeSecrets are what a key store holds in use: members' E2B keys, a credential and the state's data key.
var storeSecrets = map[string]string{
	"alice":                         testKey,
	"bob":                           "e2b_" + strings.Repeat("b0", 20),
	valueAccount("alice", "github"): "ghp_credentialvalue",
	DataKeyAccount:                  "c2VjcmV0IGRhdGEga2V5IG9mIHRoZSBzdGF0ZSBzdG9yZQ==",
}

// filledStore makes a key store holding storeSecrets under a fresh master key.
func filledStore(t *testing.T) (path, oldKey string) {
	t.Helper()
	oldKey, _ = newMasterKeyFile(t)
	path = filepath.Join(t.TempDir(), "state", "keys.json")
	s, err := OpenFileStore(path, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	for a, v := range storeSecrets {
		if err := s.SetSecret(a, v); err != nil {
			t.Fatal(err)
		}
	}
	return path, oldKey
}

// wantWhole checks that the store at path opens under key with every secret intact, and that refused does not
// open it.
func wantWhole(t *testing.T, path, key, refused string) *FileStore {
	t.Helper()
	s, err := OpenFileStore(path, key)
	if err != nil {
		t.Fatalf("the store does not open under %s: %v", key, err)
	}
	for a, want := range storeSecrets {
		if got, err := s.Secret(a); err != nil || got != want {
			t.Errorf("entry %q: %v (intact: %v)", a, err, got == want)
		}
	}
	if accounts, _ := s.Accounts(); len(accounts) != len(storeSecrets) {
		t.Errorf("the store holds %d entries, want %d", len(accounts), len(storeSecrets))
	}
	_, err = OpenFileStore(path, refused)
	wantErr(t, err, ErrMasterKey, "the master key in "+refused+" does not open the key store "+path)
	return s
}

// noSecretInDir checks that no file beside the store (the store, its lock, temporary files a crash left) holds a
// secret or a master key in the clear.
func noSecretInDir(t *testing.T, dir string, masterKeys ...[]byte) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range storeSecrets {
			if bytes.Contains(data, []byte(v)) {
				t.Errorf("%s holds a secret in the clear", e.Name())
			}
		}
		for _, k := range masterKeys {
			if bytes.Contains(data, []byte(hex.EncodeToString(k))) || bytes.Contains(data, k) {
				t.Errorf("%s holds a master key", e.Name())
			}
		}
	}
}

func TestRotateMasterKey(t *testing.T) {
	path, oldKey := filledStore(t)
	newKey, newRaw := newMasterKeyFile(t)
	before, _ := os.ReadFile(path)

	s, err := OpenFileStore(path, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := RotateMasterKey(s, newKey)
	if err != nil || n != len(storeSecrets) {
		t.Fatalf("RotateMasterKey = %d, %v; want %d entries re-sealed", n, err, len(storeSecrets))
	}
	wantWhole(t, path, newKey, oldKey)
	if after, _ := os.ReadFile(path); bytes.Equal(before, after) {
		t.Fatal("the store file did not change")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the store's mode after rotation: %v, %v", fi.Mode(), err)
	}
	noSecretInDir(t, filepath.Dir(path), newRaw)

	// The store that did the rotation goes on under the new key: it reads and writes, and what it writes opens
	// under the new key.
	if s.MasterKey().File() != newKey || !strings.Contains(s.String(), newKey) {
		t.Errorf("after rotation the store says %s", s)
	}
	if got, err := s.Secret("alice"); err != nil || got != testKey {
		t.Errorf("reading after rotation: %v", err)
	}
	if err := s.SetSecret("carol", testKey); err != nil {
		t.Fatal(err)
	}
	if o, err := OpenFileStore(path, newKey); err != nil {
		t.Fatal(err)
	} else if got, err := o.Secret("carol"); err != nil || got != testKey {
		t.Errorf("a write after rotation: %v", err)
	}
}

// Every mistake of an operator, and every store that must not be re-sealed, is refused with the file at fault
// named and the store left as it was.
func TestRotateMasterKeyRefusals(t *testing.T) {
	path, oldKey := filledStore(t)
	newKey, _ := newMasterKeyFile(t)
	oldRaw, _ := os.ReadFile(oldKey)

	sameKey := filepath.Join(t.TempDir(), "copy.key")
	if err := os.WriteFile(sameKey, oldRaw, 0o600); err != nil {
		t.Fatal(err)
	}
	rawSame := filepath.Join(t.TempDir(), "raw.key") // the same key in another encoding
	decoded, _ := hex.DecodeString(strings.TrimSpace(string(oldRaw)))
	if err := os.WriteFile(rawSame, decoded, 0o600); err != nil {
		t.Fatal(err)
	}
	open, _ := newMasterKeyFile(t)
	if err := os.Chmod(open, 0o640); err != nil {
		t.Fatal(err)
	}
	beside := filepath.Join(filepath.Dir(path), "new.key")
	if err := os.WriteFile(beside, hexForm(bytes.Repeat([]byte{9}, 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("0123abcd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.key")
	wrongOld, _ := newMasterKeyFile(t)

	for _, tc := range []struct {
		name             string
		store, old, next string
		kind             error
		parts            []string
	}{
		{"the same key file", path, oldKey, oldKey, ErrMasterKey, []string{"holds the same key as " + oldKey}},
		{"a copy of the old key", path, oldKey, sameKey, ErrMasterKey, []string{sameKey + " holds the same key"}},
		{"the old key in another encoding", path, oldKey, rawSame, ErrMasterKey, []string{rawSame + " holds the same key"}},
		{"a new key others can read", path, oldKey, open, ErrMasterKey, []string{open + " has mode 0640"}},
		{"a new key beside the store", path, oldKey, beside, ErrMasterKey, []string{beside, "beside the key store"}},
		{"a new key file too short", path, oldKey, short, ErrMasterKey, []string{short, "does not hold a 32-byte key"}},
		{"no new key file", path, oldKey, missing, ErrMasterKey, []string{missing + " does not exist"}},
		{"an old key that does not open the store", path, wrongOld, newKey, ErrMasterKey, []string{"the master key in " + wrongOld + " does not open the key store " + path}},
		{"no store", filepath.Join(t.TempDir(), "keys.json"), oldKey, newKey, ErrKeyStore, []string{"there is no key store at"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.store)
			n, err := RotateFileStore(tc.store, tc.old, tc.next)
			wantErr(t, err, tc.kind, tc.parts...)
			if n != 0 {
				t.Errorf("%d entries reported re-sealed", n)
			}
			if after, _ := os.ReadFile(tc.store); !bytes.Equal(before, after) {
				t.Error("a refused rotation changed the store")
			}
		})
	}
	wantWhole(t, path, oldKey, newKey)

	// An entry that does not open (moved under another account by someone who can write the file) stops the
	// rotation before anything is written: re-sealing must not launder it.
	data, _ := os.ReadFile(path)
	forged := bytes.Replace(data, []byte(`"bob"`), []byte(`"mallory"`), 1)
	if err := os.WriteFile(path, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := RotateFileStore(path, oldKey, newKey)
	wantErr(t, err, ErrKeyStore, `the entry "mallory"`, "nothing was re-sealed")
	if after, _ := os.ReadFile(path); !bytes.Equal(forged, after) {
		t.Error("a rotation that found a damaged entry changed the store")
	}
}

// writeSteps are the steps of writing the store file, in order; the file is the new one from "renamed" on.
var writeSteps = []string{"written", "synced", "renamed", "directory synced"}

func sealedUnderNew(step string) bool { return step == "renamed" || step == "directory synced" }

// A rotation that fails between two steps of writing the store leaves it whole under one key, says which, and
// the store that tried goes on working under that key.
func TestRotateMasterKeyFailingBetweenSteps(t *testing.T) {
	for _, step := range writeSteps {
		t.Run(step, func(t *testing.T) {
			path, oldKey := filledStore(t)
			newKey, _ := newMasterKeyFile(t)
			s, err := OpenFileStore(path, oldKey)
			if err != nil {
				t.Fatal(err)
			}
			failure := errors.New("injected failure")
			s.afterStep = func(at string) error {
				if at == step {
					return failure
				}
				return nil
			}
			_, err = RotateMasterKey(s, newKey)
			if !errors.Is(err, failure) {
				t.Fatalf("RotateMasterKey = %v, want the injected failure", err)
			}
			s.afterStep = nil
			now, other := oldKey, newKey
			if sealedUnderNew(step) {
				now, other = newKey, oldKey
				wantErr(t, err, nil, "is sealed under the master key in "+newKey+" now")
			}
			wantWhole(t, path, now, other)
			if s.MasterKey().File() != now {
				t.Errorf("the store is used under %s, but its file is sealed under %s", s.MasterKey().File(), now)
			}
			if err := s.SetSecret("carol", testKey); err != nil {
				t.Fatalf("writing after the failed rotation: %v", err)
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 2 {
				t.Errorf("files left beside the store: %v", entries)
			}
		})
	}
}

const (
	crashStepEnv = "E2B_MCP_TEST_CRASH_STEP"
	crashExit    = 17
)

// A rotation whose process dies between two steps of writing the store (this test runs itself as that process)
// leaves it whole under the old key or whole under the new one, never a mix and never a secret in the clear; a
// second run finishes the job, or says that it is done.
func TestRotateMasterKeyCrashBetweenSteps(t *testing.T) {
	if step := os.Getenv(crashStepEnv); step != "" {
		crashingRotation(step)
		return
	}
	for _, step := range writeSteps {
		t.Run(step, func(t *testing.T) {
			path, oldKey := filledStore(t)
			newKey, newRaw := newMasterKeyFile(t)
			oldHex, _ := os.ReadFile(oldKey)
			oldRaw, _ := hex.DecodeString(strings.TrimSpace(string(oldHex)))
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRotateMasterKeyCrashBetweenSteps$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashStepEnv+"="+step, "E2B_MCP_TEST_STORE="+path,
				"E2B_MCP_TEST_OLD_KEY="+oldKey, "E2B_MCP_TEST_NEW_KEY="+newKey)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != crashExit {
				t.Fatalf("the rotating process did not die at %q: %v\n%s", step, err, out)
			}

			now, other := oldKey, newKey
			if sealedUnderNew(step) {
				now, other = newKey, oldKey
			}
			wantWhole(t, path, now, other)
			noSecretInDir(t, filepath.Dir(path), oldRaw, newRaw)
			if left := len(tempFiles(t, path)); left != 1 && !sealedUnderNew(step) {
				t.Fatalf("%d temporary files after a crash before the rename, want the one it was writing", left)
			}

			n, err := RotateFileStore(path, oldKey, newKey)
			if sealedUnderNew(step) {
				wantErr(t, err, ErrMasterKey, "sealed under the master key in "+newKey+" already")
			} else if err != nil || n != len(storeSecrets) {
				t.Fatalf("rotating again after the crash: %d, %v", n, err)
			}
			s := wantWhole(t, path, newKey, oldKey)
			if err := s.SetSecret("carol", testKey); err != nil {
				t.Fatal(err)
			}
			// The next writer clears what the crash left.
			if left := tempFiles(t, path); len(left) != 0 {
				t.Errorf("temporary files still beside the store: %v", left)
			}
		})
	}
}

// tempFiles are the temporary files of writes of the store at path found beside it.
func tempFiles(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "."+filepath.Base(path)+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// A process still using the old master key after the rotation (a server not yet restarted) can neither read
// nor write the store, says which key file is at fault, and changes nothing; of two rotations at once, one wins
// and the other finds the store sealed under a key it does not hold.
func TestRotateMasterKeyWhileOthersUseTheStore(t *testing.T) {
	path, oldKey := filledStore(t)
	running, err := OpenFileStore(path, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := running.Secret("alice"); err != nil { // cached as it was before the rotation
		t.Fatal(err)
	}
	first, _ := newMasterKeyFile(t)
	third, _ := newMasterKeyFile(t)
	a, errA := OpenFileStore(path, oldKey)
	b, errB := OpenFileStore(path, oldKey)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	errs := make(chan error, 2)
	go func() { _, err := RotateMasterKey(a, first); errs <- err }()
	go func() { _, err := RotateMasterKey(b, third); errs <- err }()
	err1 := waitfor.Recv(t, errs, time.Minute, "the first rotation to end")
	err2 := waitfor.Recv(t, errs, time.Minute, "the second rotation to end")
	if (err1 == nil) == (err2 == nil) {
		t.Fatalf("two rotations at once: %v and %v; want exactly one to succeed", err1, err2)
	}
	loser := err1
	if loser == nil {
		loser = err2
	}
	wantErr(t, loser, ErrMasterKey, "the master key in "+oldKey+" does not open the key store")
	winner, refused := first, third
	if a.MasterKey().File() != first {
		winner, refused = third, first
	}
	wantWhole(t, path, winner, refused)

	_, err = running.Secret("alice")
	wantErr(t, err, ErrMasterKey, "the master key in "+oldKey+" does not open the key store "+path)
	err = running.SetSecret("dave", testKey)
	wantErr(t, err, ErrMasterKey, "the master key in "+oldKey+" does not open the key store "+path)
	wantWhole(t, path, winner, oldKey)
}

// crashingRotation is the process TestRotateMasterKeyCrashBetweenSteps starts: it rotates the store named in its
// environment and dies (no deferred clean-up runs, as in a crash) right after step.
func crashingRotation(step string) {
	s, err := OpenFileStore(os.Getenv("E2B_MCP_TEST_STORE"), os.Getenv("E2B_MCP_TEST_OLD_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s.afterStep = func(at string) error {
		if at == step {
			os.Exit(crashExit)
		}
		return nil
	}
	_, err = RotateMasterKey(s, os.Getenv("E2B_MCP_TEST_NEW_KEY"))
	fmt.Fprintf(os.Stderr, "the rotation ended without reaching %q: %v\n", step, err)
	os.Exit(1)
}
