package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
	bolt "go.etcd.io/bbolt"
)

// # Keeping the file open while no other process wants it
//
// Opening, mapping and closing the file costs every operation far more than its transaction, so a Bolt keeps the
// file open (read-write, under bbolt's exclusive lock) between operations for as long as no other process asks
// for it, and at most keptIdle past its last operation. Another process asking for the file holds the turnstile
// while it waits for the database lock (see turnstile), and nothing else holds the turnstile: so before each
// operation, and every keptPoll while the file is kept open, the Bolt tries the turnstile itself, and finding it
// held, closes the file and lets the other process in. Everything else stays as it was: each write commits (and
// fsyncs) before it returns, and each transaction re-checks the schema, so a process that migrates the file in
// between is noticed. A file changed without the lock (rewritten in place, replaced, deleted) is noticed too:
// the kept file is used only while the path still names it, unchanged since this Bolt's last operation, and is
// otherwise closed and opened afresh, with the checks of a first open.
const (
	keptIdle = time.Second
	keptPoll = 10 * time.Millisecond
)

// withKept runs fn in one transaction on the file kept open, opening it first when it is not; ok is false when
// the file cannot be kept open here (no lock calls on this platform, or the turnstile cannot be made), and then
// the operation is the caller's to run as before.
func (s *Bolt) withKept(write bool, fn func(*bolt.Tx) error) (ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return true, ErrClosed
	}
	if s.kept != nil && (s.othersWaitLocked() || !s.keptUnchangedLocked()) {
		s.closeKeptLocked()
	}
	if s.kept == nil {
		if s.noKeeping || !s.probeTurnstileLocked() {
			return false, nil
		}
		var file *os.File
		db, err := s.openBolt(true, false, &file)
		if err != nil {
			return true, err
		}
		s.kept, s.keptFile = db, file
		go s.watchKept(db)
	}
	s.keptUsed = time.Now()
	err = s.runKeptLocked(write, fn)
	if s.kept != nil {
		st, statErr := s.keptFile.Stat()
		if statErr != nil {
			s.closeKeptLocked()
		}
		s.keptStat = st
	}
	return true, err
}

// keptUnchangedLocked reports whether the path names the kept file, as this Bolt left it.
func (s *Bolt) keptUnchangedLocked() bool {
	now, err := os.Stat(s.path)
	return err == nil && s.keptStat != nil && os.SameFile(now, s.keptStat) && now.Size() == s.keptStat.Size() &&
		now.ModTime().Equal(s.keptStat.ModTime())
}

// runKeptLocked runs fn on the kept file; a panic or memory fault inside bbolt drops the file and becomes an
// ErrUnusable error, as in withDBOpts.
func (s *Bolt) runKeptLocked(write bool, fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if !closeQuietly(s.kept) {
				_ = s.keptFile.Close() // releases the flock bbolt took
			}
			s.kept, s.keptFile, s.keptStat = nil, nil, nil
			err = fmt.Errorf("%w: %s cannot be read (bbolt failed: %v); it was left untouched", ErrUnusable, s.path, r)
		}
	}()
	if write {
		return s.kept.Update(fn)
	}
	return s.kept.View(fn)
}

// watchKept closes the kept file db once another process asks for it, or keptIdle after its last operation.
func (s *Bolt) watchKept(db *bolt.DB) {
	for {
		time.Sleep(keptPoll)
		s.mu.Lock()
		if s.kept != db {
			s.mu.Unlock()
			return // closed already
		}
		if time.Since(s.keptUsed) >= keptIdle || s.othersWaitLocked() {
			s.closeKeptLocked()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

func (s *Bolt) closeKeptLocked() {
	if s.kept == nil {
		return
	}
	if !closeQuietly(s.kept) {
		_ = s.keptFile.Close()
	}
	s.kept, s.keptFile, s.keptStat = nil, nil, nil
}

// probeTurnstileLocked opens the turnstile for othersWaitLocked, once; false when that cannot be done.
func (s *Bolt) probeTurnstileLocked() bool {
	if s.turnProbe != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(s.path), lockFileName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		s.noKeeping = true
		return false
	}
	if _, err := filelock.TryLock(f); errors.Is(err, filelock.ErrUnsupported) {
		_ = f.Close()
		s.noKeeping = true
		return false
	}
	_ = filelock.Unlock(f)
	s.turnProbe = f
	return true
}

// othersWaitLocked reports whether another process holds the turnstile: it waits for the file.
func (s *Bolt) othersWaitLocked() bool {
	ok, err := filelock.TryLock(s.turnProbe)
	if err != nil || !ok {
		return true
	}
	_ = filelock.Unlock(s.turnProbe)
	return false
}
