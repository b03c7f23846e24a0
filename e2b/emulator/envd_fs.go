package emulator

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// The filesystem as envd's filesystem RPC and /files see it. Only the sandbox's own directories exist there:
// /home/user, /root and /tmp (the host directories under the sandbox's Dir), plus / and /home as read-only
// directories that hold them. The host's system directories that processes see read-only (/usr, /etc, ...) are
// not visible here: the emulator serves files with its own rights, which may be root's, so every other path is
// reported as missing, and creating anything outside the sandbox's directories fails as on a read-only
// filesystem.
//
// Paths are resolved in the sandbox's namespace: a symlink's absolute target is a sandbox path, "..", never
// leaves /, and the final host operations go through os.Root, so that no path or symlink, even one that a
// sandbox process swaps in concurrently, reaches a host file outside the sandbox's directories.

// maxSymlinks is the kernel's (and filepath.EvalSymlinks') limit on symlinks followed in one path.
const maxSymlinks = 255

type sandboxFS struct {
	dir   string
	roots map[string]*os.Root // by mount path, opened on first use
	// synthTime is the modification time reported for / and /home.
	synthTime time.Time
}

func newSandboxFS(dir string, synthTime time.Time) *sandboxFS {
	return &sandboxFS{dir: dir, roots: map[string]*os.Root{}, synthTime: synthTime}
}

func (f *sandboxFS) close() {
	for _, r := range f.roots {
		r.Close()
	}
}

// locate finds the host directory holding a clean sandbox path whose parents hold no symlinks: the mount's
// root and the path relative to it ("." for the mount point itself).
func (f *sandboxFS) locate(p string) (*os.Root, string, error) {
	for _, m := range sandboxMounts() {
		rel, ok := strings.CutPrefix(p, m.at)
		if !ok || (rel != "" && rel[0] != '/') {
			continue
		}
		rel = strings.TrimPrefix(rel, "/")
		if rel == "" {
			rel = "."
		}
		r := f.roots[m.at]
		if r == nil {
			var err error
			if r, err = os.OpenRoot(filepath.Join(f.dir, m.sub)); err != nil {
				return nil, "", err
			}
			f.roots[m.at] = r
		}
		return r, rel, nil
	}
	return nil, "", fs.ErrNotExist
}

// hostPath is where a located sandbox path is on the host.
func (f *sandboxFS) hostPath(p string) (string, bool) {
	for _, m := range sandboxMounts() {
		if rel, ok := strings.CutPrefix(p, m.at); ok && (rel == "" || rel[0] == '/') {
			return filepath.Join(f.dir, m.sub, filepath.FromSlash(rel)), true
		}
	}
	return "", false
}

// syntheticChildren lists / and /home, the directories that only hold mounts.
func syntheticChildren(p string) ([]string, bool) {
	switch p {
	case "/":
		return []string{"home", "root", "tmp"}, true
	case "/home":
		return []string{"user"}, true
	}
	return nil, false
}

// synthInfo is the FileInfo of / and /home.
type synthInfo struct {
	name    string
	modTime time.Time
}

func (s synthInfo) Name() string       { return s.name }
func (s synthInfo) Size() int64        { return 4096 }
func (s synthInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (s synthInfo) ModTime() time.Time { return s.modTime }
func (s synthInfo) IsDir() bool        { return true }
func (s synthInfo) Sys() any           { return nil }

// pathErr is an error about a sandbox path with the errno of the failure, worded as Go words it.
func pathErr(op, p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}

// lstat describes a sandbox path whose parents hold no symlinks, without following a final symlink.
func (f *sandboxFS) lstat(p string) (fs.FileInfo, error) {
	if _, ok := syntheticChildren(p); ok {
		return synthInfo{name: path.Base(p), modTime: f.synthTime}, nil
	}
	r, rel, err := f.locate(p)
	if err != nil {
		return nil, pathErr("lstat", p, syscall.ENOENT)
	}
	fi, err := r.Lstat(rel)
	if err != nil {
		return nil, pathErr("lstat", p, err)
	}
	return fi, nil
}

// resolve resolves the symlinks of a clean absolute sandbox path: all of them, or all but a final one when
// followLast is false. On failure the error is an *fs.PathError naming the path that failed, and the returned
// path is that path with the rest of the components still to resolve, so that a caller about to create a file
// can tell whether only the last component is missing (returned path equal to the error's).
func (f *sandboxFS) resolve(p string, followLast bool) (string, error) {
	rest := splitPath(p)
	done := "/"
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, c)
		if len(rest) == 0 && !followLast {
			return next, nil
		}
		fi, err := f.lstat(next)
		if err != nil {
			return path.Join(append([]string{next}, rest...)...), err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if len(rest) > 0 && !fi.IsDir() {
				return next, pathErr("lstat", path.Join(append([]string{next}, rest...)...), syscall.ENOTDIR)
			}
			done = next
			continue
		}
		links++
		if links > maxSymlinks {
			return next, pathErr("lstat", next, syscall.ELOOP)
		}
		target, err := f.readlink(next)
		if err != nil {
			return next, err
		}
		if path.IsAbs(target) {
			done = "/"
		}
		rest = append(splitPath(target), rest...)
	}
	return done, nil
}

