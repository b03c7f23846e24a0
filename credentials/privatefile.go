package credentials

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/e2b-mcp/e2b-mcp/internal/filelock"
)

// readPrivateFile reads a regular file of at most limit bytes that must not be accessible to group or others.
// what names the file in messages ("tokens file"); kind is wrapped by every complaint about the file itself.
func readPrivateFile(path, what string, limit int64, kind error) ([]byte, error) {
	data, f, _, err := openPrivateFile(path, what, limit, kind)
	if err != nil {
		return nil, err
	}
	f.Close()
	return data, nil
}

// openPrivateFile is readPrivateFile that returns the file too, still open, for a reader that remembers this
// version of it (fileVersion); the caller closes it.
func openPrivateFile(path, what string, limit int64, kind error) ([]byte, *os.File, os.FileInfo, error) {
	// Without O_NONBLOCK, opening a named pipe put in the file's place would wait for a writer, perhaps for good,
	// before the file could be found not to be a regular one. A regular file's reads are not changed by it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	data, fi, err := readOpenPrivateFile(f, path, what, limit, kind)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	return data, f, fi, nil
}

// readOpenPrivateFile is openPrivateFile's check and read of the file it opened.
func readOpenPrivateFile(f *os.File, path, what string, limit int64, kind error) ([]byte, os.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%w: %s is not a regular file", kind, path)
	}
	if err := checkPrivate(path, fi, kind); err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("%w: %s is larger than %d bytes", kind, path, limit)
	}
	return data, fi, nil
}

// fileVersion is the version of a file that a reader last parsed, to tell at the next read whether the file
// changed without reading it again. The file is kept open while it is remembered: a file system gives a freed
// inode's number to the next new file at once (ext4 does), and a file written with the same size, mode and
// modification time (a clock stepped back, a copy that keeps times) would then pass for the one remembered.
// An open file's inode is not freed, so no new file gets its number. Writers always write a new file and rename
// it over the old one; on Windows, where an open file cannot be replaced so, the file is not kept open.
type fileVersion struct {
	file *os.File
	info os.FileInfo
}

// is reports whether fi (of the path, now) is the version remembered.
func (v *fileVersion) is(fi os.FileInfo) bool {
	a := v.info
	return a != nil && os.SameFile(a, fi) && a.ModTime().Equal(fi.ModTime()) && a.Size() == fi.Size() &&
		a.Mode() == fi.Mode()
}

// remember makes f, open as openPrivateFile returned it, with its fi, the version remembered.
func (v *fileVersion) remember(f *os.File, fi os.FileInfo) {
	v.forget()
	if runtime.GOOS == "windows" {
		f.Close()
		f = nil
	}
	v.file, v.info = f, fi
}

// forget lets go of the version remembered.
func (v *fileVersion) forget() {
	if v.file != nil {
		v.file.Close()
	}
	v.file, v.info = nil, nil
}

// checkPrivate refuses a file that group or others may read or write. Windows has no such mode bits; there the
// file's ACL (inherited from the user's profile directory) is what protects it.
func checkPrivate(path string, fi os.FileInfo, kind error) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%w: %s has mode %04o, so other users may read or change it; run chmod 600 %s",
			kind, path, perm, path)
	}
	return nil
}

// writePrivateFile replaces path with data atomically (a temporary file in the same directory, synced, then
// renamed over it), with mode 0600, creating the directory (0700) if needed. A crash leaves the old file or the
// new one, never a half-written one. afterStep, when not nil (tests), is called after each step ("written",
// "synced", "renamed"); an error it returns stops the write there.
func writePrivateFile(path, what string, data []byte, afterStep func(step string) error) error {
	step := func(name string) error {
		if afterStep == nil {
			return nil
		}
		return afterStep(name)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	tmp, err := os.CreateTemp(dir, tempPrefix(path)+"*")
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: writing %s: %w", what, tmp.Name(), err)
	}
	if err := step("written"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: writing %s: %w", what, tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: writing %s: %w", what, tmp.Name(), err)
	}
	if err := step("synced"); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return step("renamed")
}

// lockedUpdate runs f, which rewrites path, holding path's lock file (path + ".lock"), which every process
// rewriting path takes. Every such writer holds the lock while its temporary file exists, so one found once the
// lock is taken was left by a writer that died, and goes (its content may be sealed under a master key being
// rotated away from). what names the file in messages. Where the platform has no file locks, f runs unlocked.
func lockedUpdate(path, what string, f func() error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer lock.Close()
	switch err := filelock.Lock(lock); {
	case err == nil:
		removeTempFiles(path)
	case !errors.Is(err, filelock.ErrUnsupported):
		return fmt.Errorf("%s: locking %s: %w", what, lock.Name(), err)
	}
	return f()
}

// tempPrefix begins the name of every temporary file writePrivateFile makes for path.
func tempPrefix(path string) string { return "." + filepath.Base(path) + "-" }

// removeTempFiles removes the temporary files that writes of path left when their process died. Only a caller
// that holds a lock every writer of path takes may call it.
func removeTempFiles(path string) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix(path)) && e.Type().IsRegular() {
			_ = os.Remove(filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
}
