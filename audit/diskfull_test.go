package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/internal/smalldisk"
)

// wholeLines fails the test unless every line of the active file is a complete entry, and returns how many.
func wholeLines(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, activeName))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("the log ends in part of a line: %q", data[max(0, len(data)-80):])
	}
	n := 0
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("line %d is not an entry (%v): %q", n+1, err, line)
		}
		n++
	}
	return n
}

// On a full disk: a call let start by Reserve is recorded; once the reservation cannot be kept, Reserve refuses
// and names the local disk; an append that fails leaves no part of a line; when space returns the log goes on.
func TestFullDiskRefusesUnrecordableCallsAndLeavesNoPartialLine(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	smalldisk.Mount(t, disk, 1<<20)
	dir := filepath.Join(disk, "state")
	l := openLog(t, dir, Options{})
	recorded := 0
	for i := range 3 {
		if err := l.Record(numbered("before", i)); err != nil {
			t.Fatal(err)
		}
		recorded++
	}
	filler := smalldisk.Fill(t, disk)

	// Calls go on being let in and recorded until the reservation can no longer be renewed; none is lost.
	refused := false
	for i := range 100 {
		c, err := l.Reserve()
		if err != nil {
			if !strings.Contains(err.Error(), "local disk") || !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("Reserve on a full disk: %v; want it to name the local disk and the cause", err)
			}
			refused = true
			break
		}
		if err := c.Finish(numbered("full", i)); err != nil {
			t.Fatalf("an entry of a call that Reserve let in was lost: %v", err)
		}
		recorded++
	}
	if !refused {
		t.Fatal("Reserve never refused on a full disk")
	}

	// Appends made regardless (no reservation) fail once the reserved room is used up, and leave no half line.
	big := numbered("unreserved", 0)
	big.Args["command"] = strings.Repeat("x", 1000)
	line, err := encodeEntry(big)
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	for range 10000 {
		if err := l.underLock(func() error { return l.appendLocked(line) }); err != nil {
			failed = true
			break
		}
		recorded++
	}
	if !failed {
		t.Fatal("appends never failed on a full disk")
	}
	if got := wholeLines(t, dir); got != recorded {
		t.Fatalf("%d entries in the log, %d recorded", got, recorded)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(numbered("after", 0)); err != nil {
		t.Fatalf("Record after space returned: %v", err)
	}
	if got := wholeLines(t, dir); got != recorded+1 {
		t.Fatalf("%d entries in the log after recovery, want %d", got, recorded+1)
	}
}

// A line cut short before (a crash mid-write) does not swallow the next entry.
func TestRecordAfterCutLineStartsANewLine(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	if err := l.Record(numbered("first", 0)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, activeName), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `{"time":"2026-01-01T00:00:00Z","owner":"al`)
	f.Close()
	if err := l.Record(numbered("second", 1)); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Session != "second" {
		t.Fatalf("entries read back: %+v; want first and second", got)
	}
}
