// Package workspace copies a directory tree of the user's machine into a sandbox and brings the sandbox's changes
// back: which files a sync takes (the tree's .gitignore files, the caller's excludes, files that look like
// secrets), the manifest of what was last sent, the tar stream that sends it, the sandbox's listing, the diff
// that git apply accepts, and the all-or-nothing apply of it to the local tree. It knows nothing of MCP or of
// how the sandbox is reached: the tools hand it readers, writers and the sandbox's answers.
package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// Types of Entry.
const (
	TypeFile    = "f"
	TypeDir     = "d"
	TypeSymlink = "l"
)

// Entry is one file, directory or symlink of a tree.
type Entry struct {
	Path  string `json:"p"`           // slash-separated, relative to the tree's root
	Type  string `json:"t"`           // TypeFile, TypeDir or TypeSymlink
	Mode  uint32 `json:"m,omitempty"` // permission bits (with setuid, setgid, sticky)
	Size  int64  `json:"s,omitempty"`
	MTime int64  `json:"mt,omitempty"` // Unix nanoseconds
	Hash  string `json:"h,omitempty"`  // SHA-256 of a file's content, hex
	Link  string `json:"l,omitempty"`  // a symlink's target
	// Local is a local file's stat as a walk saw it, and in a manifest as the sync that knew Hash to be its content
	// saw it: what the next sync's quick check compares (see PlanSync). Nil for what came from the sandbox.
	Local *Stat `json:"ls,omitempty"`
}

// Stat is what the quick check compares of a local file, as git's index does: its size, its modification and
// change times and its inode. The change time is the kernel's: restoring a file's modification time after an
// edit (touch -r, a tool that keeps times) sets it anew. 0 where the system has none (Windows).
type Stat struct {
	Size  int64  `json:"s"`
	MTime int64  `json:"mt"`
	CTime int64  `json:"ct,omitempty"`
	Ino   uint64 `json:"i,omitempty"`
}

// Limits bound what one sync takes, so that a tree of a million files or a file of 10 GB is refused at once, with
// its name, rather than filling the server's memory or the sandbox's disk.
type Limits struct {
	MaxEntries    int
	MaxFileBytes  int64
	MaxTotalBytes int64
}

// pathListAverage is what a list of paths (a sync in's deletions, a sync out's fetch) may take a path on average:
// each path may be as long as MaxNameBytes, but a list of the most entries each that long (200 MB at the default
// limits) is no tree anyone syncs, and the server would hold it whole.
const pathListAverage = 256

// MaxPathListBytes bounds a list of paths of one sync, NUL-separated, on its total.
func (l Limits) MaxPathListBytes() int64 { return int64(l.MaxEntries) * pathListAverage }

// DefaultLimits are the limits of a sync unless the server sets others.
var DefaultLimits = Limits{MaxEntries: 50_000, MaxFileBytes: 256 << 20, MaxTotalBytes: 2 << 30}

// Options say what a walk takes besides what .gitignore files leave out.
type Options struct {
	// Excludes are more patterns in .gitignore syntax, relative to the root, that win over the tree's own.
	Excludes []string
	// IncludeGit takes the repository's .git directory at the root (so that git works in the sandbox).
	IncludeGit bool
	// IncludeSecrets takes files that look like secrets (.env, private keys), which are left out otherwise.
	IncludeSecrets bool
	Limits         Limits
}

// LeftOut is a path a walk did not take, and why.
type LeftOut struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// Reasons of LeftOut.
const (
	WhySecret       = "looks like a secret"
	WhyLinkOutside  = "symlink pointing outside the tree"
	WhyNotAFile     = "not a regular file, directory or symlink"
	WhyUnreadableIg = "its .gitignore could not be read"
)

// Tree is a walked directory: its entries sorted by path (a directory before what it holds), what was left out,
// and the rules that decided, which also judge the sandbox's copy of it.
type Tree struct {
	Entries []Entry
	LeftOut []LeftOut
	Bytes   int64
	// Started is the wall clock (Unix nanoseconds) just before the walk took its first stat: a file changed after
	// it has times no older than it (see racy).
	Started int64
	rules   map[string]Rules // by directory, for the directories holding a .gitignore and the root
	opts    Options
	secrets Rules
	extra   Rules
}

// LimitError says a walk or a listing went past one of its Limits.
type LimitError struct{ Text string }

func (e *LimitError) Error() string { return e.Text }

