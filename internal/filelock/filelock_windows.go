//go:build windows

package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// The locked range, one byte at offset 0, is what earlier e2b-mcp versions lock: it must not change, or an old and a
// new process would lock different bytes and both go ahead.
const (
	rangeLow  = 1
	rangeHigh = 0
)

func lock(f *os.File, m mode) error {
	var flags uint32
	if m == exclusive {
		flags = windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	return lockFileEx(f, flags)
}

func tryLock(f *os.File, m mode) (bool, error) {
	var flags uint32 = windows.LOCKFILE_FAIL_IMMEDIATELY
	if m == exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	err := lockFileEx(f, flags)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return false, nil
	}
	return err == nil, err
}

func unlock(f *os.File) error {
	return control(f, func(h windows.Handle) error {
		return windows.UnlockFileEx(h, 0, rangeLow, rangeHigh, new(windows.Overlapped))
	})
}

// lockFileEx waits, unless flags say otherwise, because os opens files for synchronous I/O.
func lockFileEx(f *os.File, flags uint32) error {
	return control(f, func(h windows.Handle) error {
		return windows.LockFileEx(h, flags, 0, rangeLow, rangeHigh, new(windows.Overlapped))
	})
}

// control runs fn on f's handle through its RawConn, which keeps the handle from being closed during the call.
func control(f *os.File, fn func(windows.Handle) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(windows.Handle(fd)) }); err != nil {
		return err
	}
	return ferr
}
