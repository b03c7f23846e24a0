package workspace

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// Compare sets the sandbox's listing against the manifest's base. It returns the changes it can tell from the
// listing alone (deletions, symlinks, new modes) and the files whose content must be fetched to tell: those whose
// size or time differ from the base, or that are new. Directories are not changes (git does not track them).
// Base entries t now leaves out are not compared.
func Compare(base map[string]Entry, remote []Entry, t *Tree) (changes []Change, fetch []string) {
	inRemote := make(map[string]bool, len(remote))
	for _, r := range remote {
		inRemote[r.Path] = true
		if r.Type == TypeDir {
			continue
		}
		r := r
		b, had := base[r.Path]
		switch {
		case !had || b.Type != r.Type:
			var old *Entry
			if had && b.Type != TypeDir {
				old = &b
			}
			if r.Type == TypeFile {
				fetch = append(fetch, r.Path)
			}
			changes = append(changes, Change{Path: r.Path, Old: old, New: &r})
		case r.Type == TypeSymlink:
			if r.Link != b.Link {
				changes = append(changes, Change{Path: r.Path, Old: &b, New: &r})
			}
		case r.Size != b.Size || r.MTime != b.MTime:
			fetch = append(fetch, r.Path)
			changes = append(changes, Change{Path: r.Path, Old: &b, New: &r})
		case r.Mode != b.Mode:
			r.Hash = b.Hash
			changes = append(changes, Change{Path: r.Path, Old: &b, New: &r})
		}
	}
	for p, b := range base {
		if b.Type != TypeDir && !inRemote[p] && !t.IgnoredWithin(p, false) {
			changes = append(changes, Change{Path: p, Old: &b})
		}
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return changes, fetch
}

// CheckFetch refuses, before anything is fetched, the files Compare asked for whose sizes in the listing are over
// the limits of what a sync brings back (each file at most limits.MaxFileBytes, all together at most
// limits.MaxTotalBytes), as ReadFetched would once it read them: so that the sandbox does not first write them
// all into a tar of its own (a sparse file of 10 GB is 10 GB there), filling its disk.
func CheckFetch(changes []Change, limits Limits) error {
	sizes := fetchSizes{limits: limits}
	for _, c := range changes {
		if n := c.New; n != nil && n.Type == TypeFile && n.Hash == "" {
			if err := sizes.add(c.Path, n.Size); err != nil {
				return err
			}
		}
	}
	return nil
}

// fetchSizes adds up the files a sync out brings back against its limits.
type fetchSizes struct {
	limits Limits
	total  int64
}

func (f *fetchSizes) add(name string, size int64) error {
	if size > f.limits.MaxFileBytes {
		return &LimitError{Text: fmt.Sprintf("%s is %s in the sandbox, over the %s limit of one file in a sync; "+
			"exclude it or remove it there", name, display.Size(size), display.Size(f.limits.MaxFileBytes))}
	}
	if f.total += size; f.total > f.limits.MaxTotalBytes {
		return &LimitError{Text: fmt.Sprintf("the sandbox's changed files add up to more than %s",
			display.Size(f.limits.MaxTotalBytes))}
	}
	return nil
}

// ReadFetched reads the tar of the files Compare asked for into the changes, and drops the changes whose content
// turned out to be the base's after all (a file rewritten as it was). Only regular files that were asked for
// are taken, each of at most limits.MaxFileBytes, all together at most limits.MaxTotalBytes: the tar is the
// sandbox's word.
func ReadFetched(r io.Reader, changes []Change, limits Limits) ([]Change, error) {
	byPath := map[string]*Change{}
	for i := range changes {
		if n := changes[i].New; n != nil && n.Type == TypeFile && n.Hash == "" {
			byPath[changes[i].Path] = &changes[i]
		}
	}
	tr := tar.NewReader(r)
	sizes := fetchSizes{limits: limits}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the sandbox's files cannot be read: %w", err)
		}
		c, asked := byPath[hdr.Name]
		if !asked || c.NewData != nil || hdr.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("the sandbox sent %q, which was not asked for (or not as a regular file)", hdr.Name)
		}
		if err := sizes.add(hdr.Name, hdr.Size); err != nil {
			return nil, err
		}
		data := make([]byte, hdr.Size)
		if _, err := io.ReadFull(tr, data); err != nil {
			return nil, fmt.Errorf("the sandbox's copy of %s is cut short: %w", hdr.Name, err)
		}
		sum := sha256.Sum256(data)
		c.NewData, c.New.Hash, c.New.Size = data, hex.EncodeToString(sum[:]), hdr.Size
	}
	out := changes[:0]
	for _, c := range changes {
		if c.New != nil && c.New.Type == TypeFile && c.New.Hash == "" {
			return nil, fmt.Errorf("the sandbox did not send %s", c.Path)
		}
		if c.Old != nil && c.New != nil && same(*c.Old, *c.New) {
			continue
		}
		if c.New != nil && c.New.Type == TypeSymlink {
			c.NewData = []byte(c.New.Link)
		}
		out = append(out, c)
	}
	return out, nil
}

