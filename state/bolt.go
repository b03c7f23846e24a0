package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the store's file inside the state directory.
const FileName = "state.db"

// lockFileName is the turnstile beside it; it holds no data.
const lockFileName = "state.lock"

// usersFileName is locked shared by every process that has the store open, and exclusively by one that must be
// alone with it (Options.Exclusive); it holds no data.
const usersFileName = "state.users"

// DefaultLockTimeout is how long an operation waits for another process to release the file.
const DefaultLockTimeout = 10 * time.Second

// Bolt is the embedded store: one bbolt file (state.db) in the state directory, the default. It is safe for
// concurrent use by goroutines and by processes sharing the directory.
//
// # Sharing the file between processes
//
// Every assistant window starts its own e2b-mcp process, and they all use the same state directory. bbolt takes an
// exclusive flock on its file for as long as a DB handle is open, so a Bolt keeps one only while no other process
// asks for the file (see withKept); otherwise each operation opens the file, runs one transaction and closes it
// again. Reads open it read-only under a shared lock (readers in any process run side by side); writes open it
// read-write under the exclusive lock. A lock that can time out has
// to be polled, and polling alone lets a process that writes back to back starve the others, so processes first
// queue through a turnstile (state.lock beside state.db, see turnstile). Waiting gives up after
// Options.LockTimeout (10s by default) with an error wrapping ErrBusy that names the file. Within one process a
// sync.RWMutex orders the operations of a Bolt, so goroutines never poll against each other. One Bolt per
// directory per process is enough; a second one works but polls against the first.
//
// Opening the file costs an open, mmap and close: about 30µs for a read against under 1µs through a handle held
// open; a write is dominated by its two fsyncs either way. BenchmarkSandboxRead, BenchmarkBoltViewHeldOpen,
// BenchmarkPutSandbox and BenchmarkPutSandboxContended (another process writing all the while) measure it.
//
// # Durability and damaged files
//
// Every acknowledged write is a committed bbolt transaction, which fsyncs the data pages and then the meta page.
// state.db is only ever created when no file of that name exists (an empty file, which holds nothing to lose, is
// initialised too). Before bbolt sees an existing file, Open checks its header itself (bbolt can crash the process on a
// file shorter than its meta page claims), then, in a read-only transaction, reads every key and value and runs bbolt's
// consistency check. bbolt panics and memory faults on a damaged file become errors. A file that is truncated, garbage,
// another program's bbolt database or from a newer e2b-mcp gives an error wrapping ErrUnusable that names the file; the
// store never writes to such a file, let alone "repairs" it. Every transaction re-checks the application marker and the
// schema version, so a process started before a newer e2b-mcp migrated the file stops instead of writing the old
// layout.
//
// # Secrets
//
// envd access tokens are sealed with AES-256-GCM under a 32-byte data key from a KeySource (the OS keyring in
// production). Each sealed value has its own random nonce and the record's key as additional data, so a
// ciphertext cannot be moved to another record. A sealed check value in the meta bucket tells a wrong data key
// apart from a damaged record.
type Bolt struct {
	records // the Store methods

	path        string
	keys        KeySource
	lockTimeout time.Duration
	migrations  []migration

	mu     sync.RWMutex // write operations exclusive, reads shared; also guards closed
	closed bool

	turnMu sync.Mutex // one goroutine of this Store in the turnstile at a time, so they never poll against each other

	key keyCache // the data key's AEAD once checked against the file

	users *os.File // holds the lock on state.users until Close; nil where locks are not supported

	// The file kept open between operations (see withKept), under mu.
	kept      *bolt.DB
	keptFile  *os.File
	keptUsed  time.Time
	keptStat  os.FileInfo // the kept file as this Bolt's last operation left it
	turnProbe *os.File    // the turnstile, to learn whether another process waits
	noKeeping bool        // the file cannot be kept open here
}

// Open opens the store in dir, creating dir (0700) and the file (0600) if missing. It validates the file and
// migrates an older schema; it does not keep the file open (see the package comment).
func Open(dir string, opts Options) (*Bolt, error) {
	return open(dir, opts, schemaMigrations())
}

func open(dir string, opts Options, migrations []migration) (*Bolt, error) {
	if dir == "" {
		return nil, errors.New("state store: no state directory given")
	}
	if opts.Keys == nil {
		return nil, errors.New("state store: Options.Keys is required")
	}
	s := &Bolt{
		path:        filepath.Join(dir, FileName),
		keys:        opts.Keys,
		lockTimeout: opts.LockTimeout,
		migrations:  migrations,
	}
	s.records = newRecords(boltRunner{s}, opts, s.path)
	if s.lockTimeout <= 0 {
		s.lockTimeout = DefaultLockTimeout
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state store: creating directory %s: %w", dir, err)
	}
	if err := s.lockUsers(opts.Exclusive); err != nil {
		return nil, err
	}
	if err := s.createIfMissing(); err != nil {
		s.unlockUsers()
		return nil, err
	}
	if err := s.prepare(); err != nil {
		s.unlockUsers()
		return nil, err
	}
	return s, nil
}

// lockUsers takes the lock on state.users: shared, waiting up to the lock timeout while an exclusive holder (a
// rotation) has it, or exclusive, failing at once with ErrInUse when any other process has the store open.
func (s *Bolt) lockUsers(exclusive bool) error {
	path := filepath.Join(filepath.Dir(s.path), usersFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		if exclusive {
			return fmt.Errorf("state store %s: opening %s: %w", s.path, path, err)
		}
		return nil // a read-only directory, say: nothing can rotate its key either
	}
	if exclusive {
		ok, err := filelock.TryLock(f)
		switch {
		case err != nil:
			_ = f.Close()
			return fmt.Errorf("state store %s: locking %s: %w", s.path, path, err)
		case !ok:
			_ = f.Close()
			return fmt.Errorf("%w: %s is open in another e2b-mcp process (a server, or a command under way); stop "+
				"every server using the state directory %s, then try again", ErrInUse, s.path, filepath.Dir(s.path))
		}
	} else if err := s.waitShared(f, path); err != nil {
		_ = f.Close()
		if errors.Is(err, filelock.ErrUnsupported) {
			return nil
		}
		return err
	}
	s.users = f
	return nil
}

// waitShared takes the shared lock on state.users, polling until the lock timeout: an exclusive holder (a data
// key rotation) that takes longer, say one stuck on a keyring prompt, gives an error wrapping ErrBusy that says
// so rather than a wait without end.
func (s *Bolt) waitShared(f *os.File, path string) error {
	deadline := time.Now().Add(s.lockTimeout)
	wait := time.Millisecond
	for {
		ok, err := filelock.TryRLock(f)
		switch {
		case errors.Is(err, filelock.ErrUnsupported):
			return err
		case err != nil:
			return fmt.Errorf("state store %s: locking %s: %w", s.path, path, err)
		case ok:
			return nil
		case !time.Now().Before(deadline):
			return fmt.Errorf("%w: %s: another e2b-mcp process has it to itself (keys rotate-data) for longer than %s; "+
				"try again when it is done", ErrBusy, s.path, s.lockTimeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func (s *Bolt) unlockUsers() {
	if s.users != nil {
		_ = s.users.Close() // releases the lock
		s.users = nil
	}
}

// createIfMissing creates an empty file when none exists. O_EXCL makes the creation race between processes
// harmless: exactly one creates it, and bbolt initialises an empty file under its exclusive lock.
func (s *Bolt) createIfMissing() error {
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state store: creating %s: %w", s.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("state store: creating %s: %w", s.path, err)
	}
	return syncDir(filepath.Dir(s.path))
}

// prepare validates the file and brings it to the current schema.
func (s *Bolt) prepare() error {
	fresh, err := checkFileHeader(s.path)
	if err != nil {
		return err
	}
	if fresh {
		// Empty file: initialise it (or find it initialised by a racing process) in one write transaction.
		return s.withDB(true, func(tx *bolt.Tx) error { return s.initOrCheck(tx) })
	}
	var version int
	err = s.withDBOpts(false, true, func(tx *bolt.Tx) error {
		var err error
		if version, err = s.readSchema(tx); err != nil {
			return err
		}
		return s.consistencyCheck(tx)
	})
	if err != nil {
		return err
	}
	if version == s.currentVersion() {
		return nil
	}
	return s.withDB(true, func(tx *bolt.Tx) error { return s.migrate(tx) })
}

// Path is the store's file.
func (s *Bolt) Path() string { return s.path }

// Close marks the store closed and closes the file if it is kept open; later operations return ErrClosed.
func (s *Bolt) Close() error {
	s.steps.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeKeptLocked()
	if s.turnProbe != nil {
		_ = s.turnProbe.Close()
		s.turnProbe = nil
	}
	s.closed = true
	s.key.reset()
	s.unlockUsers()
	return nil
}

// Ping opens the file and checks its schema, as every operation does; the file is local, so ctx is not needed.
func (s *Bolt) Ping(context.Context) error {
	return s.view(func(*bolt.Tx) error { return nil })
}

func (s *Bolt) view(fn func(*bolt.Tx) error) error {
	return s.withDB(false, func(tx *bolt.Tx) error {
		if err := s.checkSchema(tx); err != nil {
			return err
		}
		return fn(tx)
	})
}

func (s *Bolt) update(fn func(*bolt.Tx) error) error {
	return s.withDB(true, func(tx *bolt.Tx) error {
		if err := s.checkSchema(tx); err != nil {
			return err
		}
		return fn(tx)
	})
}

// withDB opens the file, runs fn in one transaction and closes the file. A panic or memory fault inside bbolt
// (possible on a file damaged behind our back) becomes an ErrUnusable error instead of crashing the server.
func (s *Bolt) withDB(write bool, fn func(*bolt.Tx) error) error {
	return s.withDBOpts(write, false, fn)
}

// withDBOpts is withDB; preload makes a read-only open load the freelist on this goroutine too.
func (s *Bolt) withDBOpts(write, preload bool, fn func(*bolt.Tx) error) (err error) {
	if !preload { // preload is the check of the file at Open, which must open it afresh
		if ok, err := s.withKept(write, fn); ok {
			return err
		}
	}
	if write {
		s.mu.Lock()
		defer s.mu.Unlock()
	} else {
		s.mu.RLock()
		defer s.mu.RUnlock()
	}
	if s.closed {
		return ErrClosed
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))

	var (
		db   *bolt.DB
		file *os.File
	)
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if db == nil || !closeQuietly(db) {
			if file != nil {
				_ = file.Close() // releases the flock bbolt took
			}
		}
		err = fmt.Errorf("%w: %s cannot be read (bbolt failed: %v); it was left untouched", ErrUnusable, s.path, r)
	}()

	db, err = s.openBolt(write, preload, &file)
	if err != nil {
		return err
	}
	if write {
		err = db.Update(fn)
	} else {
		err = db.View(fn)
	}
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("state store %s: closing: %w", s.path, cerr)
	}
	db = nil
	return err
}

