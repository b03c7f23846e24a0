//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package credentials

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/godbus/dbus/v5"
)

// The platforms above are those where go-keyring keeps secrets in the freedesktop Secret Service, on the D-Bus
// session bus. There the Secret Service announces each change with a signal (an item created, replaced or
// deleted, a collection made or deleted), and an item's properties say whether it is there and unlocked, without
// opening a session to read its secret.
func platformWatcher() entryWatcher { return &sessionWatcher }

// sessionWatcher is the process's one watcher: one connection and one count of changes serve every cache.
var sessionWatcher secretServiceWatcher

// secretServiceWatcher stamps go-keyring's items over a D-Bus connection of its own, on which it counts every
// signal of the Secret Service (and the Secret Service's name changing owner) as a change. The count, not the
// items' Modified time, is what tells a change: Modified counts whole seconds of a clock that may be stepped back,
// so a replace can leave it as it was. Modified is compared too, for the one change that is not signalled (an
// item's secret set in place), and an item changed in the second its stamp is taken in is not vouched for.
//
// A count taken after a reply from the Secret Service includes every change the Secret Service made before it
// replied: the bus delivers one sender's messages in the order they were sent, the Secret Service signals a
// change before it answers the call that made it, and godbus hands each signal to the counter on the goroutine
// that reads the connection, before it reads the next message. So a login or logout that has returned is counted
// by the time the next call's check has its answer.
type secretServiceWatcher struct {
	changes atomic.Uint64

	connMu sync.Mutex
	conn   *dbus.Conn // nil until first used, and replaced when it closed

	// The prompts have a lock of their own: DeliverSignal takes it on the goroutine that reads the connection,
	// so it must never be held by one who waits for that goroutine, as connection's setting up does.
	promptsMu sync.Mutex
	prompts   map[dbus.ObjectPath]chan *dbus.Signal // the prompts being waited for, by path
}

// entryStamp is one state of a keyring entry: the Secret Service item that holds it and that item's Modified
// time, or, when absent is set, that the collection holds no such entry; with the collection go-keyring found it
// in (or found none in) and whether that was the "default" alias's, and the count of changes before the entry
// was looked for.
type entryStamp struct {
	item       dbus.ObjectPath
	modified   uint64
	absent     bool
	collection dbus.ObjectPath
	viaAlias   bool
	changes    uint64
}

const (
	secretServiceName = "org.freedesktop.secrets"
	secretServicePath = dbus.ObjectPath("/org/freedesktop/secrets")
	secretService     = "org.freedesktop.Secret.Service"
	secretCollection  = "org.freedesktop.Secret.Collection"
	secretItem        = "org.freedesktop.Secret.Item"
	secretPrompt      = "org.freedesktop.Secret.Prompt"
	// loginCollectionPath is the collection go-keyring uses whenever the Secret Service has it; otherwise
	// go-keyring uses the one the "default" alias names (go-keyring's SecretService.GetLoginCollection).
	loginCollectionPath = dbus.ObjectPath("/org/freedesktop/secrets/collection/login")
)

var errNotVouched = errors.New("the Secret Service does not vouch for the entry")

// DeliverSignal counts a signal as a change, and hands a prompt's completion to whoever waits for it. The
// connection receives only the signals of the Secret Service and of its name changing owner (and the bus's own
// greeting, which counts harmlessly).
func (w *secretServiceWatcher) DeliverSignal(iface, name string, signal *dbus.Signal) {
	w.changes.Add(1)
	if iface+"."+name != secretPrompt+".Completed" {
		return
	}
	w.promptsMu.Lock()
	defer w.promptsMu.Unlock()
	if completed, ok := w.prompts[signal.Path]; ok {
		select {
		case completed <- signal:
		default: // a prompt completes once; another signal for it is not waited for
		}
	}
}

