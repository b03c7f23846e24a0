//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || windows)

package filelock

import "os"

// fcntl record locks, the only kind some of these systems have, belong to the process rather than the open file
// and are dropped when any descriptor of the file is closed: they would not give the semantics promised here.

func lock(*os.File, mode) error { return ErrUnsupported }

func tryLock(*os.File, mode) (bool, error) { return false, ErrUnsupported }

func unlock(*os.File) error { return ErrUnsupported }
