// Package audit records every tool call, allowed or not, in JSON lines: who,
// which session, which tool, the arguments with secrets redacted and long values
// clipped, the policy decision and rule, the outcome, the duration and the sandbox.
// A call that runs has two lines, one written before it runs and one when it ends
// (see Call); a call refused before it runs has one.
//
// The log is audit.jsonl in a directory, shared by every server process of a user.
// Entries are appended and synced under an exclusive flock on audit.lock, which
// also guards rotation by size (audit.jsonl becomes audit.1.jsonl, audit.1.jsonl
// becomes audit.2.jsonl, ..., and the oldest beyond MaxFiles is removed), so that no
// process writes into a file another is renaming and no line is lost. The entries of
// concurrent calls are written and synced together (see commit). The active file is
// kept open between entries and opened again when another process has rotated it
// away; on Windows, where an open file cannot be renamed, it is opened for each entry.
package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
)

// Entry is one recorded call.
type Entry struct {
	Time time.Time `json:"time"`
	// ID joins a call's started record to its outcome record (see Call); empty in an entry written whole.
	ID         string         `json:"id,omitempty"`
	Owner      string         `json:"owner"`
	Session    string         `json:"session"`
	Tool       string         `json:"tool"`
	Args       map[string]any `json:"args,omitempty"`
	Decision   string         `json:"decision"`
	Rule       string         `json:"rule,omitempty"`
	Outcome    string         `json:"outcome"` // one of the Outcome constants
	Error      string         `json:"error,omitempty"`
	DurationMS int64          `json:"duration_ms"`
	SandboxID  string         `json:"sandbox_id,omitempty"`
	// Approval is how a human answered a call that needed approval: "client" (asked in the chat), "page" (the
	// approval page), "command" (`e2b-mcp approve`); empty while nobody has.
	Approval string `json:"approval,omitempty"`
	// Clipped is set when the entry was over MaxEntryBytes and its arguments were cut to fit.
	Clipped *Clipped `json:"clipped,omitempty"`
	// Transfer is what the call moved between the user's machine and a sandbox (a workspace sync), in its
	// outcome record: a call that fails may have moved some.
	Transfer *Transfer `json:"transfer,omitempty"`
}

// Clipped records the sizes of an entry whose arguments were cut to fit MaxEntryBytes.
type Clipped struct {
	// EntryBytes is how long the entry's line would have been, redacted but whole.
	EntryBytes int `json:"entry_bytes"`
	// CapBytes is MaxEntryBytes when the entry was written.
	CapBytes int `json:"cap_bytes"`
	// Args lists the arguments replaced by a note of their size, largest first.
	Args []string `json:"args"`
}

// MaxEntryBytes bounds one line of the log. A call with bigger arguments (thousands of env_vars names, say) is
// recorded with its largest arguments replaced by their sizes, so that no caller can fill the log, and rotate
// the history out of it, with a few calls.
const MaxEntryBytes = 64 << 10

// Outcomes of a call.
const (
	OutcomeOK              = "ok"
	OutcomeError           = "error"
	OutcomeDenied          = "denied"
	OutcomeDeclined        = "declined"
	OutcomeApprovalPending = "approval_pending"
	// OutcomeInputRequired: the call put a question to the client and ended; the client's next call, with the
	// answer, is recorded on its own.
	OutcomeInputRequired = "input_required"
	// OutcomeStarted is the outcome Read gives a call that started and has no outcome record: it is still
	// running, or its server stopped before it ended.
	OutcomeStarted = "started"
)

// Options tune a Log. Zero values take the defaults.
type Options struct {
	MaxBytes int64 // rotate when the active file would grow beyond this; default 10 MiB
	MaxFiles int   // files kept, the active one included; default 5
}

const (
	defaultMaxBytes = 10 << 20
	defaultMaxFiles = 5

	activeName = "audit.jsonl"
	lockName   = "audit.lock"
)

// ErrClosed is returned by Record after Close.
var ErrClosed = errors.New("audit: log is closed")