// unlock asks the Secret Service to unlock the collection stamp s found the entry locked in, and when it answers
// with a prompt (on a desktop, a dialog asking for the keyring's password), shows it and waits for it within ctx.
// go-keyring would ask too, but it leaves its channel for the prompt's signal registered for good, and every
// later signal then leaves a goroutine behind for each such channel: a server whose keyring stays locked would
// pile them up at every read.
func (w *secretServiceWatcher) unlock(ctx context.Context, s entryStamp) error {
	conn, err := w.connection(ctx)
	if err != nil {
		return err
	}
	var unlocked []dbus.ObjectPath
	var prompt dbus.ObjectPath
	err = conn.Object(secretServiceName, secretServicePath).CallWithContext(ctx, secretService+".Unlock", 0,
		[]dbus.ObjectPath{s.collection}).Store(&unlocked, &prompt)
	if err != nil {
		return err
	}
	if prompt == "/" {
		if !slices.Contains(unlocked, s.collection) {
			return errLocked
		}
		return nil
	}
	completed := make(chan *dbus.Signal, 1)
	w.promptsMu.Lock()
	if w.prompts == nil {
		w.prompts = map[dbus.ObjectPath]chan *dbus.Signal{}
	}
	w.prompts[prompt] = completed
	w.promptsMu.Unlock()
	defer func() {
		w.promptsMu.Lock()
		delete(w.prompts, prompt)
		w.promptsMu.Unlock()
	}()
	if err := conn.Object(secretServiceName, prompt).CallWithContext(ctx, secretPrompt+".Prompt", 0, "").Err; err != nil {
		return err
	}
	select {
	case signal := <-completed:
		if len(signal.Body) > 0 {
			if dismissed, ok := signal.Body[0].(bool); ok && !dismissed {
				return nil
			}
		}
		return errLocked
	case <-ctx.Done():
		// The prompt is not left showing for a read that gave up on it; this is asked without waiting.
		conn.Object(secretServiceName, prompt).Go(secretPrompt+".Dismiss", dbus.FlagNoReplyExpected, nil)
		return ctx.Err()
	}
}

// connection returns the watcher's connection, connecting when there is none or it closed. A new connection
// counts as a change: what the closed one would have been told is not known. Connecting waits no longer than ctx
// allows, and a caller waiting for another's connecting waits at most until that one gives up.
func (w *secretServiceWatcher) connection(ctx context.Context) (*dbus.Conn, error) {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	if w.conn != nil && w.conn.Connected() {
		return w.conn, nil
	}
	w.changes.Add(1)
	conn, err := w.connect(ctx)
	if err != nil {
		return nil, err
	}
	w.conn = conn
	return conn, nil
}

