//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package credentials

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A KeyringCache on the real Secret Service serves a remembered secret only while the entry is the one it read:
// a replace, a delete or a new entry written by another writer is seen by the next read, even within the second
// of the last read (Modified counts whole seconds), and a keyring that is locked or whose daemon went gives the
// error a plain Keyring gives, never the remembered secret.
func TestKeyringCacheOnTheSecretService(t *testing.T) {
	if !inPrivateKeyring(t) {
		return
	}
	const service = "e2b-mcp-cache-test"
	writer := Keyring{Service: service} // another writer, as `e2b-mcp auth login` in another terminal is
	key := func(n int) string { return "e2b_" + strings.Repeat(string(rune('0'+n)), 40) }
	newCache := func() (*KeyringCache, *atomic.Int32) {
		c := NewKeyringCache(Keyring{Service: service})
		var reads atomic.Int32
		read := c.read
		c.read = func(account string) (string, error) {
			reads.Add(1)
			return read(account)
		}
		return c, &reads
	}
	mustSet := func(t *testing.T, account, secret string) {
		t.Helper()
		if err := writer.SetSecret(account, secret); err != nil {
			t.Fatal(err)
		}
	}
	wants := func(t *testing.T, c *KeyringCache, account, want, when string) {
		t.Helper()
		if got, err := c.Secret(account); err != nil || got != want {
			t.Fatalf("%s: Secret = %q, %v; want the key ending in %s", when, LastFour(got), err, LastFour(want))
		}
	}
	wantsNone := func(t *testing.T, c *KeyringCache, account, when string) {
		t.Helper()
		if got, err := c.Secret(account); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: Secret = %q, %v; want ErrNotFound", when, LastFour(got), err)
		}
	}

	t.Run("follows the writer", func(t *testing.T) {
		c, reads := newCache()
		mustSet(t, "alice", key(1))
		awaitNextSecond()
		wants(t, c, "alice", key(1), "first read")
		wants(t, c, "alice", key(1), "second read")
		if n := reads.Load(); n != 1 {
			t.Errorf("two reads of an unchanged entry read the keyring %d times; want once, then memory", n)
		}

		mustSet(t, "alice", key(2))
		wants(t, c, "alice", key(2), "after a new login")
		if err := writer.DeleteSecret("alice"); err != nil {
			t.Fatal(err)
		}
		wantsNone(t, c, "alice", "after a logout")
		mustSet(t, "alice", key(3))
		wants(t, c, "alice", key(3), "after a login that follows the logout")
		if err := writer.DeleteSecret("alice"); err != nil {
			t.Fatal(err)
		}
	})

	// An entry that is not there (the list of an owner who added no credentials, read at every create) is
	// remembered as absent while a search still finds none, and the next read after a login sees the login. The
	// login comes after another entry is deleted, so that the Secret Service may give the new entry that one's
	// path: the collection's list of items is then the same as when the absence was read.
	t.Run("an absence follows the writer", func(t *testing.T) {
		c, reads := newCache()
		wantsNone(t, c, "frank", "first read")
		wantsNone(t, c, "frank", "second read")
		if n := reads.Load(); n != 1 {
			t.Errorf("two reads of a missing entry read the keyring %d times; want once, then memory", n)
		}
		mustSet(t, "frank", key(1))
		wants(t, c, "frank", key(1), "after a login")
		if err := writer.DeleteSecret("frank"); err != nil {
			t.Fatal(err)
		}
		wantsNone(t, c, "frank", "after a logout")
		wantsNone(t, c, "frank", "read again after the logout")

		mustSet(t, "grace", key(2))
		wantsNone(t, c, "frank", "with another entry beside it")
		if err := writer.DeleteSecret("grace"); err != nil {
			t.Fatal(err)
		}
		mustSet(t, "frank", key(3))
		wants(t, c, "frank", key(3), "after another entry went and a login came")
		if err := writer.DeleteSecret("frank"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a replace within the second of the last read", func(t *testing.T) {
		c, _ := newCache()
		// The replace must come in the second the read was made in, when Modified may not move; a run that a
		// stall carried over a second boundary proves nothing and is tried again.
		for attempt := 0; ; attempt++ {
			if attempt == 5 {
				t.Fatal("five attempts to read and replace within one second were each carried past a second boundary")
			}
			awaitNextSecond()
			second := time.Now().Unix()
			mustSet(t, "bob", key(4))
			wants(t, c, "bob", key(4), "read after the first login")
			mustSet(t, "bob", key(5))
			got, err := c.Secret("bob")
			if time.Now().Unix() != second {
				continue
			}
			if err != nil || got != key(5) {
				t.Fatalf("a replace in the second of the read: Secret = %q, %v; want the new key", LastFour(got), err)
			}
			break
		}
		if err := writer.DeleteSecret("bob"); err != nil {
			t.Fatal(err)
		}
	})

	// A Secret Service item's secret may also be changed in place (Item.SetSecret: a password manager's edit),
	// which gnome-keyring does not announce with a signal; only Modified moves, and only to the second it is in.
	// An edit in the second of the entry's last change must still be seen, then and at every later read.
	t.Run("an edit in place within the second of the last change", func(t *testing.T) {
		c, _ := newCache()
		conn := sessionBus(t)
		for attempt := 0; ; attempt++ {
			if attempt == 5 {
				t.Fatal("five attempts to log in, read and edit within one second were each carried past a second " +
					"boundary")
			}
			awaitNextSecond()
			second := time.Now().Unix()
			mustSet(t, "oscar", key(1))
			wants(t, c, "oscar", key(1), "read after the login")
			setItemSecret(t, conn, service, "oscar", key(2))
			if time.Now().Unix() != second {
				continue
			}
			wants(t, c, "oscar", key(2), "after an edit in place in the second of the login")
			awaitNextSecond()
			wants(t, c, "oscar", key(2), "a second after the edit")
			break
		}
		if err := writer.DeleteSecret("oscar"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("readers beside a login", func(t *testing.T) {
		c, _ := newCache()
		mustSet(t, "erin", key(8))
		awaitNextSecond()
		wants(t, c, "erin", key(8), "before the login")
		var stop atomic.Bool
		done := make(chan error, 4)
		for range cap(done) {
			go func() {
				for !stop.Load() {
					if _, err := c.Secret("erin"); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		mustSet(t, "erin", key(9))
		for range 20 {
			wants(t, c, "erin", key(9), "a read begun after the login, beside other readers")
		}
		stop.Store(true)
		for range cap(done) {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("a reader beside the login: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a reader beside the login did not stop within 30 s")
			}
		}
	})

	// Locking the collection and stopping the daemon are why this test has a keyring of its own.
	// A locked keyring is asked to unlock, in a prompt (here none can be shown, so the prompt is dismissed at
	// once), and gives an error saying so. go-keyring's own unlock leaves a signal channel behind at every prompt,
	// and a goroutine at every later signal for each of them: the reads of a server whose keyring stays locked
	// must not pile them up.
	t.Run("a locked keyring", func(t *testing.T) {
		c, _ := newCache()
		mustSet(t, "carol", key(6))
		awaitNextSecond()
		wants(t, c, "carol", key(6), "before the lock")
		conn := sessionBus(t)
		lockLoginCollection(t, conn)
		wantsLocked := func(t *testing.T, account string) {
			t.Helper()
			got, err := c.Secret(account)
			if err == nil || !strings.Contains(err.Error(), "is locked") ||
				!strings.Contains(err.Error(), "in the OS keyring") || strings.Contains(err.Error(), key(6)) {
				t.Fatalf("with the keyring locked: Secret(%q) = %q, %v; want an error saying the keyring is locked",
					account, LastFour(got), err)
			}
		}
		wantsLocked(t, "carol")
		before := runtime.NumGoroutine()
		for range 30 {
			wantsLocked(t, "carol")
		}
		if grown := runtime.NumGoroutine() - before; grown > 20 {
			t.Errorf("30 reads of a locked keyring left %d more goroutines behind", grown)
		}
		// A login through the cache (the connect page's) is asked to unlock the same way.
		before = runtime.NumGoroutine()
		for range 30 {
			err := c.SetSecret("carol", key(7))
			if err == nil || !strings.Contains(err.Error(), "is locked") {
				t.Fatalf("a login with the keyring locked: %v; want an error saying the keyring is locked", err)
			}
		}
		if grown := runtime.NumGoroutine() - before; grown > 20 {
			t.Errorf("30 logins into a locked keyring left %d more goroutines behind", grown)
		}
		unlockLoginCollection(t, conn)
		wants(t, c, "carol", key(6), "after the unlock")

		// A remembered absence is not served from a locked keyring either.
		wantsNone(t, c, "heidi", "a missing entry")
		lockLoginCollection(t, conn)
		wantsLocked(t, "heidi")
		unlockLoginCollection(t, conn)
	})

	// go-keyring keeps its entries in the collection named "login" when there is one, and else in the one the
	// "default" alias names: a collection made or an alias moved while a key is remembered moves the entries.
	t.Run("the collection go-keyring uses changes", func(t *testing.T) {
		conn := sessionBus(t)
		deleteCollection(t, conn, loginCollectionPath)
		setDefaultCollection(t, conn, createCollection(t, conn, "first"))
		c, _ := newCache()
		mustSet(t, "frank", key(1))
		awaitNextSecond()
		wants(t, c, "frank", key(1), "read from the default collection")
		wants(t, c, "frank", key(1), "read again")

		setDefaultCollection(t, conn, createCollection(t, conn, "second"))
		wantsNone(t, c, "frank", "after the default alias moved to an empty collection (go-keyring reads the new "+
			"default)")
		mustSet(t, "frank", key(2))
		awaitNextSecond()
		wants(t, c, "frank", key(2), "after a login into the new default collection")

		if path := createCollection(t, conn, "login"); path != loginCollectionPath {
			t.Fatalf("the collection labelled login is %s; want %s", path, loginCollectionPath)
		}
		wantsNone(t, c, "frank", "after a login collection was made (go-keyring reads the login collection)")
		mustSet(t, "frank", key(3))
		wants(t, c, "frank", key(3), "after a login into the login collection")
		if err := writer.DeleteSecret("frank"); err != nil {
			t.Fatal(err)
		}
		wantsNone(t, c, "frank", "after a logout from the login collection")
	})

	// replacedInTheSecond logs account in with key(before), reads it through a new cache in the next second, runs
	// between, then replaces it with key(after) under the Secret Service's clock stepped back a second, so that the
	// replace keeps the Modified of the login, and wants key(after) from the cache. A replace carried into another
	// second of the stepped clock tries nothing, and is tried again.
	replacedInTheSecond := func(t *testing.T, account string, before, after int, between func(), what string) {
		setOffset := restartSecretServiceUnderClock(t)
		conn := sessionBus(t)
		for attempt := 0; ; attempt++ {
			if attempt == 5 {
				t.Fatal("five attempts to replace the entry within the second after its last change were each " +
					"carried past a second boundary")
			}
			setOffset(0)
			c, _ := newCache()
			awaitNextSecond()
			mustSet(t, account, key(before))
			first := itemModified(t, conn, service, account)
			awaitNextSecond()
			wants(t, c, account, key(before), "read in the second after the login")
			between()
			setOffset(-1)
			mustSet(t, account, key(after))
			if itemModified(t, conn, service, account) == first {
				wants(t, c, account, key(after), what)
				break
			}
		}
		setOffset(0)
		if err := writer.DeleteSecret(account); err != nil {
			t.Fatal(err)
		}
	}

	// Modified counts whole seconds of the Secret Service's clock: stepped back into the second of the last
	// change, it gives a replace the Modified the entry had, though the remembered read came a second later.
	t.Run("a clock stepped back to the second of the last change", func(t *testing.T) {
		replacedInTheSecond(t, "gina", 4, 5, func() {}, "after a login whose Modified is that of the last")
	})

	// The bus may drop the watcher's connection (a dbus-daemon restarted, a connection it found misbehaving):
	// changes signalled while it has none are told to no one, so a new connection counts as a change. The replace
	// comes under a clock stepped back, so that only the count, not Modified, can tell it.
	t.Run("the watcher's connection drops", func(t *testing.T) {
		replacedInTheSecond(t, "hank", 6, 7, func() {
			sessionWatcher.connMu.Lock()
			sessionWatcher.conn.Close()
			sessionWatcher.connMu.Unlock()
		}, "after the connection dropped and a login whose Modified is that of the last")
	})

	t.Run("the Secret Service stops", func(t *testing.T) {
		c, _ := newCache()
		mustSet(t, "dave", key(7))
		awaitNextSecond()
		wants(t, c, "dave", key(7), "before the stop")
		stopSecretService(t)
		// D-Bus starts gnome-keyring again on the next call, with the keyring locked as after a reboot.
		got, err := c.Secret("dave")
		_, plainErr := writer.Secret("dave")
		if err == nil || plainErr == nil || err.Error() != plainErr.Error() {
			t.Fatalf("after the Secret Service stopped: Secret = %q, %v; want Keyring's error %v", LastFour(got), err,
				plainErr)
		}
	})
}

// privateKeyringEnv names, in the run of this test binary that inPrivateKeyring starts, the test it is for.
const privateKeyringEnv = "E2B_MCP_TEST_PRIVATE_KEYRING"

// inPrivateKeyring runs the test t again in a private D-Bus session with a gnome-keyring of its own
// (tests/with-keyring.sh), as another run of this test binary, and reports true in that run, where the test's body
// goes. A test that locks the keyring or stops its daemon must not share it with tests running beside it.
func inPrivateKeyring(t *testing.T) bool {
	t.Helper()
	if os.Getenv(privateKeyringEnv) == t.Name() {
		return true
	}
	for _, tool := range []string{"dbus-run-session", "gnome-keyring-daemon"} {
		if _, err := exec.LookPath(tool); err != nil {
			optional.Missing(t, tool+" is missing: the test needs a Secret Service of its own (install dbus and gnome-keyring)")
		}
	}
	// The run ends itself at its -test.timeout; the context and WaitDelay only bound a wait for one that hangs.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../tests/with-keyring.sh", os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.v",
		"-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), privateKeyringEnv+"="+t.Name())
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a private keyring: %v\n%s", t.Name(), err, out)
	}
	return false
}

// awaitNextSecond waits for the next second of the wall clock, so that entries written before it have a Modified
// time (in whole seconds) older than any read after it: ones even a cache that went by Modified alone would
// remember, which makes each check that they are not served stale a check of more than Modified.
func awaitNextSecond() { time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) }

func serviceObject(conn *dbus.Conn) dbus.BusObject {
	return conn.Object(secretServiceName, secretServicePath)
}

// lockLoginCollection locks the collection go-keyring keeps its entries in, as a desktop's screen lock may.
func lockLoginCollection(t *testing.T, conn *dbus.Conn) {
	t.Helper()
	var locked []dbus.ObjectPath
	var prompt dbus.ObjectPath
	err := serviceObject(conn).Call("org.freedesktop.Secret.Service.Lock", 0, []dbus.ObjectPath{loginCollectionPath}).
		Store(&locked, &prompt)
	if err != nil || len(locked) != 1 {
		t.Fatalf("locking the login collection: %v (locked %v, prompt %s)", err, locked, prompt)
	}
}

// testKeyringPassword is the password tests/with-keyring.sh gives gnome-keyring.
const testKeyringPassword = "e2b-mcp-test"

// unlockLoginCollection unlocks it with the password tests/with-keyring.sh gave gnome-keyring, through
// gnome-keyring's own interface: the Secret Service's Unlock needs a prompt, which has no display here.
func unlockLoginCollection(t *testing.T, conn *dbus.Conn) {
	t.Helper()
	err := serviceObject(conn).Call("org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface.UnlockWithMasterPassword",
		0, loginCollectionPath, masterPassword(t, conn)).Err
	if err != nil {
		t.Fatalf("unlocking the login collection: %v", err)
	}
}

// masterPassword is testKeyringPassword as a Secret Service secret, in a plain session of conn.
func masterPassword(t *testing.T, conn *dbus.Conn) any {
	t.Helper()
	var ignored dbus.Variant
	var session dbus.ObjectPath
	err := serviceObject(conn).Call("org.freedesktop.Secret.Service.OpenSession", 0, "plain", dbus.MakeVariant("")).
		Store(&ignored, &session)
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		Session     dbus.ObjectPath
		Parameters  []byte
		Value       []byte
		ContentType string
	}{session, []byte{}, []byte(testKeyringPassword), "text/plain"}
}

// stopSecretService stops this private session's gnome-keyring-daemon and waits until its bus name is gone.
func stopSecretService(t *testing.T) {
	t.Helper()
	conn, err := dbus.SessionBus()
	if err != nil {
		t.Fatal(err)
	}
	bus := conn.BusObject()
	var pid uint32
	if err := bus.Call("org.freedesktop.DBus.GetConnectionUnixProcessID", 0, secretServiceName).Store(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(pid), syscall.SIGTERM); err != nil {
		t.Fatalf("stopping gnome-keyring-daemon (pid %d): %v", pid, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var owned bool
		if err := bus.Call("org.freedesktop.DBus.NameHasOwner", 0, secretServiceName).Store(&owned); err != nil {
			t.Fatal(err)
		}
		if !owned {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gnome-keyring-daemon (pid %d) still owns %s 30 s after SIGTERM", pid, secretServiceName)
		}
	}
}

func sessionBus(t *testing.T) *dbus.Conn {
	t.Helper()
	conn, err := dbus.SessionBus()
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// createCollection makes a collection with the password tests/with-keyring.sh gave gnome-keyring, through
// gnome-keyring's own interface (the Secret Service's CreateCollection needs a prompt), and returns its path.
func createCollection(t *testing.T, conn *dbus.Conn, label string) dbus.ObjectPath {
	t.Helper()
	var collection dbus.ObjectPath
	err := serviceObject(conn).Call("org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface.CreateWithMasterPassword",
		0, map[string]dbus.Variant{"org.freedesktop.Secret.Collection.Label": dbus.MakeVariant(label)},
		masterPassword(t, conn)).Store(&collection)
	if err != nil {
		t.Fatalf("making the collection %q: %v", label, err)
	}
	return collection
}

func deleteCollection(t *testing.T, conn *dbus.Conn, collection dbus.ObjectPath) {
	t.Helper()
	var prompt dbus.ObjectPath
	err := conn.Object(secretServiceName, collection).Call("org.freedesktop.Secret.Collection.Delete", 0).Store(&prompt)
	if err != nil || prompt != "/" {
		t.Fatalf("deleting the collection %s: %v (prompt %s)", collection, err, prompt)
	}
}

func setDefaultCollection(t *testing.T, conn *dbus.Conn, collection dbus.ObjectPath) {
	t.Helper()
	if err := serviceObject(conn).Call("org.freedesktop.Secret.Service.SetAlias", 0, "default", collection).Err; err != nil {
		t.Fatalf("making %s the default collection: %v", collection, err)
	}
}

// itemModified is the Modified time of account's entry of service, in the collection go-keyring uses.
func itemModified(t *testing.T, conn *dbus.Conn, service, account string) uint64 {
	t.Helper()
	var items []dbus.ObjectPath
	err := serviceObject(conn).Call("org.freedesktop.Secret.Service.SearchItems", 0,
		map[string]string{"service": service, "username": account}).Store(&items, new([]dbus.ObjectPath))
	if err != nil || len(items) != 1 {
		t.Fatalf("finding the entry %q of %q: %v (unlocked items %v)", account, service, err, items)
	}
	v, err := conn.Object(secretServiceName, items[0]).GetProperty(secretItem + ".Modified")
	modified, ok := v.Value().(uint64)
	if err != nil || !ok {
		t.Fatalf("the Modified time of %s: %v (%v)", items[0], err, v)
	}
	return modified
}

// setItemSecret changes the secret of account's entry of service in place, by the Secret Service's Item.SetSecret
// (as a password manager's edit does), not by replacing the item as go-keyring does.
func setItemSecret(t *testing.T, conn *dbus.Conn, service, account, secret string) {
	t.Helper()
	var items []dbus.ObjectPath
	err := serviceObject(conn).Call("org.freedesktop.Secret.Service.SearchItems", 0,
		map[string]string{"service": service, "username": account}).Store(&items, new([]dbus.ObjectPath))
	if err != nil || len(items) != 1 {
		t.Fatalf("finding the entry %q of %q: %v (unlocked items %v)", account, service, err, items)
	}
	var ignored dbus.Variant
	var session dbus.ObjectPath
	err = serviceObject(conn).Call("org.freedesktop.Secret.Service.OpenSession", 0, "plain", dbus.MakeVariant("")).
		Store(&ignored, &session)
	if err != nil {
		t.Fatal(err)
	}
	value := struct {
		Session     dbus.ObjectPath
		Parameters  []byte
		Value       []byte
		ContentType string
	}{session, []byte{}, []byte(secret), "text/plain"}
	if err := conn.Object(secretServiceName, items[0]).Call(secretItem+".SetSecret", 0, value).Err; err != nil {
		t.Fatalf("setting the secret of %s: %v", items[0], err)
	}
}

// restartSecretServiceUnderClock starts this private session's gnome-keyring again on a clock the test can step:
// libfaketime, reading the clock's offset from the real one from a file before each reading of the time. It
// returns the function that sets the offset, in seconds.
func restartSecretServiceUnderClock(t *testing.T) (setOffset func(seconds int)) {
	t.Helper()
	// The faketime program waits for the daemon it starts; its library, preloaded, is all the test needs.
	libs, _ := filepath.Glob("/usr/lib/*/faketime/libfaketime.so.1")
	more, _ := filepath.Glob("/usr/lib*/faketime/libfaketime.so.1")
	if libs = append(libs, more...); len(libs) == 0 {
		optional.Missing(t, "libfaketime is missing: the test steps the Secret Service's clock (install faketime)")
	}
	offsetFile := filepath.Join(t.TempDir(), "offset")
	setOffset = func(seconds int) {
		t.Helper()
		if err := os.WriteFile(offsetFile, fmt.Appendf(nil, "%+d\n", seconds), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setOffset(0)
	stopSecretService(t)
	// libfaketime reads the offset from the file anew at each reading of the clock. The monotonic clock stays
	// real, for the daemon's timers.
	cmd := exec.Command("gnome-keyring-daemon", "--unlock", "--components=secrets", "--daemonize")
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+libs[0], "FAKETIME_TIMESTAMP_FILE="+offsetFile,
		"FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1")
	cmd.Stdin = strings.NewReader(testKeyringPassword)
	// The daemon keeps what it inherits open: a file, not a pipe, takes its messages, or Run would wait for it.
	logPath := filepath.Join(t.TempDir(), "gnome-keyring.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("starting gnome-keyring-daemon under faketime: %v\n%s", err, out)
	}
	bus := sessionBus(t).BusObject()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var owned bool
		if err := bus.Call("org.freedesktop.DBus.NameHasOwner", 0, secretServiceName).Store(&owned); err != nil {
			t.Fatal(err)
		}
		if owned {
			return setOffset
		}
		if time.Now().After(deadline) {
			t.Fatalf("gnome-keyring-daemon under faketime did not own %s within 30 s", secretServiceName)
		}
	}
}

// BenchmarkKeyringCacheMissingEntry is a read of an entry that is not there, as the egress credentials of an
// owner who added none are read at every create, from the real Secret Service of tests/with-keyring.sh.
func BenchmarkKeyringCacheMissingEntry(b *testing.B) {
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		optional.Missing(b, "no D-Bus session: run the benchmark under tests/with-keyring.sh")
	}
	c := NewKeyringCache(Keyring{Service: "e2b-mcp-cache-bench"})
	for b.Loop() {
		if _, err := c.Secret("nobody"); !errors.Is(err, ErrNotFound) {
			b.Fatalf("Secret of a missing entry: %v; want ErrNotFound", err)
		}
	}
}

// A Secret Service that takes a call and never answers, or that asks for an unlock in a prompt that never
// completes (go-keyring waits for it with no bound), gives a KeyringCache's reads and writes a clear error within
// the cache's bound: never a call that hangs, never the key it remembered, never the key in the error. Reads the
// keyring does not answer do not pile up: callers wait for the one under way.
func TestKeyringCacheWhenTheSecretServiceHangs(t *testing.T) {
	if !inPrivateKeyring(t) {
		return
	}
	const service = "e2b-mcp-hang-test"
	remembered := "e2b_" + strings.Repeat("7", 40)
	c := NewKeyringCache(Keyring{Service: service})
	var reads atomic.Int32
	read := c.read
	c.read = func(account string) (string, error) {
		reads.Add(1)
		return read(account)
	}
	if err := c.SetSecret("ivan", remembered); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Secret("ivan"); err != nil || got != remembered {
		t.Fatalf("before the Secret Service hangs: Secret = %q, %v; want the key", LastFour(got), err)
	}
	// Long enough for the fake's answers on a loaded machine, short for the waits on what it never answers.
	c.answerBound = time.Second
	// Each wait is bounded far above the cache's bound, so that only a cache that ignores its bound fails it.
	within := func(t *testing.T, what string, op func() error) (err error) {
		t.Helper()
		waitfor.Return(t, 60*time.Second, what+" to return from a Secret Service that does not answer", func() {
			err = op()
		})
		return err
	}
	wantsNoAnswer := func(t *testing.T, what string, err error) {
		t.Helper()
		switch {
		case !errors.Is(err, errNoAnswer):
			t.Errorf("%s: %v; want the keyring's not answering", what, err)
		case !strings.Contains(err.Error(), `the OS keyring (service "`+service+`")`) ||
			!strings.Contains(err.Error(), "Unlock the keyring"):
			t.Errorf("%s: %q; want it to name the keyring and say what to do", what, err)
		case strings.Contains(err.Error(), remembered) || strings.Contains(err.Error(), "e2b_"):
			t.Errorf("%s: the error holds a key: %q", what, err)
		}
	}
	secretOf := func(account string) func() error {
		return func() error {
			got, err := c.Secret(account)
			if got != "" {
				return fmt.Errorf("Secret gave a key ending in %s", LastFour(got))
			}
			return err
		}
	}

	// One fake holds the Secret Service's name from here on: were the name let go, the bus would start
	// gnome-keyring again for the next call (go-keyring's calls left behind go on calling).
	stopSecretService(t)
	fake := takeSecretServiceName(t, service, "ivan")
	wantsNoAnswer(t, "a remembered key's read", within(t, "a remembered key's read", secretOf("ivan")))
	wantsNoAnswer(t, "another account's read", within(t, "another account's read", secretOf("judy")))
	wantsNoAnswer(t, "a login", within(t, "a login", func() error { return c.SetSecret("judy", remembered) }))
	wantsNoAnswer(t, "a logout", within(t, "a logout", func() error { return c.DeleteSecret("ivan") }))
	if n := len(fake.calls); n == 0 {
		t.Error("the silent Secret Service was never called: nothing was tried against it")
	}

	// Now it answers what the cache asks of an entry, and asks for the keyring to be unlocked when go-keyring
	// reads it, in a prompt that never completes.
	fake.answer()
	reads.Store(0)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- secretOf("ivan")() }()
	}
	for range cap(errs) {
		wantsNoAnswer(t, "a read waiting on a prompt", waitfor.Recv(t, errs, 60*time.Second,
			"a read waiting on a prompt to return"))
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("four reads at once from a Secret Service that does not answer started %d reads of the "+
			"keyring; want one, which the others wait for", n)
	}
	if fake.prompts.Load() == 0 {
		t.Error("go-keyring never asked the prompting Secret Service's prompt: the read did not wait on it")
	}

	// Now it says the entry is locked: the cache asks for the unlock itself, and gives up on the prompt (and
	// dismisses it) at its bound, without a read of the keyring.
	fake.locked.Store(true)
	reads.Store(0)
	prompts := fake.prompts.Load()
	wantsNoAnswer(t, "a read of a locked entry", within(t, "a read of a locked entry", secretOf("ivan")))
	if n := reads.Load(); n != 0 {
		t.Errorf("a read of an entry still locked read the keyring %d times; want none", n)
	}
	if fake.prompts.Load() == prompts {
		t.Error("the cache never asked the locked Secret Service's prompt")
	}
	waitfor.Until(t, 30*time.Second, "the prompt given up on to be dismissed", func() bool {
		return fake.dismissals.Load() > 0
	})
}

// fakeSecretService is a connection owning the Secret Service's name on the session bus. At first it takes
// every call (counted in calls) and answers none; after answer, it answers what a KeyringCache and go-keyring ask
// of a Secret Service whose login collection holds one entry (locked or not), except that unlocking the
// collection asks for a prompt, and the prompt, once shown, never completes.
type fakeSecretService struct {
	conn       *dbus.Conn
	calls      chan *dbus.Message
	locked     atomic.Bool
	prompts    atomic.Int32
	dismissals atomic.Int32
}

// takeSecretServiceName connects a fake Secret Service for account's entry of service and gives it the Secret
// Service's name, which it keeps until the test ends.
func takeSecretServiceName(t *testing.T, service, account string) *fakeSecretService {
	t.Helper()
	conn, err := dbus.SessionBusPrivate()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Auth(nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.Hello(); err != nil {
		t.Fatal(err)
	}
	f := &fakeSecretService{conn: conn, calls: make(chan *dbus.Message, 1000)}
	if err := f.export(service, account); err != nil {
		t.Fatal(err)
	}
	reply, err := conn.RequestName(secretServiceName, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("taking the name %s: %v (reply %d)", secretServiceName, err, reply)
	}
	// Every message from now on goes to calls, and none is answered.
	conn.Eavesdrop(f.calls)
	return f
}

// answer makes the fake answer the calls that come from now on.
func (f *fakeSecretService) answer() { f.conn.Eavesdrop(nil) }

func (f *fakeSecretService) export(service, account string) error {
	const (
		item   = dbus.ObjectPath("/org/freedesktop/secrets/collection/login/1")
		prompt = dbus.ObjectPath("/org/freedesktop/secrets/prompt/p1")
	)
	property := func(want string, value func() any) func(string, string) (dbus.Variant, *dbus.Error) {
		return func(_, name string) (dbus.Variant, *dbus.Error) {
			if name != want {
				return dbus.Variant{}, dbus.MakeFailedError(fmt.Errorf("no property %s", name))
			}
			return dbus.MakeVariant(value()), nil
		}
	}
	exports := []struct {
		path    dbus.ObjectPath
		iface   string
		methods map[string]any
	}{
		{secretServicePath, "org.freedesktop.DBus.Properties", map[string]any{
			"Get": property("Collections", func() any { return []dbus.ObjectPath{loginCollectionPath} }),
		}},
		{secretServicePath, "org.freedesktop.Secret.Service", map[string]any{
			"Unlock": func([]dbus.ObjectPath) ([]dbus.ObjectPath, dbus.ObjectPath, *dbus.Error) {
				return nil, prompt, nil
			},
		}},
		{loginCollectionPath, "org.freedesktop.DBus.Properties", map[string]any{
			"Get": property("Locked", func() any { return f.locked.Load() }),
		}},
		{loginCollectionPath, secretCollection, map[string]any{
			"SearchItems": func(map[string]string) ([]dbus.ObjectPath, *dbus.Error) {
				return []dbus.ObjectPath{item}, nil
			},
		}},
		{item, "org.freedesktop.DBus.Properties", map[string]any{
			"GetAll": func(string) (map[string]dbus.Variant, *dbus.Error) {
				return map[string]dbus.Variant{
					"Locked":     dbus.MakeVariant(f.locked.Load()),
					"Modified":   dbus.MakeVariant(uint64(1)),
					"Attributes": dbus.MakeVariant(map[string]string{"service": service, "username": account}),
				}, nil
			},
		}},
		{prompt, "org.freedesktop.Secret.Prompt", map[string]any{
			"Prompt": func(string) *dbus.Error {
				f.prompts.Add(1)
				return nil
			},
			"Dismiss": func() *dbus.Error {
				f.dismissals.Add(1)
				return nil
			},
		}},
	}
	for _, e := range exports {
		if err := f.conn.ExportMethodTable(e.methods, e.path, e.iface); err != nil {
			return err
		}
	}
	return nil
}

// A session bus that takes a connection and never answers it (its daemon stopped or hung, or restarted and not yet
// serving) gives a KeyringCache that has to connect to it the cache's error within its bound, as a Secret Service
// that does not answer does: its watcher's connection waits no longer than the read or write it serves, and a
// read or write that waits for another's connection waits no longer either.
func TestKeyringCacheWhenTheBusDoesNotAnswer(t *testing.T) {
	silent, err := net.Listen("unix", filepath.Join(t.TempDir(), "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close() // its connections are never accepted: connecting succeeds, nothing is ever answered
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+silent.Addr().String())
	const service = "e2b-mcp-silent-bus-test"
	c := NewKeyringCache(Keyring{Service: service})
	c.answerBound = time.Second
	c.watch = &secretServiceWatcher{} // not connected yet, as at a server's first call or after the bus dropped it
	ops := map[string]func() error{
		"a read":   func() error { _, err := c.Secret("kim"); return err },
		"a login":  func() error { return c.SetSecret("kim", "e2b_"+strings.Repeat("8", 40)) },
		"a logout": func() error { return c.DeleteSecret("kim") },
	}
	errs := make(chan error, 2*len(ops))
	for what, op := range ops {
		// Two of each at once: one connects, the other waits for it.
		for range 2 {
			go func() { errs <- fmt.Errorf("%s: %w", what, op()) }()
		}
	}
	for range cap(errs) {
		err := waitfor.Recv(t, errs, 30*time.Second, "a read, login or logout to return from a bus that does not answer")
		if !errors.Is(err, errNoAnswer) || strings.Contains(err.Error(), "e2b_") {
			t.Errorf("%v; want the keyring's not answering, without the key", err)
		}
		// A change the keyring was never asked for, its check unanswered, is not left to land later, on whatever
		// keyring answers then (the error says which it is).
		if !strings.HasPrefix(err.Error(), "a read") && !strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("%v; want it to say that nothing was changed", err)
		}
	}
}

// The Secret Service announces a prompt's completion to every connection that listens to it, so another
// application's unlock prompt may complete while the watcher sets up its connection. That must not hold the
// setting up: the watcher is handed the signal on the goroutine that reads the connection, which the setting up
// waits for (to read the bus's answers).
func TestKeyringWatcherConnectsWhileAPromptCompletes(t *testing.T) {
	completed := &dbus.Message{Type: dbus.TypeSignal, Headers: map[dbus.HeaderField]dbus.Variant{
		dbus.FieldPath:      dbus.MakeVariant(dbus.ObjectPath("/org/freedesktop/secrets/prompt/u1")),
		dbus.FieldInterface: dbus.MakeVariant(secretPrompt),
		dbus.FieldMember:    dbus.MakeVariant("Completed"),
		dbus.FieldSender:    dbus.MakeVariant(":1.0"),
		dbus.FieldSignature: dbus.MakeVariant(dbus.SignatureOf(false, dbus.MakeVariant(""))),
	}, Body: []any{false, dbus.MakeVariant("")}}
	// Before it answers each call that subscribes to signals, the bus passes on a prompt's completion.
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", fakeSessionBus(t, func(call *dbus.Message) []*dbus.Message {
		if call.Headers[dbus.FieldMember].Value() == "AddMatch" {
			return []*dbus.Message{completed}
		}
		return nil
	}))
	w := &secretServiceWatcher{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	waitfor.Return(t, 60*time.Second, "the watcher to connect", func() { _, err = w.connection(ctx) })
	if err != nil {
		t.Fatalf("connecting while a prompt completed: %v", err)
	}
	w.conn.Close()
}