// Conflict is a path whose local side changed since the sync in, so that the sandbox's change to it has no base
// to apply to.
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// ReadBase fills in each change's base from the local tree under root, checking it is what the sync in sent: a
// path that is no longer so (or, for an addition, that exists locally) is a conflict, and so is a path the
// change may not take (a symlink on the way to it, a new symlink leading out of the tree).
func ReadBase(root *os.Root, changes []Change) []Conflict {
	var conflicts []Conflict
	for i := range changes {
		c := &changes[i]
		if why := checkBase(root, c); why != "" {
			conflicts = append(conflicts, Conflict{Path: c.Path, Why: why})
		}
	}
	return conflicts
}

func checkBase(root *os.Root, c *Change) string {
	if !Local(c.Path) {
		return "not a path inside the tree"
	}
	if why := checkParents(root, c.Path); why != "" {
		return why
	}
	if c.New != nil && c.New.Type == TypeSymlink && !LinkInside(c.Path, c.New.Link) {
		return "the sandbox made it a symlink pointing outside the tree"
	}
	fi, err := root.Lstat(c.Path)
	if c.Old == nil {
		if err == nil {
			return "added in the sandbox, but it exists locally too"
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err.Error()
		}
		return ""
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "deleted locally since the sync in"
		}
		return err.Error()
	}
	switch c.Old.Type {
	case TypeSymlink:
		link, err := root.Readlink(c.Path)
		if fi.Mode()&fs.ModeSymlink == 0 || err != nil || link != c.Old.Link {
			return "changed locally since the sync in"
		}
		c.OldData = []byte(link)
	case TypeFile:
		if !fi.Mode().IsRegular() || fi.Size() != c.Old.Size {
			return "changed locally since the sync in"
		}
		data, err := readAll(root, c.Path, c.Old.Size)
		if err != nil {
			return err.Error()
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != c.Old.Hash {
			return "changed locally since the sync in"
		}
		if uint32(fi.Mode().Perm())|specialBits(fi.Mode()) != c.Old.Mode {
			return "its mode changed locally since the sync in"
		}
		c.OldData = data
		if c.New != nil && c.New.Type == TypeFile && c.NewData == nil && c.New.Hash == c.Old.Hash {
			c.NewData = data // a change of mode only
		}
	}
	return ""
}

func readAll(root *os.Root, name string, size int64) ([]byte, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err == nil && int64(len(data)) != size {
		err = fmt.Errorf("%s changed while it was read", name)
	}
	return data, err
}

// checkParents refuses a path one of whose directories is a symlink (or not a directory) locally: writing
// through it could land anywhere.
func checkParents(root *os.Root, p string) string {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		fi, err := root.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return err.Error()
		case fi.Mode()&fs.ModeSymlink != 0:
			return "its directory " + d + " is a symlink locally"
		case !fi.IsDir():
			return "its directory " + d + " is not a directory locally"
		}
	}
	return ""
}

// ConflictError refuses an apply: nothing was changed.
type ConflictError struct{ Conflicts []Conflict }

