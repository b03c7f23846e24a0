//go:build !((dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd)

package credentials

import "errors"

// On macOS and Windows go-keyring's keyrings have no change time it exposes, so KeyringCache reads every time.
func platformWatcher() entryWatcher { return unwatched{} }

type unwatched struct{}

func (unwatched) stamp(string, string) (entryStamp, error) {
	return entryStamp{}, errors.New("this keyring cannot tell whether an entry changed")
}

func (unwatched) unchanged(string, string, entryStamp) bool { return false }
