// Package scratch makes temporary directories that do not outlive their process, even one killed with
// SIGKILL: each directory holds a lock for as long as its process lives, and the next process that makes one
// with the same prefix removes those whose lock nobody holds.
package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
)

// lockName is the file in each directory whose lock says its process is alive.
const lockName = ".in-use"

// grace spares directories this young: their maker may not have taken the lock yet.
const grace = 10 * time.Second

// Dir is a temporary directory of this process.
type Dir struct {
	Path string
	lock *os.File
}

// New removes what dead processes left under prefix in the system's temporary directory, then makes a new
// directory there (prefix followed by a random part) and takes its lock.
func New(prefix string) (*Dir, error) {
	Sweep(os.TempDir(), prefix, time.Now())
	path, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		var locked bool
		if locked, err = filelock.TryLock(lock); err == nil && !locked {
			err = errors.New("a directory just made is locked by another process")
		}
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(path)
		return nil, fmt.Errorf("scratch: %s: %w", path, err)
	}
	return &Dir{Path: path, lock: lock}, nil
}

// Remove deletes the directory and everything in it, then lets go of its lock.
func (d *Dir) Remove() error {
	err := os.RemoveAll(d.Path)
	d.lock.Close()
	return err
}

// Sweep removes the directories named prefix* in parent that this user owns, that are older than the grace
// period and whose lock is free (their process is gone), and returns their paths. Directories without a lock
// file were not made by New and are left alone, as are symbolic links.
func Sweep(parent, prefix string, now time.Time) []string {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) { // a symbolic link is not IsDir
			continue
		}
		path := filepath.Join(parent, e.Name())
		if fi, err := e.Info(); err != nil || !ownedByMe(fi) || now.Sub(fi.ModTime()) < grace {
			continue
		}
		lock := takeAbandoned(path)
		if lock == nil {
			continue
		}
		// The lock is held until the directory is gone, so that no process can take it over meanwhile.
		if os.RemoveAll(path) == nil {
			removed = append(removed, path)
		}
		lock.Close()
	}
	return removed
}

// takeAbandoned takes the lock of dir when its lock file exists and nobody holds it, and returns the file
// holding it; nil when dir is in use or was not made by New.
func takeAbandoned(dir string) *os.File {
	name := filepath.Join(dir, lockName)
	if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	lock, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	if locked, err := filelock.TryLock(lock); err != nil || !locked {
		lock.Close()
		return nil
	}
	return lock
}