func splitPath(p string) []string {
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			parts = append(parts, c)
		}
	}
	return parts
}

func (f *sandboxFS) readlink(p string) (string, error) {
	r, rel, err := f.locate(p)
	if err != nil {
		return "", pathErr("readlink", p, syscall.EINVAL)
	}
	t, err := r.Readlink(rel)
	if err != nil {
		return "", pathErr("readlink", p, err)
	}
	return t, nil
}

// resolveParent resolves every symlink of p but a final one.
func (f *sandboxFS) resolveParent(p string) (string, error) {
	if p == "/" {
		return p, nil
	}
	dir, err := f.resolve(path.Dir(p), true)
	if err != nil {
		return path.Join(dir, path.Base(p)), err
	}
	return path.Join(dir, path.Base(p)), nil
}

// stat follows every symlink of p and describes what it names.
func (f *sandboxFS) stat(p string) (string, fs.FileInfo, error) {
	r, err := f.resolve(p, true)
	if err != nil {
		return r, nil, err
	}
	fi, err := f.lstat(r)
	return r, fi, err
}

// isNotExist is an error for a missing path.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func fileType(m fs.FileMode) envd.FileType {
	switch {
	case m.IsRegular():
		return envd.FileTypeFile
	case m.IsDir():
		return envd.FileTypeDirectory
	case m&fs.ModeSymlink != 0:
		return envd.FileTypeSymlink
	}
	return envd.FileTypeUnspecified
}

// pbTimestamp formats a google.protobuf.Timestamp as protojson does: UTC, with 0, 3, 6 or 9 fractional digits.
func pbTimestamp(t time.Time) string {
	s := t.UTC().Format("2006-01-02T15:04:05.000000000")
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, "000")
	s = strings.TrimSuffix(s, ".000")
	return s + "Z"
}

