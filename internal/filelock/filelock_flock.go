//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func lock(f *os.File, m mode) error {
	how := unix.LOCK_SH
	if m == exclusive {
		how = unix.LOCK_EX
	}
	return flock(f, how)
}

func tryLock(f *os.File, m mode) (bool, error) {
	how := unix.LOCK_SH
	if m == exclusive {
		how = unix.LOCK_EX
	}
	err := flock(f, how|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func unlock(f *os.File) error { return flock(f, unix.LOCK_UN) }

// flock goes through the file's RawConn rather than Fd, which would switch the descriptor to blocking mode and
// does not keep it from being closed during the call.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		for {
			// A signal can interrupt a waiting flock where the system does not restart it: wait again.
			ferr = unix.Flock(int(fd), how)
			if !errors.Is(ferr, unix.EINTR) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return ferr
}
