//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package credentials

import (
	"errors"

	"github.com/godbus/dbus/v5"
	ss "github.com/zalando/go-keyring/secret_service"
)

// The platforms above are those where go-keyring keeps secrets in the freedesktop Secret Service, on the D-Bus
// session bus: there an item's properties say whether it changed, without opening a session to read its secret.
func platformWatcher() entryWatcher { return secretServiceWatcher{} }

// secretServiceWatcher stamps go-keyring's items: those of its login collection whose attributes are "service" and
// "username".
type secretServiceWatcher struct{}

const (
	secretServiceName = "org.freedesktop.secrets"
	secretItem        = "org.freedesktop.Secret.Item"
	secretCollection  = "org.freedesktop.Secret.Collection"
)

var errNotVouched = errors.New("the Secret Service does not vouch for the entry")

func (secretServiceWatcher) stamp(service, account string) (entryStamp, error) {
	svc, err := ss.NewSecretService()
	if err != nil {
		return entryStamp{}, err
	}
	// The collection go-keyring reads and writes; searching it needs no unlock, and reading a locked item's
	// stamp below fails, so a locked collection is never vouched for.
	collection := svc.GetLoginCollection().Path()
	present, err := searchUnlocked(svc.Conn, collection, service, account)
	if err != nil {
		return entryStamp{}, err
	}
	if present == "" {
		return entryStamp{item: string(collection), absent: true}, nil
	}
	return itemStamp(svc.Conn, present, service, account)
}

func (secretServiceWatcher) unchanged(service, account string, s entryStamp) bool {
	conn, err := dbus.SessionBus()
	if err != nil {
		return false
	}
	if s.absent {
		present, err := searchUnlocked(conn, dbus.ObjectPath(s.item), service, account)
		return err == nil && present == ""
	}
	now, err := itemStamp(conn, dbus.ObjectPath(s.item), service, account)
	return err == nil && now == s
}

// searchUnlocked searches a collection for account's entry of service and returns its item, or "" when there is
// none and the collection is unlocked; a locked collection gives errNotVouched, as a read of it fails. Both are
// asked at once, one round trip. The search, not the collection's list of items, says an entry is absent: the
// Secret Service may give a new entry the path of one deleted since.
func searchUnlocked(conn *dbus.Conn, collection dbus.ObjectPath, service, account string) (dbus.ObjectPath, error) {
	obj := conn.Object(secretServiceName, collection)
	search := obj.Go(secretCollection+".SearchItems", 0, nil, map[string]string{"service": service, "username": account})
	lock := obj.Go("org.freedesktop.DBus.Properties.Get", 0, nil, secretCollection, "Locked")
	var items []dbus.ObjectPath
	var locked dbus.Variant
	<-search.Done
	<-lock.Done
	if err := search.Store(&items); err != nil {
		return "", err
	}
	if len(items) > 0 {
		return items[0], nil
	}
	if err := lock.Store(&locked); err != nil {
		return "", err
	}
	if isLocked, ok := locked.Value().(bool); !ok || isLocked {
		return "", errNotVouched
	}
	return "", nil
}

// itemStamp reads an item's properties in one round trip: the stamp of an unlocked item that is account's entry
// of service, or an error. The attributes are checked because the Secret Service may give a deleted item's path
// to a new one.
func itemStamp(conn *dbus.Conn, item dbus.ObjectPath, service, account string) (entryStamp, error) {
	var props map[string]dbus.Variant
	err := conn.Object(secretServiceName, item).Call("org.freedesktop.DBus.Properties.GetAll", 0, secretItem).
		Store(&props)
	if err != nil {
		return entryStamp{}, err
	}
	locked, lockedKnown := props["Locked"].Value().(bool)
	modified, modifiedKnown := props["Modified"].Value().(uint64)
	attributes, _ := props["Attributes"].Value().(map[string]string)
	if !lockedKnown || locked || !modifiedKnown || attributes["service"] != service || attributes["username"] != account {
		return entryStamp{}, errNotVouched
	}
	return entryStamp{item: string(item), modified: modified}, nil
}
