//go:build !linux

package emulator

import (
	"errors"
	"os"
)

// openPTY is Linux's only, as the emulator's sandboxes are.
func openPTY(cols, rows uint16) (master, slave *os.File, err error) {
	return nil, nil, errors.New("terminals are emulated on Linux only")
}