// ownerName names the owner (uid) or group (gid) of a host file as the sandbox sees it: the emulator's own
// (own is its euid or egid) is the sandbox user's.
func ownerName(id uint32, own int) string {
	switch {
	case int(id) == own:
		return "user"
	case id == 0:
		return "root"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// entryOf describes display (the path as the caller named it) from the lstat of its resolved form phys. A symlink
// has the type and permission bits of its target, and symlinkTarget names the target (or the link itself when
// the target cannot be resolved), as envd reports it.
func (f *sandboxFS) entryOf(display, phys string, fi fs.FileInfo) envd.EntryInfo {
	e := envd.EntryInfo{
		Name:         path.Base(display),
		Path:         display,
		Size:         envd.Int64(fi.Size()),
		Permissions:  fi.Mode().String(),
		ModifiedTime: pbTimestamp(fi.ModTime()),
		Owner:        "root",
		Group:        "root",
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = ownerName(st.Uid, os.Geteuid()), ownerName(st.Gid, os.Getegid())
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		e.Type = fileType(fi.Mode())
		e.Mode = envd.Uint32(fi.Mode().Perm())
		return e
	}
	target, tfi, err := f.stat(phys)
	if err != nil {
		t := display
		e.SymlinkTarget = &t
		return e
	}
	e.SymlinkTarget = &target
	e.Type = fileType(tfi.Mode())
	e.Mode = envd.Uint32(tfi.Mode().Perm())
	return e
}

// entry describes a path without following a final symlink (envd's Lstat).
func (f *sandboxFS) entry(display string) (envd.EntryInfo, error) {
	phys, err := f.resolveParent(display)
	if err == nil {
		var fi fs.FileInfo
		if fi, err = f.lstat(phys); err == nil {
			return f.entryOf(display, phys, fi), nil
		}
	}
	return envd.EntryInfo{}, pathErr("lstat", display, err)
}

// readDirNames lists a resolved directory, sorted as filepath.WalkDir visits it.
func (f *sandboxFS) readDirNames(p string) ([]string, error) {
	if names, ok := syntheticChildren(p); ok {
		return names, nil
	}
	r, rel, err := f.locate(p)
	if err != nil {
		return nil, pathErr("open", p, syscall.ENOENT)
	}
	d, err := r.Open(rel)
	if err != nil {
		return nil, pathErr("open", p, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, pathErr("readdirent", p, err)
	}
	slices.Sort(names)
	return names, nil
}

// walk lists a resolved directory to depth, not following symlinks below it; entries carry display paths.
func (f *sandboxFS) walk(display, phys string, depth int, out *[]envd.EntryInfo) error {
	names, err := f.readDirNames(phys)
	if err != nil {
		return err
	}
	for _, name := range names {
		cp, cd := path.Join(phys, name), path.Join(display, name)
		fi, err := f.lstat(cp)
		if err != nil {
			if isNotExist(err) {
				continue // removed while listing
			}
			return err
		}
		*out = append(*out, f.entryOf(cd, cp, fi))
		if fi.IsDir() && depth > 1 {
			if err := f.walk(cd, cp, depth-1, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// errReadOnly is what creating something outside the sandbox's directories meets.
const errReadOnly = syscall.EROFS

// ensureDirs creates p and its missing parents (mode 0755), as envd's EnsureDirs does.
func (f *sandboxFS) ensureDirs(p string) error {
	parts := splitPath(p)
	for i := range parts {
		sub := "/" + strings.Join(parts[:i+1], "/")
		r, err := f.resolve(sub, true)
		if err == nil {
			fi, err := f.lstat(r)
			if err != nil {
				return fmt.Errorf("failed to stat directory: %w", pathErr("stat", sub, err))
			}
			if !fi.IsDir() {
				return fmt.Errorf("path is a file: %s", sub)
			}
			continue
		}
		var pe *fs.PathError
		if !isNotExist(err) || !errors.As(err, &pe) || pe.Path != r {
			return fmt.Errorf("failed to stat directory: %w", pathErr("stat", sub, err))
		}
		if err := f.mkdir(r); err != nil {
			return fmt.Errorf("failed to create directory: %w", pathErr("mkdir", sub, err))
		}
	}
	return nil
}

// mkdir makes one directory whose parent exists and is resolved.
func (f *sandboxFS) mkdir(p string) error {
	r, rel, err := f.locate(p)
	if err != nil {
		return errReadOnly
	}
	return r.Mkdir(rel, 0o755)
}

// Filesystem RPCs.

// errnoOf is the bare cause of a path error, as a LinkError prints it.
func errnoOf(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// rename moves src to dst; neither final component is followed.
func (f *sandboxFS) rename(src, dst string) error {
	sp, err := f.resolveParent(src)
	if err != nil {
		return err
	}
	dp, err := f.resolveParent(dst)
	if err != nil {
		return err
	}
	sr, srel, err := f.locate(sp)
	if err != nil {
		if _, synth := syntheticChildren(sp); synth {
			return pathErr("rename", src, syscall.EBUSY)
		}
		return pathErr("rename", src, syscall.ENOENT)
	}
	if _, err := sr.Lstat(srel); err != nil {
		return pathErr("rename", src, err)
	}
	dr, drel, err := f.locate(dp)
	if err != nil {
		return pathErr("rename", dst, errReadOnly)
	}
	if srel == "." || drel == "." {
		return pathErr("rename", src, syscall.EBUSY)
	}
	if sr == dr {
		return sr.Rename(srel, drel)
	}
	// Across the sandbox's directories (/tmp to /home/user): both are on the host's filesystem under Dir.
	hs, _ := f.hostPath(sp)
	hd, _ := f.hostPath(dp)
	return os.Rename(hs, hd)
}

// removeAll removes p and what it holds, not following a final symlink; a missing path is no error (os.RemoveAll).
func (f *sandboxFS) removeAll(p string) error {
	phys, err := f.resolveParent(p)
	if err != nil {
		if isNotExist(err) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	if _, synth := syntheticChildren(phys); synth {
		return pathErr("unlinkat", p, syscall.EBUSY)
	}
	r, rel, err := f.locate(phys)
	if err != nil {
		return nil
	}
	if rel != "." {
		if err := r.RemoveAll(rel); err != nil {
			return pathErr("unlinkat", p, err)
		}
		return nil
	}
	// The mount point itself: empty it; the directory stays, as a mount point would.
	names, err := f.readDirNames(phys)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := r.RemoveAll(n); err != nil {
			return pathErr("unlinkat", path.Join(p, n), err)
		}
	}
	return pathErr("unlinkat", p, syscall.EBUSY)
}

// expandPath resolves a path as envd's ExpandAndResolve does: empty means the default workdir (or home), "~"
// expands to the user's home, and a relative path is relative to the home. The result is clean.
func expandPath(p string, u sandboxUser, defaultWorkdir string) (string, error) {
	if p == "" {
		p = defaultWorkdir
	}
	if strings.HasPrefix(p, "~") {
		if len(p) > 1 && p[1] != '/' && p[1] != '\\' {
			return "", fmt.Errorf("failed to expand path '%s' for user '%s': cannot expand user-specific home dir", p, u.Name)
		}
		p = path.Join(u.Home, p[1:])
	}
	if !path.IsAbs(p) {
		p = path.Join(u.Home, p)
	}
	return path.Clean(p), nil
}
