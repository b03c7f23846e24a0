package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
)

// Filter selects entries; zero fields select everything. Since is inclusive, Until
// exclusive.
type Filter struct {
	Session, SandboxID, Tool, Decision string
	Since, Until                       time.Time
}

func (f Filter) match(e *Entry) bool {
	return (f.Session == "" || e.Session == f.Session) &&
		(f.SandboxID == "" || e.SandboxID == f.SandboxID) &&
		(f.Tool == "" || e.Tool == f.Tool) &&
		(f.Decision == "" || e.Decision == f.Decision) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since)) &&
		(f.Until.IsZero() || e.Time.Before(f.Until))
}

// Read returns the entries of the audit log in dir that pass the filter, oldest
// first, across the rotated files. It holds a shared lock while reading, so a
// rotation cannot move files under it. A line that is not an entry (a file cut
// short by a crash, say) is skipped.
//
// A call recorded in two lines (see Call) is one entry, at its started record's place and time, with the outcome,
// error, duration and transfer of its outcome record; without one, its outcome is OutcomeStarted. An outcome record
// whose started record is not in the log (rotated out) is skipped.
func Read(dir string, f Filter) ([]Entry, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// Open the lock read-only and only if it exists: reading needs no write access.
	if lock, err := os.Open(filepath.Join(dir, lockName)); err == nil {
		defer lock.Close()
		if err := filelock.RLock(lock); err != nil {
			return nil, fmt.Errorf("audit: locking %s: %w", lock.Name(), err)
		}
		defer filelock.Unlock(lock)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("audit: %w", err)
	}

	rotated, err := rotatedFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	paths := make([]string, 0, len(rotated)+1)
	for _, r := range rotated {
		paths = append(paths, r.path)
	}
	paths = append(paths, filepath.Join(dir, activeName))

	r := reader{filter: f, started: map[string]int{}}
	for _, p := range paths {
		if err := r.readFile(p); err != nil {
			return nil, err
		}
	}
	return r.out, nil
}

// reader gathers the entries of the log's files, in order.
type reader struct {
	filter  Filter
	out     []Entry
	started map[string]int // the index in out of each started record that has no outcome yet, by ID
}

// line is any line of the log: an entry (whole or a started record) or an outcome record (Ends set).
type line struct {
	Entry
	Ends string `json:"ends"`
}

func (r *reader) add(raw []byte) {
	var l line
	if json.Unmarshal(raw, &l) != nil {
		return
	}
	if l.Ends != "" {
		if i, ok := r.started[l.Ends]; ok {
			delete(r.started, l.Ends)
			r.out[i].Outcome, r.out[i].Error, r.out[i].DurationMS = l.Outcome, l.Error, l.DurationMS
			r.out[i].Transfer = l.Transfer
		}
		return
	}
	if !r.filter.match(&l.Entry) {
		return
	}
	if l.ID != "" {
		l.Outcome, l.Error, l.DurationMS, l.Transfer = OutcomeStarted, "", 0, nil
		r.started[l.ID] = len(r.out)
	}
	r.out = append(r.out, l.Entry)
}

func (r *reader) readFile(path string) error {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer file.Close()
	br := bufio.NewReaderSize(file, 64<<10)
	for {
		raw, err := br.ReadBytes('\n')
		if raw = bytes.TrimSpace(raw); len(raw) > 0 {
			r.add(raw)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: reading %s: %w", path, err)
		}
	}
}
