package workspace

import (
	"bytes"
	"fmt"

	"path"
	"strconv"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
)

// The sandbox side of a sync is plain commands of a Debian sandbox (bash, GNU tar, find), each run once per call;
// their output is the sandbox's word, which is checked as any input would be.

// UnpackCommand unpacks the tar at tarPath into dir (created if missing) with modes and times as sent and the
// files owned by whoever runs it, removes the paths listed (NUL-separated) in deletePath when it is not "", then
// moves the manifest at manifestTmp to manifestPath: the manifest names the new state only once it is there.
func UnpackCommand(dir, tarPath, deletePath, manifestTmp, manifestPath string) string {
	q := shellquote.Quote
	var b strings.Builder
	fmt.Fprintf(&b, "set -e; mkdir -p -- %s; ", q(dir))
	fmt.Fprintf(&b, "tar -x -p --no-same-owner --delay-directory-restore -f %s -C %s; ", q(tarPath), q(dir))
	if deletePath != "" {
		fmt.Fprintf(&b, "(cd -- %s && xargs -0 -r rm -rf -- < %s); rm -f -- %s; ", q(dir), q(deletePath), q(deletePath))
	}
	fmt.Fprintf(&b, "rm -f -- %s; mkdir -p -- %s; mv -f -- %s %s", q(tarPath), q(path.Dir(manifestPath)),
		q(manifestTmp), q(manifestPath))
	return b.String()
}

// listFormat is what find prints of each entry: type, mode (octal), size, mtime (seconds with a fraction), the
// path relative to the start and a symlink's target, each ended by a NUL.
const listFormat = `%y\0%m\0%s\0%T@\0%P\0%l\0`

// ListCommand lists the tree at dir for ParseListing, pruning the names given (a sync's ignored directories) and
// the paths given (relative to dir).
func ListCommand(dir string, pruneNames, prunePaths []string) string {
	q := shellquote.Quote
	var prune []string
	for _, n := range pruneNames {
		prune = append(prune, "-name "+q(n))
	}
	for _, p := range prunePaths {
		prune = append(prune, "-path "+q("./"+p))
	}
	expr := ""
	if len(prune) > 0 {
		expr = `\( ` + strings.Join(prune, " -o ") + ` \) -prune -o `
	}
	return fmt.Sprintf("cd -- %s && find . %s-printf %s", q(dir), expr, q(listFormat))
}

// TarCommand writes the files listed (NUL-separated, relative to dir) in listPath to a tar at tarPath, then
// removes the list, and the tar too when it failed: what tar wrote before it failed may be as big as what it read.
func TarCommand(dir, listPath, tarPath string) string {
	q := shellquote.Quote
	return fmt.Sprintf("cd -- %s && tar -c --null --no-recursion -T %s -f %s; c=$?; rm -f -- %s; "+
		"[ $c = 0 ] || rm -f -- %s; exit $c", q(dir), q(listPath), q(tarPath), q(listPath), q(tarPath))
}

// ParseListing reads ListCommand's output into entries (no hashes), skipping the root and what t leaves out (and
// everything under a directory it leaves out). A path that is not a clean path inside the tree is an error, not
// something skipped: the listing is the sandbox's word. More than maxEntries entries kept is a LimitError.
func ParseListing(out []byte, t *Tree, maxEntries int) ([]Entry, error) {
	fields := bytes.Split(out, []byte{0})
	if len(fields) > 0 && len(fields[len(fields)-1]) == 0 {
		fields = fields[:len(fields)-1]
	}
	if len(fields)%6 != 0 {
		return nil, fmt.Errorf("the sandbox's listing of the tree is cut short or not one of find's")
	}
	var entries []Entry
	ignoredDirs := map[string]bool{}
	for i := 0; i < len(fields); i += 6 {
		typ, name, link := string(fields[i]), string(fields[i+4]), string(fields[i+5])
		if name == "" {
			continue // the root itself
		}
		if !Local(name) {
			return nil, fmt.Errorf("the sandbox's listing names a path outside the tree: %q", name)
		}
		if underAny(name, ignoredDirs) {
			continue
		}
		if t.Ignored(name, typ == TypeDir) {
			if typ == TypeDir {
				ignoredDirs[name] = true
			}
			continue
		}
		if typ != TypeFile && typ != TypeDir && typ != TypeSymlink {
			continue // pipes, sockets and devices are not part of a tree git could track
		}
		mode, err1 := strconv.ParseUint(string(fields[i+1]), 8, 32)
		size, err2 := strconv.ParseInt(string(fields[i+2]), 10, 64)
		mtime, err3 := parseSeconds(string(fields[i+3]))
		if err1 != nil || err2 != nil || err3 != nil || size < 0 {
			return nil, fmt.Errorf("the sandbox's listing of %q cannot be read", name)
		}
		e := Entry{Path: name, Type: typ, Mode: uint32(mode) & 0o7777, MTime: mtime}
		switch typ {
		case TypeFile:
			e.Size = size
		case TypeSymlink:
			e.Link, e.Mode = link, 0o777
		}
		if len(entries) >= maxEntries {
			return nil, &LimitError{Text: fmt.Sprintf("the sandbox's copy of the tree has more than %d files and directories "+
				"outside .gitignore and the excludes; exclude what it made that should not come back", maxEntries)}
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func underAny(name string, dirs map[string]bool) bool {
	if len(dirs) == 0 {
		return false
	}
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if dirs[d] {
			return true
		}
	}
	return false
}

// parseSeconds reads find's %T@ ("1733450000.1234567890") as Unix nanoseconds, exactly.
func parseSeconds(s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	sec, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || sec > maxSeconds || sec < -maxSeconds {
		return 0, fmt.Errorf("bad time %q", s)
	}
	frac = (frac + "000000000")[:9]
	ns, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return sec*1e9 + ns, nil
}

// maxSeconds bounds a time find prints, well inside what nanoseconds in an int64 hold.
const maxSeconds = 1 << 33
