package workspace

import (
	"io"
	"os"
	"path/filepath"
)

// Sandbox is the sandbox's side of a sync out, however it is reached (envd, or a team server's sync link).
type Sandbox interface {
	// List is ListCommand's output for the tree, pruning pruneNames.
	List(pruneNames []string) ([]byte, error)
	// Fetch is a tar of the files named (paths relative to the tree), as TarCommand makes it.
	Fetch(paths []string) (io.ReadCloser, error)
}

// Changes lists the sandbox's copy of the tree t walked, fetches the files that may have changed as one tar, and
// returns the changes against the manifest, the listing they come from, and the bytes of tar fetched. All the
// sandbox says is checked as its word (ParseListing, CheckFetch before the fetch, ReadFetched after).
func Changes(s Sandbox, man *Manifest, t *Tree, limits Limits) ([]Change, []Entry, int64, error) {
	out, err := s.List(t.PrunedNames())
	if err != nil {
		return nil, nil, 0, err
	}
	listing, err := ParseListing(out, t, limits.MaxEntries)
	if err != nil {
		return nil, nil, 0, err
	}
	changes, fetch := Compare(man.Index(), listing, t)
	if len(fetch) == 0 {
		return changes, listing, 0, nil
	}
	if err := CheckFetch(changes, limits); err != nil {
		return nil, nil, 0, err
	}
	r, err := s.Fetch(fetch)
	if err != nil {
		return nil, nil, 0, err
	}
	defer r.Close()
	fetched := &CountingReader{R: r}
	changes, err = ReadFetched(fetched, changes, limits)
	return changes, listing, fetched.N, err
}

// CountingReader counts the bytes read through it (N), for the audit log's sizes.
type CountingReader struct {
	R io.Reader
	N int64
}

func (c *CountingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}

// Rebased is the manifest that makes an applied state the sandbox's new base: the listing, with the hashes known
// (those of the changes; the base's for the files that did not change, whose local quick check holds).
func Rebased(man *Manifest, listing []Entry, changes []Change) Manifest {
	base := man.Index()
	changed := map[string]*Entry{}
	for _, c := range changes {
		changed[c.Path] = c.New
	}
	next := *man
	next.Entries = nil
	for _, l := range listing {
		switch n, ok := changed[l.Path]; {
		case ok && n != nil:
			l.Hash = n.Hash
		case l.Type == TypeFile:
			l.Hash, l.Local = base[l.Path].Hash, base[l.Path].Local
		}
		next.Entries = append(next.Entries, l)
	}
	return next
}

// WithoutConflicts is changes without those of the paths in conflict.
func WithoutConflicts(changes []Change, conflicts []Conflict) []Change {
	if len(conflicts) == 0 {
		return changes
	}
	skip := map[string]bool{}
	for _, c := range conflicts {
		skip[c.Path] = true
	}
	var out []Change
	for _, c := range changes {
		if !skip[c.Path] {
			out = append(out, c)
		}
	}
	return out
}

// DirsOf is the directories of a listing, which an apply keeps.
func DirsOf(listing []Entry) map[string]bool {
	out := map[string]bool{}
	for _, e := range listing {
		if e.Type == TypeDir {
			out[e.Path] = true
		}
	}
	return out
}

// SavePatch writes patch to a new file of dir named pattern (as os.CreateTemp), readable by the user alone, and
// returns its path.
func SavePatch(dir, pattern string, patch []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(patch)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return filepath.Clean(f.Name()), nil
}
