//go:build !linux

package emulator

import (
	"context"
	"errors"
	"net"
)

// dialInside needs Linux's namespaces and pidfd_getfd, as the sandboxes themselves need bubblewrap.
func (iso *isolation) dialInside(context.Context, int, int) (net.Conn, error) {
	return nil, errors.New("emulator: sandbox ports are served on Linux only")
}
