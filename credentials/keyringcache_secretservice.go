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
)

var errNotVouched = errors.New("the Secret Service does not vouch for the entry")

func (secretServiceWatcher) stamp(service, account string) (entryStamp, error) {
	svc, err := ss.NewSecretService()
	if err != nil {
		return entryStamp{}, err
	}
	// The collection go-keyring reads and writes; searching it needs no unlock, and reading a locked item's
	// stamp below fails, so a locked collection is never vouched for.
	items, err := svc.SearchItems(svc.GetLoginCollection(), map[string]string{"service": service, "username": account})
	if err != nil {
		return entryStamp{}, err
	}
	if len(items) == 0 {
		return entryStamp{}, errNotVouched
	}
	return itemStamp(svc.Conn, items[0], service, account)
}

func (secretServiceWatcher) unchanged(service, account string, s entryStamp) bool {
	conn, err := dbus.SessionBus()
	if err != nil {
		return false
	}
	now, err := itemStamp(conn, dbus.ObjectPath(s.item), service, account)
	return err == nil && now == s
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