// connect makes the watcher's connection to the session bus, subscribed to the Secret Service's signals, within
// ctx. Authenticating and saying hello to the bus take no context: a bus that takes the connection and never
// answers (its daemon stopped or hung) is given up on by closing the connection, which ends the wait.
func (w *secretServiceWatcher) connect(ctx context.Context) (*dbus.Conn, error) {
	conn, err := dbus.SessionBusPrivate(dbus.WithSignalHandler(w))
	if err != nil {
		return nil, err
	}
	stopWatching := context.AfterFunc(ctx, func() { conn.Close() })
	err = conn.Auth(nil)
	if err == nil {
		err = conn.Hello()
	}
	if err == nil {
		err = conn.AddMatchSignalContext(ctx, dbus.WithMatchSender(secretServiceName))
	}
	if err == nil {
		err = conn.AddMatchSignalContext(ctx, dbus.WithMatchSender("org.freedesktop.DBus"),
			dbus.WithMatchInterface("org.freedesktop.DBus"), dbus.WithMatchMember("NameOwnerChanged"),
			dbus.WithMatchArg(0, secretServiceName))
	}
	if !stopWatching() && err == nil {
		err = ctx.Err() // ctx ended as the connection was set up, and closed it
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (w *secretServiceWatcher) stamp(ctx context.Context, service, account string) (entryStamp, error) {
	conn, err := w.connection(ctx)
	if err != nil {
		return entryStamp{}, err
	}
	collection, viaAlias, err := keyringCollection(ctx, conn)
	if err != nil {
		return entryStamp{}, err
	}
	// Counted after the first answer: every change made before it is in the count, and every later one is not.
	changes := w.changes.Load()
	present, err := searchUnlocked(ctx, conn, collection, service, account)
	if err != nil {
		return entryStamp{collection: collection}, err
	}
	s := entryStamp{absent: present == ""}
	if !s.absent {
		asked := time.Now().Unix()
		// Reading a locked item's stamp fails, so a locked collection is never vouched for.
		if s, err = itemStamp(ctx, conn, present, service, account); err != nil {
			return entryStamp{collection: collection}, err
		}
		// An item's secret may be changed in place (Item.SetSecret, a password manager's edit), which the Secret
		// Service need not announce (gnome-keyring does not): only Modified tells it, and only by moving to the
		// second the change is made in. A change after this stamp comes no earlier than the second it was asked
		// in; while that is the second of the last change, a change in place would leave Modified as it is.
		if uint64(asked) <= s.modified {
			return entryStamp{collection: collection}, errNotVouched
		}
	}
	s.collection, s.viaAlias, s.changes = collection, viaAlias, changes
	return s, nil
}

func (w *secretServiceWatcher) unchanged(ctx context.Context, service, account string, s entryStamp) bool {
	conn, err := w.connection(ctx)
	if err != nil || w.changes.Load() != s.changes {
		return false
	}
	// Where go-keyring follows the "default" alias, the alias may have been moved, which the Secret Service does
	// not signal: its answer is asked for beside the item's, in the same round trip.
	var alias *dbus.Call
	if s.viaAlias {
		alias = conn.Object(secretServiceName, secretServicePath).GoWithContext(ctx, secretService+".ReadAlias", 0,
			make(chan *dbus.Call, 1), "default")
	}
	if s.absent {
		present, err := searchUnlocked(ctx, conn, s.collection, service, account)
		if err != nil || present != "" {
			return false
		}
	} else if now, err := itemStamp(ctx, conn, s.item, service, account); err != nil || now.modified != s.modified {
		return false
	}
	if alias != nil {
		var collection dbus.ObjectPath
		if (<-alias.Done).Store(&collection) != nil || collection != s.collection {
			return false
		}
	}
	// Counted after the answers: every change made before them has been counted.
	return w.changes.Load() == s.changes
}

// keyringCollection is the collection go-keyring reads and writes now: the login collection when the Secret
// Service has one, else the one the "default" alias names (viaAlias).
func keyringCollection(ctx context.Context, conn *dbus.Conn) (collection dbus.ObjectPath, viaAlias bool, err error) {
	service := conn.Object(secretServiceName, secretServicePath)
	var collections dbus.Variant
	err = service.CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, secretService, "Collections").
		Store(&collections)
	if err != nil {
		return "", false, err
	}
	if paths, _ := collections.Value().([]dbus.ObjectPath); slices.Contains(paths, loginCollectionPath) {
		return loginCollectionPath, false, nil
	}
	if err := service.CallWithContext(ctx, secretService+".ReadAlias", 0, "default").Store(&collection); err != nil {
		return "", false, err
	}
	if collection == "/" {
		return "", false, errNotVouched
	}
	return collection, true, nil
}

// searchUnlocked searches a collection for account's entry of service and returns its item, or "" when there is
// none and the collection is unlocked; a locked collection gives errLocked, as a read of it fails. Both are
// asked at once, one round trip. The search, not the collection's list of items, says an entry is absent: the
// Secret Service may give a new entry the path of one deleted since.
func searchUnlocked(ctx context.Context, conn *dbus.Conn, collection dbus.ObjectPath, service, account string) (
	dbus.ObjectPath, error,
) {
	obj := conn.Object(secretServiceName, collection)
	search := obj.GoWithContext(ctx, secretCollection+".SearchItems", 0, make(chan *dbus.Call, 1),
		map[string]string{"service": service, "username": account})
	lock := obj.GoWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, make(chan *dbus.Call, 1),
		secretCollection, "Locked")
	var items []dbus.ObjectPath
	var locked dbus.Variant
	// A call made with ctx is done, with ctx's error, when ctx ends first.
	if err := (<-search.Done).Store(&items); err != nil {
		return "", err
	}
	if len(items) > 0 {
		return items[0], nil
	}
	if err := (<-lock.Done).Store(&locked); err != nil {
		return "", err
	}
	if isLocked, ok := locked.Value().(bool); !ok {
		return "", errNotVouched
	} else if isLocked {
		return "", errLocked
	}
	return "", nil
}

// itemStamp reads an item's properties in one round trip: the stamp of an unlocked item that is account's entry
// of service, or an error. The attributes are checked because the Secret Service may give a deleted item's path
// to a new one.
func itemStamp(ctx context.Context, conn *dbus.Conn, item dbus.ObjectPath, service, account string) (
	entryStamp, error,
) {
	var props map[string]dbus.Variant
	err := conn.Object(secretServiceName, item).CallWithContext(ctx, "org.freedesktop.DBus.Properties.GetAll", 0,
		secretItem).Store(&props)
	if err != nil {
		return entryStamp{}, err
	}
	locked, lockedKnown := props["Locked"].Value().(bool)
	modified, modifiedKnown := props["Modified"].Value().(uint64)
	attributes, _ := props["Attributes"].Value().(map[string]string)
	if !lockedKnown || !modifiedKnown || attributes["service"] != service || attributes["username"] != account {
		return entryStamp{}, errNotVouched
	}
	if locked {
		return entryStamp{}, errLocked
	}
	return entryStamp{item: item, modified: modified}, nil
}