func (e *ConflictError) Error() string {
	var names []string
	for _, c := range e.Conflicts {
		names = append(names, c.Path+" ("+c.Why+")")
	}
	return "nothing was applied: " + strings.Join(names, "; ")
}

// Apply makes the local tree under root what the changes say, all or nothing: every base is checked (ReadBase)
// and every new file written beside its target first; the base is checked again, then the targets are swapped
// in by rename, each old one kept until all are in, and put back should any step fail. Directories it made and
// directories the changes emptied are removed (git's way), unless the sandbox still has them (keepDirs).
func Apply(root *os.Root, changes []Change, keepDirs map[string]bool) error {
	if conflicts := ReadBase(root, changes); len(conflicts) > 0 {
		return &ConflictError{Conflicts: conflicts}
	}
	tag := randomTag()
	var made []string // directories made, in order
	staged := map[string]string{}
	cleanup := func() {
		for _, tmp := range staged {
			root.Remove(tmp)
		}
		for i := len(made) - 1; i >= 0; i-- {
			root.Remove(made[i])
		}
	}
	for _, c := range changes {
		if c.New == nil {
			continue
		}
		dirs, err := mkdirs(root, path.Dir(c.Path))
		made = append(made, dirs...)
		if err != nil {
			cleanup()
			return fmt.Errorf("nothing was applied: making the directory of %s: %w", c.Path, err)
		}
		tmp := path.Join(path.Dir(c.Path), ".e2b-sync-"+tag+"-"+path.Base(c.Path))
		if err := stage(root, tmp, c); err != nil {
			cleanup()
			return fmt.Errorf("nothing was applied: writing %s: %w", c.Path, err)
		}
		staged[c.Path] = tmp
	}
	// The local tree may have changed while the new files were written.
	if conflicts := ReadBase(root, changes); len(conflicts) > 0 {
		cleanup()
		return &ConflictError{Conflicts: conflicts}
	}
	type swap struct{ target, old string }
	var done []swap
	placed := map[string]bool{}
	rollback := func() {
		for i := len(done) - 1; i >= 0; i-- {
			s := done[i]
			if placed[s.target] {
				root.Remove(s.target)
			}
			if s.old != "" {
				root.Rename(s.old, s.target)
			}
		}
		cleanup()
	}
	for _, c := range changes {
		s := swap{target: c.Path}
		if c.Old != nil {
			s.old = path.Join(path.Dir(c.Path), ".e2b-sync-"+tag+"-old-"+path.Base(c.Path))
			if err := root.Rename(c.Path, s.old); err != nil {
				rollback()
				return fmt.Errorf("nothing was applied: moving %s aside: %w", c.Path, err)
			}
		}
		done = append(done, s)
		if tmp, ok := staged[c.Path]; ok {
			if err := root.Rename(tmp, c.Path); err != nil {
				rollback()
				return fmt.Errorf("nothing was applied: putting %s in place: %w", c.Path, err)
			}
			delete(staged, c.Path)
			placed[c.Path] = true
		}
	}
	for _, s := range done {
		if s.old != "" {
			root.Remove(s.old)
		}
	}
	for _, c := range changes {
		if c.New != nil {
			continue
		}
		for d := path.Dir(c.Path); d != "." && !keepDirs[d]; d = path.Dir(d) {
			if root.Remove(d) != nil {
				break // not empty, or gone already
			}
		}
	}
	return nil
}

// mkdirs makes dir and its missing parents under root, returning those it made.
func mkdirs(root *os.Root, dir string) ([]string, error) {
	var missing []string
	for d := dir; d != "."; d = path.Dir(d) {
		if _, err := root.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := root.Mkdir(missing[i], 0o755); err != nil {
			return made, err
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// stage writes the new side of c at tmp: a file with its mode, or a symlink.
func stage(root *os.Root, tmp string, c Change) error {
	if c.New.Type == TypeSymlink {
		return root.Symlink(c.New.Link, tmp)
	}
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(c.NewData)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(tmp, fs.FileMode(c.New.Mode&0o777))
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}

func randomTag() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