// openBolt opens the file with bbolt once this Store's turn has come (see turnstile), polling for bbolt's lock
// until the lock timeout. bbolt must never create the file (only createIfMissing does), so O_CREATE is stripped
// from its flags.
func (s *Bolt) openBolt(write, preload bool, file **os.File) (*bolt.DB, error) {
	deadline := time.Now().Add(s.lockTimeout)
	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	turn, err := s.enterTurnstile(deadline)
	if err != nil {
		return nil, err
	}
	defer turn.leave()

	opts := &bolt.Options{
		ReadOnly:        !write,
		PreLoadFreelist: preload,
		// Any timeout at or below bbolt's own 50ms poll interval makes it try the lock exactly once.
		Timeout: time.Nanosecond,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
			*file = f
			return f, err
		},
	}
	// Holding the turnstile, only the current holder of the database lock stands in the way: poll briskly.
	wait := 50 * time.Microsecond
	for {
		db, err := bolt.Open(s.path, 0o600, opts)
		switch {
		case err == nil:
			return db, nil
		case errors.Is(err, berrors.ErrTimeout):
			if !time.Now().Before(deadline) {
				return nil, s.busy()
			}
			time.Sleep(wait)
			wait = min(2*wait, 2*time.Millisecond)
		case errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("state store %s has disappeared (deleted while in use?): %w", s.path, err)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
			errors.Is(err, berrors.ErrVersionMismatch):
			return nil, fmt.Errorf("%w: %s is not a readable state store (%v); it was left untouched",
				ErrUnusable, s.path, err)
		default:
			return nil, fmt.Errorf("state store %s: opening: %w", s.path, err)
		}
	}
}

func (s *Bolt) busy() error {
	return busyError{where: s.path, why: fmt.Sprintf("another process has held it for more than %s "+
		"(is an e2b-mcp process stuck?)", s.lockTimeout)}
}

// The turnstile makes the database lock fair between processes. Lock calls that fail instead of waiting (the
// only kind with a timeout) let a process that writes back to back re-take the database lock before a waiting
// process polls again, starving it. So every operation first takes the turnstile (an exclusive lock on
// state.lock), then the database lock, then releases the turnstile. A process waiting for the database lock
// holds the turnstile, so the process that has just released the database lock cannot take it again before the
// waiter has had it. The turnstile only orders processes; exclusion is bbolt's lock alone.
type turnstile struct{ f *os.File }

func (s *Bolt) enterTurnstile(deadline time.Time) (turnstile, error) {
	path := filepath.Join(filepath.Dir(s.path), lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		// A read-only directory, say: without the turnstile processes are still correct, only less fair.
		return turnstile{}, nil
	}
	wait := 100 * time.Microsecond
	for {
		ok, err := filelock.TryLock(f)
		if errors.Is(err, filelock.ErrUnsupported) {
			// No lock call on this platform: processes then compete for the database lock alone, which keeps them
			// correct but lets a busy writer starve the others.
			_ = f.Close()
			return turnstile{}, nil
		}
		if err != nil {
			_ = f.Close()
			return turnstile{}, fmt.Errorf("state store %s: locking %s: %w", s.path, path, err)
		}
		if ok {
			return turnstile{f: f}, nil
		}
		if !time.Now().Before(deadline) {
			_ = f.Close()
			return turnstile{}, s.busy()
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Millisecond)
	}
}

func (t turnstile) leave() {
	if t.f == nil {
		return
	}
	_ = filelock.Unlock(t.f)
	_ = t.f.Close()
}

// closeQuietly closes db after a panic inside it; it reports whether the close itself completed.
func closeQuietly(db *bolt.DB) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = db.Close()
	return true
}
