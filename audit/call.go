package audit

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
)

// A call is recorded in two lines joined by an ID: its started record (who, what, the decision), written before
// it runs, and its outcome record, written when it ends. After a crash the log still shows the calls that
// started, as started and never ended (Read gives them OutcomeStarted). A call that ends before it runs (refused
// by the policy, say) is recorded in one whole line, as every entry was before calls had two.
//
// Room for a call's records is reserved before anything is done for it (Reserve), and held until they are
// written: on disk past the end of the active file where the file system can preallocate, and otherwise counted
// against the free space. Every Log sharing the directory counts the room of the others' calls too (see
// roomFile), so no number of calls in flight, in this process or another, can outrun the disk: a call is let in
// only if the records of every call in flight still fit.

// errNoPreallocation is reserve's answer on a file system that cannot allocate disk past the end of a file.
var errNoPreallocation = errors.New("the file system cannot preallocate")

// roomPerCall is the room a call holds until it is recorded: its started record (or its whole entry), at most
// MaxEntryBytes, and its outcome record.
const roomPerCall = MaxEntryBytes + maxOutcomeBytes

// maxOutcomeBytes bounds an outcome record: its error text is clipped by redactString to MaxStringBytes, which JSON
// escaping can at most multiply by six, and its transfer is four numbers.
const maxOutcomeBytes = 8 << 10

// Call is one call's place in the log, from before it runs until it is recorded. Its methods are not safe for
// concurrent use; each call has its own.
type Call struct {
	l    *Log
	id   string // of the started record, once written
	room int64  // the room still held
}

