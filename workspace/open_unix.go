//go:build unix

package workspace

import (
	"os"
	"syscall"
)

// readFlags open a file of the tree for reading without following a symlink put in its place since the walk
// (O_NOFOLLOW) and without blocking on a FIFO put there (O_NONBLOCK).
const readFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK
