//go:build windows

package audit

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes a lock on the first byte of f, blocking until it is granted.
func lockFile(f *os.File, exclusive bool) error {
	var flags uint32
	if exclusive {
		flags = windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	ol := new(windows.Overlapped)
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, ol)
}

func unlockFile(f *os.File) error {
	ol := new(windows.Overlapped)
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, ol)
}

// syncDir is a no-op: Windows has no directory fsync, and its rename is already
// recorded by the file system journal.
func syncDir(string) error { return nil }
