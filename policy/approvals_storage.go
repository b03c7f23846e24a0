package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
)

// ApprovalStorage keeps the approvals where every server process and the approve command reach them: files in
// the state directory (OpenApprovals), or the database that replicas share. It holds one document, the list of
// requests, and beside it each request's call.
type ApprovalStorage interface {
	// Location names the storage in messages.
	Location() string
	// Update calls fn with the document (nil when there is none yet) while no other process can change it; with
	// write set it holds it exclusively, and a non-nil document fn returns replaces the stored one atomically.
	Update(write bool, fn func(doc []byte) (next []byte, err error)) error
	// SaveCall keeps the call of request id (called inside a writing Update).
	SaveCall(id string, data []byte) error
	// LoadCall returns the call of request id; an error when there is none.
	LoadCall(id string) ([]byte, error)
	// DropCalls removes every call but those of the requests in keep (called inside a writing Update); a
	// failure only leaves garbage that the next drop removes.
	DropCalls(keep []string)
}

// fileStorage is the approvals in a state directory: approvals.json, replaced atomically (temporary file, fsync,
// rename, directory fsync) under a flock on approvals.lock, and one file per call in approvals.d/.
type fileStorage struct{ dir string }

func (d fileStorage) Location() string { return filepath.Join(d.dir, approvalsFile) }

func (d fileStorage) Update(write bool, fn func([]byte) ([]byte, error)) error {
	lf, err := os.OpenFile(filepath.Join(d.dir, approvalsLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	defer lf.Close()
	lock := filelock.RLock
	if write {
		lock = filelock.Lock
	}
	if err := lock(lf); err != nil {
		return fmt.Errorf("approvals: locking %s: %w", lf.Name(), err)
	}
	defer filelock.Unlock(lf)

	data, err := os.ReadFile(d.Location())
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	next, err := fn(data)
	if err != nil || next == nil || !write {
		return err
	}
	return writeAtomic(d.dir, approvalsFile, next)
}

func (d fileStorage) SaveCall(id string, data []byte) error {
	if err := os.MkdirAll(filepath.Join(d.dir, callsDir), 0o700); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	return writeAtomic(filepath.Join(d.dir, callsDir), id+".json", data)
}

func (d fileStorage) LoadCall(id string) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.dir, callsDir, id+".json"))
}

func (d fileStorage) DropCalls(keep []string) {
	entries, err := os.ReadDir(filepath.Join(d.dir, callsDir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && slices.Contains(keep, id) {
			continue
		}
		os.Remove(filepath.Join(d.dir, callsDir, e.Name()))
	}
}

// writeAtomic replaces dir/name with data: a temporary file, fsync, rename, directory fsync.
func writeAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("approvals: writing %s: %w", tmpName, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("approvals: syncing %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	if err := os.Rename(tmpName, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	ok = true
	if err := filelock.SyncDir(dir); err != nil {
		return fmt.Errorf("approvals: syncing %s: %w", dir, err)
	}
	return nil
}
