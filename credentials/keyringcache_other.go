//go:build !((dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd)

package credentials

import (
	"context"
	"errors"
)

// On macOS and Windows go-keyring's keyrings have no change time it exposes, so KeyringCache reads every time.
func platformWatcher() entryWatcher { return unwatched{} }

type unwatched struct{}

// entryStamp has only what KeyringCache asks of every stamp; nothing is ever stamped here.
type entryStamp struct{ absent bool }

func (unwatched) stamp(context.Context, string, string) (entryStamp, error) {
	return entryStamp{}, errors.New("this keyring cannot tell whether an entry changed")
}

func (unwatched) unchanged(context.Context, string, string, entryStamp) bool { return false }

func (unwatched) unlock(context.Context, entryStamp) error { return errLocked }