// Walk lists the tree under root without following a symlink: the root's .gitignore files and opts decide what
// it takes. Files are not read (see Hash).
func Walk(root *os.Root, opts Options) (*Tree, error) {
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits
	}
	t := &Tree{rules: map[string]Rules{}, opts: opts, secrets: secretRules(), Started: time.Now().UnixNano()}
	if err := t.extra.add("", strings.NewReader(strings.Join(opts.Excludes, "\n"))); err != nil {
		return nil, err
	}
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			t.rules["."] = t.readIgnore(root, ".", Rules{})
			return nil
		}
		isDir := d.IsDir()
		if skip, why := t.skip(name, isDir); skip {
			if why != "" {
				t.LeftOut = append(t.LeftOut, LeftOut{Path: name, Why: why})
			}
			if isDir {
				return fs.SkipDir
			}
			return nil
		}
		if len(t.Entries) >= opts.Limits.MaxEntries {
			return &LimitError{Text: fmt.Sprintf("the tree has more than %d files and directories to sync (after .gitignore "+
				"and excludes); exclude what the sandbox does not need (build outputs, dependencies, data) with exclude",
				opts.Limits.MaxEntries)}
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: name, Mode: uint32(info.Mode().Perm()) | specialBits(info.Mode()), MTime: info.ModTime().UnixNano()}
		switch {
		case isDir:
			e.Type = TypeDir
			if gi := t.readIgnore(root, name, t.rulesOf(name)); gi.patterns != nil {
				t.rules[name] = gi
			}
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := root.Readlink(name)
			if err != nil {
				return err
			}
			if !LinkInside(name, target) {
				t.LeftOut = append(t.LeftOut, LeftOut{Path: name, Why: WhyLinkOutside})
				return nil
			}
			e.Type, e.Link, e.Mode = TypeSymlink, target, 0o777
		case info.Mode().IsRegular():
			e.Type, e.Size = TypeFile, info.Size()
			e.Local = statOf(info)
			if e.Size > opts.Limits.MaxFileBytes {
				return &LimitError{Text: fmt.Sprintf("%s is %s, over the %s limit of one file in a sync (a sparse or generated "+
					"file?); exclude it with exclude", name, display.Size(e.Size), display.Size(opts.Limits.MaxFileBytes))}
			}
			if t.Bytes += e.Size; t.Bytes > opts.Limits.MaxTotalBytes {
				return &LimitError{Text: fmt.Sprintf("the files to sync add up to more than %s; exclude what the sandbox does "+
					"not need (build outputs, dependencies, data) with exclude", display.Size(opts.Limits.MaxTotalBytes))}
			}
		default:
			t.LeftOut = append(t.LeftOut, LeftOut{Path: name, Why: WhyNotAFile})
			return nil
		}
		t.Entries = append(t.Entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// LinkInside reports whether a symlink at name (in a tree) with this target stays inside the tree, read without
// following anything: a relative target that does not climb above the root.
func LinkInside(name, target string) bool {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
		return false
	}
	return Local(path.Join(path.Dir(name), target)) || path.Join(path.Dir(name), target) == "."
}

// Local reports whether p is a clean relative path inside a tree: not absolute, no "..", no empty or "."
// elements, no NUL.
func Local(p string) bool {
	if p == "" || p == "." || path.IsAbs(p) || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return false
	}
	return path.Clean(p) == p && !slices.Contains(strings.Split(p, "/"), "..")
}

// readIgnore returns parent's rules with those of dir's .gitignore after them; a .gitignore that cannot be read
// is named in LeftOut and leaves the rules as they were.
func (t *Tree) readIgnore(root *os.Root, dir string, parent Rules) Rules {
	name := path.Join(dir, ".gitignore")
	f, err := root.OpenFile(name, readFlags, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			t.LeftOut = append(t.LeftOut, LeftOut{Path: name, Why: WhyUnreadableIg})
		}
		return parent
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return parent
	}
	base := dir
	if base == "." {
		base = ""
	}
	out, err := parent.with(base, io.LimitReader(f, 1<<20))
	if err != nil {
		t.LeftOut = append(t.LeftOut, LeftOut{Path: name, Why: WhyUnreadableIg})
		return parent
	}
	return out
}

// rulesOf returns the .gitignore rules that apply in directory dir: those of its nearest directory that has any.
func (t *Tree) rulesOf(dir string) Rules {
	for d := dir; ; d = path.Dir(d) {
		if r, ok := t.rules[d]; ok {
			return r
		}
		if d == "." || d == "/" {
			return Rules{}
		}
	}
}

// skip says whether a sync leaves name out, and why when a note should say so ("" for what .gitignore and the
// excludes leave out, which the user chose).
func (t *Tree) skip(name string, dir bool) (bool, string) {
	base := path.Base(name)
	if base == ".git" && !(t.opts.IncludeGit && name == ".git") {
		return true, ""
	}
	if strings.HasPrefix(name, ".git/") {
		return false, "" // the repository is taken whole, as git keeps it
	}
	if t.rulesOf(path.Dir(name)).Ignored(name, dir) || t.extra.Ignored(name, dir) {
		return true, ""
	}
	if !dir && !t.opts.IncludeSecrets && t.secrets.Ignored(name, false) {
		return true, WhySecret
	}
	return false, ""
}

// Ignored reports whether a path of the sandbox's copy of the tree is out of the sync (its rules, and .git,
// which the sandbox's changes never touch in the local tree): what is ignored is neither diffed nor applied.
func (t *Tree) Ignored(name string, dir bool) bool {
	if name == ".git" || strings.HasPrefix(name, ".git/") || path.Base(name) == ".git" {
		return true
	}
	skip, _ := t.skip(name, dir)
	return skip
}

// IgnoredWithin is Ignored of name and of every directory above it: what a walk would not reach.
func (t *Tree) IgnoredWithin(name string, dir bool) bool {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if t.Ignored(d, true) {
			return true
		}
	}
	return t.Ignored(name, dir)
}

// PrunedNames are names the sandbox's listing may prune wherever they are (see Rules.prunedNames).
func (t *Tree) PrunedNames() []string {
	names := []string{".git"}
	names = append(names, t.rules["."].prunedNames()...)
	return append(names, t.extra.prunedNames()...)
}
