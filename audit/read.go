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

	var out []Entry
	for _, p := range paths {
		if out, err = readFile(p, f, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readFile(path string, f Filter, out []Entry) ([]Entry, error) {
	file, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var e Entry
			if json.Unmarshal(line, &e) == nil && f.match(&e) {
				out = append(out, e)
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("audit: reading %s: %w", path, err)
		}
	}
}
