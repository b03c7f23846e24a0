package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/smalldisk"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// bigArgs are arguments whose entry is clipped to MaxEntryBytes: the largest a call can write.
func bigArgs() map[string]any {
	list := make([]any, maxItems)
	for i := range list {
		list[i] = strings.Repeat("x", MaxStringBytes-10)
	}
	return map[string]any{"a": list, "b": list, "c": list}
}

// Sixteen calls with the largest entries let in side by side on a nearly full disk: every call that Reserve let
// in has its started record written before it runs and its outcome after, on a file system that preallocates and
// on one that cannot; twenty times over.
func TestConcurrentCallsOnANearlyFullDiskAreAllRecorded(t *testing.T) {
	for _, fs := range []string{"preallocating", "without preallocation"} {
		t.Run(fs, func(t *testing.T) {
			disk := filepath.Join(t.TempDir(), "disk")
			smalldisk.Mount(t, disk, 8<<20)
			for run := range 20 {
				dir := filepath.Join(disk, "state"+strconv.Itoa(run))
				l := openLog(t, dir, Options{})
				if fs == "without preallocation" {
					l.preallocate = func(*os.File, int64, int64) error { return errNoPreallocation }
				}
				filler := smalldisk.FillLeaving(t, disk, 400<<10)
				ran, refused := concurrentCalls(t, l, 16)
				if ran == 0 || refused == 0 {
					t.Fatalf("run %d: %d calls ran, %d refused: want the disk to take some and not all", run, ran, refused)
				}
				got, err := Read(dir, Filter{})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != ran {
					t.Fatalf("run %d: %d calls ran, %d recorded", run, ran, len(got))
				}
				for _, e := range got {
					if e.Outcome != OutcomeOK || e.ID == "" || e.Clipped == nil {
						t.Fatalf("run %d: entry %+v: want a call started with its largest entry and ended ok", run, e)
					}
				}
				l.Close()
				if err := errors.Join(os.Remove(filler), os.RemoveAll(dir)); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// concurrentCalls makes n calls at once on l: each reserves, and those let in start (all reservations made
// before any runs), then end. It fails the test if a call let in cannot write its records.
func concurrentCalls(t *testing.T, l *Log, n int) (ran, refused int) {
	var mu sync.Mutex
	var reserved, wg sync.WaitGroup
	reserved.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := l.Reserve()
			reserved.Done()
			reserved.Wait()
			mu.Lock()
			if err != nil {
				refused++
			} else {
				ran++
			}
			mu.Unlock()
			if err != nil {
				if !strings.Contains(err.Error(), "no space left on device") {
					t.Errorf("Reserve: %v; want it to name the full disk", err)
				}
				return
			}
			e := numbered("big", i)
			e.Args = bigArgs()
			if err := c.Start(e); err != nil {
				t.Errorf("a call let in could not write its started record: %v", err)
				return
			}
			e.Outcome = OutcomeOK
			if err := c.Finish(e); err != nil {
				t.Errorf("a call let in could not write its outcome: %v", err)
			}
		}()
	}
	waitfor.Return(t, time.Minute, "the concurrent calls", wg.Wait)
	return ran, refused
}

// A started call with no outcome record reads as OutcomeStarted; one with an outcome reads as one entry at its
// start, with the outcome's result; whole entries (as every entry was before calls had two records) read as they
// were, and an outcome record whose start is not in the log is skipped.
func TestStartedAndOutcomeRecordsReadAsOneEntry(t *testing.T) {
	dir := t.TempDir()
	old := `{"time":"2026-01-01T00:00:00Z","owner":"alice","session":"old","tool":"e2b_exec","decision":"allow","outcome":"ok","duration_ms":7}` + "\n" +
		`{"time":"2026-01-01T00:00:01Z","ends":"0000000000000000","outcome":"ok","duration_ms":1}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, activeName), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir, Options{})
	start := func(session string) *Call {
		c, err := l.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		e := numbered(session, 0)
		e.Outcome, e.Error, e.DurationMS = "", "", 0
		if err := c.Start(e); err != nil {
			t.Fatal(err)
		}
		return c
	}
	finished, running := start("finished"), start("running")
	if err := l.Record(numbered("refused", 3)); err != nil {
		t.Fatal(err)
	}
	if err := finished.Finish(Entry{Outcome: OutcomeError, Error: "exit status 2", DurationMS: 1500}); err != nil {
		t.Fatal(err)
	}
	if err := running.Finish(Entry{Outcome: OutcomeOK}); err != nil {
		t.Fatal(err)
	}
	if err := running.Finish(Entry{Outcome: OutcomeOK}); err == nil {
		t.Fatal("a call was finished twice")
	}
	crashed := start("crashed") // its server dies: no outcome
	_ = crashed

	got, err := Read(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []string
	for _, e := range got {
		sessions = append(sessions, e.Session+":"+e.Outcome)
	}
	want := "old:ok,finished:error,running:ok,refused:ok,crashed:started"
	if strings.Join(sessions, ",") != want {
		t.Fatalf("entries read: %s; want %s", strings.Join(sessions, ","), want)
	}
	if e := got[1]; e.Error != "exit status 2" || e.DurationMS != 1500 || e.Tool != "e2b_exec" || e.Decision != "allow" {
		t.Errorf("a finished call reads as %+v", e)
	}
	if got[3].ID != "" {
		t.Errorf("an entry recorded whole has an ID: %+v", got[3])
	}
	// The filters apply to what the started record says.
	if got, _ := Read(dir, Filter{Session: "crashed"}); len(got) != 1 || got[0].Outcome != OutcomeStarted {
		t.Errorf("filtered read: %+v", got)
	}
}

// Calls in flight when the log rotates keep their room: it is reserved in the new file before the old one is
// renamed, and their outcome records, written in the new file, are joined to their starts in the old one.
func TestCallsInFlightAcrossARotation(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{MaxBytes: 1000, MaxFiles: 5})
	var calls []*Call
	for i := range 3 {
		c, err := l.Reserve()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(numbered("inflight", i)); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, c)
	}
	for i := range 10 {
		if err := l.Record(numbered("meanwhile", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, rotatedName(1))); err != nil {
		t.Fatalf("the log did not rotate: %v", err)
	}
	for _, c := range calls {
		if err := c.Finish(Entry{Outcome: OutcomeOK, DurationMS: 42}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(dir, Filter{Session: "inflight"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d calls in flight read back, want 3", len(got))
	}
	for _, e := range got {
		if e.Outcome != OutcomeOK || e.DurationMS != 42 {
			t.Errorf("a call in flight during the rotation reads as %+v", e)
		}
	}
	if l.room != 0 {
		t.Errorf("%d bytes of room still held with no call in flight", l.room)
	}
}

// Every Log of a directory (each server process has its own) counts the room the others' calls hold, and not that
// of a Log that is gone without closing (its process died): its room file is removed.
func TestRoomOfOtherLogsCounts(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	smalldisk.Mount(t, disk, 4<<20)
	dir := filepath.Join(disk, "state")
	a, b := openLog(t, dir, Options{}), openLog(t, dir, Options{})

	// A Log that died holding room: its file is no longer locked.
	dead := filepath.Join(dir, roomPrefix+"dead")
	if err := os.WriteFile(dead, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(dead, 1<<40); err != nil {
		t.Fatal(err)
	}

	smalldisk.FillLeaving(t, disk, 5*roomPerCall)
	var held []*Call
	for range 100 {
		c, err := a.Reserve()
		if err != nil {
			break
		}
		held = append(held, c)
	}
	if len(held) == 0 || len(held) == 100 {
		t.Fatalf("%d calls let in on a disk with room for 5", len(held))
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the room file of a Log that is gone was kept: %v", err)
	}
	if _, err := b.Reserve(); err == nil {
		t.Fatalf("another Log let a call in past the room held by %d calls of the first", len(held))
	}
	for _, c := range held {
		if err := c.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if c, err := b.Reserve(); err != nil {
		t.Fatalf("once the first Log's calls gave back their room: %v", err)
	} else if err := c.Release(); err != nil {
		t.Fatal(err)
	}
}

// A started call's outcome record is redacted as its started record is: an E2B error that echoes the key it was
// sent with does not put the key in the log.
func TestOutcomeErrorIsRedacted(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	c, err := l.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	e := numbered("s1", 0)
	e.Outcome, e.DurationMS = "", 0
	if err := c.Start(e); err != nil {
		t.Fatal(err)
	}
	key := "e2b_" + strings.Repeat("0123456789abcdef", 3)
	if err := c.Finish(Entry{Outcome: OutcomeError, Error: "E2B API error 401: invalid API key " + key}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, activeName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), key) {
		t.Fatalf("the outcome record holds the key its error echoed:\n%s", raw)
	}
	got, err := Read(dir, Filter{})
	if err != nil || len(got) != 1 || got[0].Error != "E2B API error 401: invalid API key "+Redacted {
		t.Fatalf("read %+v %v; want the error with the key redacted", got, err)
	}
}

// What a call moved is in its outcome record, read back with the call: never in the started record, written
// before the call has moved anything.
func TestTransferIsInTheOutcome(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	moved := &Transfer{FilesIn: 3, BytesIn: 2560, FilesOut: 1, BytesOut: 1024}
	c, err := l.Reserve()
	if err != nil {
		t.Fatal(err)
	}
	e := Entry{Time: time.Now(), Owner: "alice", Session: "s", Tool: "e2b_sync_in", Transfer: moved}
	if err := c.Start(e); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, activeName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "transfer") {
		t.Fatalf("the started record holds a transfer: %s", raw)
	}
	e.Outcome = OutcomeOK
	if err := c.Finish(e); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Transfer == nil || *got[0].Transfer != *moved {
		t.Fatalf("read %+v, want one entry with transfer %+v", got, *moved)
	}
}