// outcomeRecord is the line that ends a started call.
type outcomeRecord struct {
	Time       time.Time `json:"time"`
	Ends       string    `json:"ends"` // the started record's ID
	Outcome    string    `json:"outcome"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
	Transfer   *Transfer `json:"transfer,omitempty"`
}

// Reserve keeps room in the log for the records of a call about to start. An error (a full disk, a read-only or
// missing directory) means the call might go unrecorded: the caller refuses it, and a later Reserve tries again,
// so the log recovers by itself when space returns. The call's room is given back by Finish or Release.
func (l *Log) Reserve() (*Call, error) {
	if err := l.underLock(func() error { return l.keepRoomLocked(roomPerCall) }); err != nil {
		return nil, err
	}
	return &Call{l: l, room: roomPerCall}, nil
}

// Start writes the call's started record: e without its outcome, error and duration. A call whose started record
// could not be written must not run (Release it); an error that wraps ErrNotRotated means it was written.
func (c *Call) Start(e Entry) error {
	if c.id != "" || c.room == 0 {
		return errors.New("audit: a call is started once, before it is finished or released")
	}
	id, err := newID()
	if err != nil {
		return err
	}
	e.ID, e.Outcome, e.Error, e.DurationMS, e.Transfer = id, OutcomeStarted, "", 0, nil
	line, err := encodeEntry(e)
	if err != nil {
		return err
	}
	err = c.l.commit(line, func(werr error) error {
		if werr != nil && !errors.Is(werr, ErrNotRotated) {
			return werr
		}
		return errors.Join(werr, c.giveBackLocked(MaxEntryBytes))
	})
	if err == nil || errors.Is(err, ErrNotRotated) {
		c.id = id
	}
	return err
}

// Finish records how the call ended and gives back its room: an outcome record (e's Outcome, Error, DurationMS
// and Transfer) for a started call, and e whole for one that never started.
func (c *Call) Finish(e Entry) error {
	if c.room == 0 {
		return errors.New("audit: a call is finished once")
	}
	var line []byte
	var err error
	if c.id == "" {
		e.ID = ""
		line, err = encodeEntry(e)
	} else {
		line, err = encodeOutcome(outcomeRecord{Ends: c.id, Outcome: e.Outcome, Error: e.Error, DurationMS: e.DurationMS,
			Transfer: e.Transfer})
	}
	if err != nil {
		return errors.Join(err, c.Release())
	}
	return c.l.commit(line, func(werr error) error {
		return errors.Join(werr, c.giveBackLocked(c.room))
	})
}

// Release gives back the room of a call that ends unrecorded: one refused before anything was done for it, or
// whose started record could not be written.
func (c *Call) Release() error {
	if c.room == 0 {
		return nil
	}
	return c.l.underLock(func() error { return c.giveBackLocked(c.room) })
}

// giveBackLocked returns n bytes of the call's room to the log.
func (c *Call) giveBackLocked(n int64) error {
	c.room -= n
	return c.l.setRoomLocked(c.l.room - n)
}

// keepRoomLocked makes room for need more bytes of records beside the room of every call in flight (of every Log
// of the directory).
func (l *Log) keepRoomLocked(need int64) error {
	total, err := l.roomInFlightLocked()
	if err != nil {
		return err
	}
	active := filepath.Join(l.dir, activeName)
	f, size, err := l.activeLocked()
	if err != nil {
		return err
	}
	err = l.provide(f, size, total+need)
	l.letGoOfActiveLocked()
	if err != nil {
		return fmt.Errorf("audit: reserving space for entries in %s (local disk): %w", active, err)
	}
	return l.setRoomLocked(l.room + need)
}

// roomInFlightLocked is the room the calls in flight of every Log of the directory hold.
func (l *Log) roomInFlightLocked() (int64, error) {
	others, err := l.othersRoomLocked()
	return others + l.room, err
}

// provide makes sure n bytes can be appended to f (now size bytes long): preallocated, or where the file system
// cannot preallocate, free on its disk. Only audit writers are counted in the second case (they all reserve
// first); another program filling the disk between the check and the append can still cost an entry, and the
// append is then rolled back.
func (l *Log) provide(f *os.File, size, n int64) error {
	err := l.preallocate(f, size, n)
	if !errors.Is(err, errNoPreallocation) {
		return err
	}
	free, err := freeBytes(l.dir)
	if err != nil {
		return fmt.Errorf("the file system can neither preallocate nor tell its free space: %w", err)
	}
	if free < n {
		return fmt.Errorf("%w (%d bytes free, %d needed for the records of the calls in flight)", syscall.ENOSPC, free, n)
	}
	return nil
}

// rotateLocked rotates the active file (old, size bytes long) and opens the new one, with room for the records
// of every call in flight: the room is reserved in the new file before anything is renamed, so that when there is
// none, nothing rotates and the calls keep theirs in the old file. The old file's preallocation is then given back.
func (l *Log) rotateLocked(old *os.File, size int64) (*os.File, error) {
	total, err := l.roomInFlightLocked()
	if err != nil {
		return nil, err
	}
	active := filepath.Join(l.dir, activeName)
	next := filepath.Join(l.dir, nextName)
	// O_APPEND as openActive's: the file is kept open, and other Logs append to it meanwhile.
	f, err := os.OpenFile(next, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err = l.provide(f, 0, total); err != nil {
		err = fmt.Errorf("reserving space for entries in the new file: %w", err)
	} else if err = rotate(l.dir, l.opts.MaxFiles); err == nil {
		err = os.Rename(next, active)
	}
	if err != nil {
		f.Close()
		os.Remove(next)
		return nil, err
	}
	_ = old.Truncate(size) // frees the blocks preallocated past its end; it is whole up to size
	return f, nil
}

// roomPrefix names the room files: audit.room.<random>, one per open Log, whose size (a sparse file: it takes
// no disk) is the room that Log's calls hold. Each Log holds its own file locked while open, so that a room file
// that can be locked belongs to a Log that is gone (its process died, say), whose room is no longer held.
const roomPrefix = "audit.room."

// nextName is the active file while it is made, during a rotation; a crash can leave it, and Open removes it.
const nextName = "audit.next"

func openRoomFile(dir string) (*os.File, error) {
	id, err := newID()
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, roomPrefix+id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if ok, err := filelock.TryLock(f); err != nil || !ok {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("audit: locking %s: %v", f.Name(), err)
	}
	return f, nil
}

// setRoomLocked records the room this Log's calls hold.
func (l *Log) setRoomLocked(n int64) error {
	l.room = n
	if err := l.roomFile.Truncate(n); err != nil {
		return fmt.Errorf("audit: noting the room of calls in flight in %s: %w", l.roomFile.Name(), err)
	}
	return nil
}

// othersRoomLocked is the room the calls of the directory's other Logs hold. The room files of Logs that are gone
// are removed.
func (l *Log) othersRoomLocked() (int64, error) {
	names, err := filepath.Glob(filepath.Join(l.dir, roomPrefix+"*"))
	if err != nil {
		return 0, fmt.Errorf("audit: %w", err)
	}
	var total int64
	for _, name := range names {
		if name == l.roomFile.Name() {
			continue
		}
		n, err := heldRoom(name)
		if err != nil {
			return 0, fmt.Errorf("audit: reading the room of another server's calls in %s: %w", name, err)
		}
		total += n
	}
	return total, nil
}

// heldRoom is the room noted in another Log's room file, or 0 (and the file removed) if that Log is gone.
func heldRoom(name string) (int64, error) {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	gone, err := filelock.TryLock(f)
	if err != nil {
		return 0, err
	}
	if gone {
		return 0, os.Remove(name)
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func newID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("audit: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// encodeOutcome prepares an outcome record for the file: redacted, UTC, one line within maxOutcomeBytes.
func encodeOutcome(r outcomeRecord) ([]byte, error) {
	r.Time = time.Now().UTC()
	r.Outcome, r.Error = redactString(r.Outcome), redactString(r.Error)
	line, err := encodeLine(r)
	if err == nil && len(line) > maxOutcomeBytes {
		// Not reached while redactString bounds the fields; the room held for the record must still not be outrun.
		r.Error = strings.ToValidUTF8(r.Error[:min(len(r.Error), 100)], "") + "...[clipped]"
		line, err = encodeLine(r)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: encoding an outcome: %w", err)
	}
	return line, nil
}