// Log appends entries to the audit log in a directory. It is safe for concurrent use,
// and several Logs (in one process or several) may share a directory.
type Log struct {
	dir  string
	opts Options

	mu     sync.Mutex // the flock is per open file: goroutines need their own exclusion
	lock   *os.File
	closed bool

	// room is what the calls of this Log in flight hold (see Reserve), noted for the other Logs of the directory
	// in the size of roomFile.
	room     int64
	roomFile *os.File

	// preallocate allocates disk past the end of the active file (see reserve); a test replaces it to be a file
	// system that cannot.
	preallocate func(f *os.File, off, n int64) error

	// syncFile makes appended entries durable: syncData, which a test replaces to see that every entry is on
	// disk before Record returns.
	syncFile func(*os.File) error

	// active is the active file, kept open between appends (under the lock) while the directory still names it:
	// another Log may rotate it away.
	active *os.File

	// queue holds the records waiting for the next group commit (see commit).
	queueMu sync.Mutex
	queue   []*queuedRecord
}

// Open opens (creating) the audit log in dir.
func Open(dir string, opts Options) (*Log, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = defaultMaxBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = defaultMaxFiles
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// Fail at start, not on the first call, if the log cannot be written.
	f, err := os.OpenFile(filepath.Join(dir, activeName), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	f.Close()
	l := &Log{dir: dir, opts: opts, lock: lock, syncFile: syncData, preallocate: reserve}
	if l.roomFile, err = openRoomFile(dir); err != nil {
		lock.Close()
		return nil, err
	}
	// A rotation that crashed can have left the next active file half made.
	if err := l.underLock(func() error { return removeIfExists(filepath.Join(dir, nextName)) }); err != nil {
		l.Close()
		return nil, fmt.Errorf("audit: %w", err)
	}
	return l, nil
}

func removeIfExists(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Record records a call that is over as one whole entry: it reserves room for it (see Reserve) and writes it
// (see Finish). The entry is redacted and clipped (see Redact), stamped with the current time if it has none,
// and fsync'd before Record returns. An error that wraps ErrNotRotated means the entry is recorded.
func (l *Log) Record(e Entry) error {
	c, err := l.Reserve()
	if err != nil {
		return err
	}
	return c.Finish(e)
}

// underLock runs fn holding this Log's mutex and the exclusive flock every process sharing the directory takes.
func (l *Log) underLock(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if err := filelock.Lock(l.lock); err != nil {
		return fmt.Errorf("audit: locking %s: %w", l.lock.Name(), err)
	}
	defer filelock.Unlock(l.lock)
	return fn()
}

// ErrNotRotated is wrapped by the error of a write that went in although the log had to rotate and could not:
// the entry is recorded, and the next write tries to rotate again.
var ErrNotRotated = errors.New("audit: the log could not rotate")

// queuedRecord is a record waiting for a group commit: its line, what its call does under the lock once the
// group's write is over (given the write's error; it returns the record's), and where that result goes.
type queuedRecord struct {
	line  []byte
	after func(writeErr error) error
	done  chan error
}

// commit appends line durably, together with the records of this Log's other calls that come meanwhile: while
// one group is written and synced under the lock, the records that arrive queue, and the next holder of the lock
// writes and syncs them all at once (a group commit: one write and one sync for many calls). after runs under the
// lock with the group's write error. commit returns once the line is on disk (or with why it is not).
func (l *Log) commit(line []byte, after func(writeErr error) error) error {
	r := &queuedRecord{line: line, after: after, done: make(chan error, 1)}
	l.queueMu.Lock()
	l.queue = append(l.queue, r)
	l.queueMu.Unlock()
	err := l.underLock(func() error {
		l.queueMu.Lock()
		group := l.queue
		l.queue = nil
		l.queueMu.Unlock()
		if len(group) == 0 {
			return nil // an earlier holder wrote this record
		}
		lines := group[0].line
		for _, q := range group[1:] {
			lines = append(lines, q.line...)
		}
		werr := l.appendLocked(lines)
		for _, q := range group {
			q.done <- q.after(werr)
		}
		l.letGoOfActiveLocked()
		return nil
	})
	if err != nil {
		// The lock could not be had (the Log closed): the record is this call's to take back, unless a holder
		// took it into a group already.
		l.queueMu.Lock()
		i := slices.Index(l.queue, r)
		if i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
		}
		l.queueMu.Unlock()
		if i >= 0 {
			return err
		}
	}
	return <-r.done
}

// appendLocked appends lines, in room reserved for them, rotating the active file first if they would take it
// past Options.MaxBytes.
func (l *Log) appendLocked(line []byte) error {
	active := filepath.Join(l.dir, activeName)
	f, size, err := l.activeLocked()
	if err != nil {
		return err
	}
	var rotateErr error
	if size > 0 && size+int64(len(line)) > l.opts.MaxBytes {
		if next, err := l.rotateLocked(f, size); err != nil {
			rotateErr = fmt.Errorf("%w: rotating %s: %w", ErrNotRotated, active, err)
		} else {
			f.Close()
			l.active, f, size = next, next, 0
		}
	}
	if size > 0 && !endsWithNewline(f, size) {
		// A line cut short (a crash mid-write, before appends were rolled back) must not swallow this entry.
		line = append([]byte{'\n'}, line...)
	}
	_, werr := f.Write(line)
	if werr == nil {
		werr = l.syncFile(f)
	}
	if werr != nil {
		// Never leave part of a line: the next entry would be glued onto it and both be lost to readers.
		if terr := f.Truncate(size); terr != nil {
			werr = errors.Join(werr, fmt.Errorf("rolling back: %w", terr))
		}
	}
	if werr != nil {
		if rotateErr != nil { // not wrapped: errors.Is(err, ErrNotRotated) means the line is in
			werr = fmt.Errorf("%w (and before it: %v)", werr, rotateErr)
		}
		return fmt.Errorf("audit: writing %s (local disk): %w", active, werr)
	}
	if size == 0 {
		// A new file: make its directory entry durable too.
		if err := filelock.SyncDir(l.dir); err != nil {
			return fmt.Errorf("audit: syncing %s: %w", l.dir, err)
		}
	}
	return rotateErr
}

// endsWithNewline reports whether the file's last byte, at size-1, is a newline. A file that cannot be read
// back is taken as whole: appends are rolled back on failure, so it ends with one.
func endsWithNewline(f *os.File, size int64) bool {
	var b [1]byte
	if _, err := f.ReadAt(b[:], size-1); err != nil {
		return true
	}
	return b[0] == '\n'
}

// keepActiveOpen is whether the active file stays open between entries: not on Windows, where a file open
// cannot be renamed by a rotation.
const keepActiveOpen = runtime.GOOS != "windows"

// letGoOfActiveLocked closes the active file where it is not kept open.
func (l *Log) letGoOfActiveLocked() {
	if !keepActiveOpen && l.active != nil {
		l.active.Close()
		l.active = nil
	}
}

// activeLocked is the active file, open, and its size: the one kept open when the directory still names it,
// else the one it names, opened (created) and kept.
func (l *Log) activeLocked() (*os.File, int64, error) {
	name := filepath.Join(l.dir, activeName)
	if l.active != nil {
		named, err := os.Stat(name)
		open, ferr := l.active.Stat()
		if err == nil && ferr == nil && os.SameFile(named, open) {
			return l.active, open.Size(), nil
		}
		l.active.Close()
		l.active = nil
	}
	f, size, err := openActive(name)
	if err != nil {
		return nil, 0, err
	}
	l.active = f
	return f, size, nil
}

func openActive(name string) (*os.File, int64, error) {
	// Read as well as append: an append checks the byte before it (see endsWithNewline).
	f, err := os.OpenFile(name, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("audit: %w", err)
	}
	return f, st.Size(), nil
}

// rotate shifts audit.jsonl to audit.1.jsonl and every audit.N.jsonl up by one,
// dropping those beyond maxFiles. The caller holds the lock.
func rotate(dir string, maxFiles int) error {
	rotated, err := rotatedFiles(dir)
	if err != nil {
		return err
	}
	// rotated is oldest (highest number) first, so each rename targets a free name.
	for _, r := range rotated {
		if r.n+1 >= maxFiles {
			if err := os.Remove(r.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.Rename(r.path, filepath.Join(dir, rotatedName(r.n+1))); err != nil {
			return err
		}
	}
	active := filepath.Join(dir, activeName)
	if maxFiles <= 1 {
		err = os.Remove(active)
	} else {
		err = os.Rename(active, filepath.Join(dir, rotatedName(1)))
	}
	if err != nil {
		return err
	}
	return filelock.SyncDir(dir)
}

type rotatedFile struct {
	n    int
	path string
}

func rotatedName(n int) string { return "audit." + strconv.Itoa(n) + ".jsonl" }

// rotatedFiles lists audit.N.jsonl in dir, highest N (oldest) first.
func rotatedFiles(dir string) ([]rotatedFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []rotatedFile
	for _, e := range entries {
		name := e.Name()
		mid, ok := strings.CutPrefix(name, "audit.")
		if !ok {
			continue
		}
		mid, ok = strings.CutSuffix(mid, ".jsonl")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(mid)
		if err != nil || n < 1 || strconv.Itoa(n) != mid {
			continue
		}
		out = append(out, rotatedFile{n: n, path: filepath.Join(dir, name)})
	}
	slices.SortFunc(out, func(a, b rotatedFile) int { return b.n - a.n })
	return out, nil
}

// Close releases the log. Entries recorded before are already on disk.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.active != nil {
		l.active.Close()
		l.active = nil
	}
	// This Log's calls in flight will not be recorded now: their room is given back with the room file.
	rerr := errors.Join(l.roomFile.Close(), os.Remove(l.roomFile.Name()))
	return errors.Join(l.lock.Close(), rerr)
}

// encodeEntry prepares an entry for the file: redacted, clipped, UTC, one line of at most MaxEntryBytes.
func encodeEntry(e Entry) ([]byte, error) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC()
	e.Args = Redact(e.Args)
	for _, s := range []*string{&e.Owner, &e.Session, &e.Tool, &e.Decision, &e.Rule, &e.Outcome, &e.Error, &e.SandboxID} {
		*s = redactString(*s)
	}
	e.Clipped = nil
	line, err := encodeLine(e)
	if err != nil {
		// Redact leaves only JSON values, so this is a defect; still record the call.
		e.Args = map[string]any{"[unencodable]": err.Error()}
		if line, err = encodeLine(e); err != nil {
			return nil, fmt.Errorf("audit: encoding entry: %w", err)
		}
	}
	if len(line) <= MaxEntryBytes {
		return line, nil
	}
	return clipEntry(e, len(line))
}

func encodeLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep commands like "a && b" readable
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// clipEntry fits an entry over MaxEntryBytes: its largest arguments, one by one, are replaced by a note of their
// size until the line fits, so that the small ones that say what the call did (sandbox_id, command, path) stay.
// Every other field is already bounded by redactString.
func clipEntry(e Entry, whole int) ([]byte, error) {
	type sized struct {
		key  string
		size int
	}
	var args []sized
	for k, v := range e.Args {
		raw, _ := json.Marshal(v)
		args = append(args, sized{k, len(raw)})
	}
	slices.SortFunc(args, func(a, b sized) int {
		if a.size != b.size {
			return b.size - a.size
		}
		return strings.Compare(a.key, b.key)
	})
	clipped := make(map[string]any, len(e.Args))
	for k, v := range e.Args {
		clipped[k] = v
	}
	e.Args = clipped
	e.Clipped = &Clipped{EntryBytes: whole, CapBytes: MaxEntryBytes}
	for _, a := range args {
		e.Args[a.key] = fmt.Sprintf("[%d bytes clipped: the entry is over the audit log's cap of %d bytes]",
			a.size, MaxEntryBytes)
		e.Clipped.Args = append(e.Clipped.Args, a.key)
		line, err := encodeLine(e)
		if err != nil {
			return nil, fmt.Errorf("audit: encoding entry: %w", err)
		}
		if len(line) <= MaxEntryBytes {
			return line, nil
		}
	}
	// Only the argument names are left, and they are bounded (maxItems keys of at most MaxStringBytes): this is
	// reached only if the bounds change.
	e.Args = map[string]any{"[clipped]": fmt.Sprintf("%d arguments", len(args))}
	e.Clipped.Args = nil
	line, err := encodeLine(e)
	if err != nil {
		return nil, fmt.Errorf("audit: encoding entry: %w", err)
	}
	return line, nil
}
