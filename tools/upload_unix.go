//go:build unix

package tools

import "syscall"

// nonBlocking opens a file without waiting: a FIFO opens at once instead of blocking until a writer comes. It
// changes nothing for a regular file.
const nonBlocking = syscall.O_NONBLOCK
