// Package filelock takes advisory locks on open files, so that the e2b-mcp processes sharing a directory (one per
// assistant window, say) take turns with the files in it.
//
// A lock belongs to the open file, not to the process: two *os.File opened on the same path exclude each other
// even within one process, so goroutines holding their own handles need no other exclusion, and goroutines sharing
// one handle need a mutex of their own. Locks are not re-entrant: lock a file at most once through a given handle
// before unlocking it. Closing the file, or the end of the process however it ends, releases its lock, so a crashed
// process never leaves a directory locked.
//
// On Unix systems with flock(2) the lock covers the whole file and is advisory. On Windows it is a LockFileEx lock
// on the file's first byte, the byte earlier e2b-mcp versions lock, so that an old and a new binary still exclude
// each other; Windows enforces it on I/O to that byte, so a lock file should hold no data. Elsewhere every lock call
// fails with ErrUnsupported.
//
// SyncDir is the other half of replacing a file under a lock: it makes the new directory entry durable before the
// lock is released.
//
// Errors are the system's own and do not name the file: callers know which file they locked and say so.
package filelock

import (
	"errors"
	"os"
)

// ErrUnsupported is returned by the lock calls on a platform that has none usable here (neither flock(2) nor
// LockFileEx). A caller that can still work, only less well, without the lock tests for it with errors.Is.
var ErrUnsupported = errors.New("file locking is not supported on this platform")

type mode int

const (
	shared mode = iota
	exclusive
)

// Lock takes an exclusive lock on f, waiting for as long as any other open file holds a lock on the same file.
func Lock(f *os.File) error { return lock(f, exclusive) }

// RLock takes a shared lock on f, waiting for as long as another open file holds an exclusive lock on the same
// file. Shared locks, in any number of processes, are held side by side.
func RLock(f *os.File) error { return lock(f, shared) }

// TryLock takes an exclusive lock on f without waiting. It reports false, and no error, when another open file
// holds a lock on the same file. Lock calls that wait cannot be given a deadline, so a caller that must give up
// after one polls TryLock instead.
func TryLock(f *os.File) (bool, error) { return tryLock(f, exclusive) }

// TryRLock takes a shared lock on f without waiting. It reports false, and no error, when another open file holds
// an exclusive lock on the same file.
func TryRLock(f *os.File) (bool, error) { return tryLock(f, shared) }

// Unlock releases the lock taken through f.
func Unlock(f *os.File) error { return unlock(f) }