// fakeSessionBus serves D-Bus's handshake and answers every call, with an empty reply (Hello's names the caller),
// on a socket of its own, and returns the socket's bus address. Before each reply it sends what before(call)
// gives.
func fakeSessionBus(t *testing.T, before func(call *dbus.Message) []*dbus.Message) string {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "bus"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go serveFakeBus(conn, before)
		}
	}()
	return "unix:path=" + l.Addr().String()
}

func serveFakeBus(conn net.Conn, before func(call *dbus.Message) []*dbus.Message) {
	defer conn.Close()
	in := bufio.NewReader(conn)
	if _, err := in.ReadByte(); err != nil { // the handshake's leading nul byte
		return
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		switch {
		case line == "AUTH\r\n": // asks which mechanisms the bus takes
			_, err = io.WriteString(conn, "REJECTED EXTERNAL\r\n")
		case strings.HasPrefix(line, "AUTH EXTERNAL"):
			_, err = io.WriteString(conn, "OK 0123456789abcdef0123456789abcdef\r\n")
		case strings.HasPrefix(line, "NEGOTIATE_UNIX_FD"):
			_, err = io.WriteString(conn, "ERROR\r\n")
		case strings.HasPrefix(line, "BEGIN"):
			line = ""
		}
		if err != nil {
			return
		}
		if line == "" {
			break
		}
	}
	serial := uint32(0)
	send := func(m *dbus.Message) error {
		var b bytes.Buffer
		if err := m.EncodeTo(&b, binary.LittleEndian); err != nil {
			return err
		}
		serial++
		binary.LittleEndian.PutUint32(b.Bytes()[8:12], serial) // godbus leaves a message's serial to its sender
		_, err := conn.Write(b.Bytes())
		return err
	}
	for {
		call, err := dbus.DecodeMessage(in)
		if err != nil {
			return
		}
		if call.Type != dbus.TypeMethodCall {
			continue
		}
		for _, m := range before(call) {
			if send(m) != nil {
				return
			}
		}
		reply := &dbus.Message{Type: dbus.TypeMethodReply, Headers: map[dbus.HeaderField]dbus.Variant{
			dbus.FieldReplySerial: dbus.MakeVariant(call.Serial()),
			dbus.FieldSender:      dbus.MakeVariant("org.freedesktop.DBus"),
		}}
		if call.Headers[dbus.FieldMember].Value() == "Hello" {
			reply.Headers[dbus.FieldSignature] = dbus.MakeVariant(dbus.SignatureOf(""))
			reply.Body = []any{":1.1"}
		}
		if send(reply) != nil {
			return
		}
	}
}
