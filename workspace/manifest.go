package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// ManifestVersion is the version of the manifest's format; a manifest of another version is not read, and the
// next sync sends everything.
const ManifestVersion = 1

// Manifest is what the last sync in sent of one local tree to one place in one sandbox: the base the sandbox's
// changes are measured against. It is kept in the sandbox, so that a fork carries it and diffs against the same
// base; since code in the sandbox can rewrite it, nothing trusts it: a sync out checks every local file it would
// touch against it, and a sync in that finds it wrong only sends more.
type Manifest struct {
	Version int    `json:"version"`
	Local   string `json:"local"`
	Remote  string `json:"remote"`
	// Excludes and IncludeSecrets are the sync in's options, which decide what a sync out compares too.
	Excludes       []string `json:"excludes,omitempty"`
	IncludeSecrets bool     `json:"include_secrets,omitempty"`
	Entries        []Entry  `json:"entries"`
}

// ReadManifest decodes a manifest; one that is damaged or of another version is an error.
func ReadManifest(r io.Reader, maxBytes int64) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(r, maxBytes)).Decode(&m); err != nil {
		return nil, fmt.Errorf("the sync manifest cannot be read: %w", err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("the sync manifest is of version %d, not %d", m.Version, ManifestVersion)
	}
	for _, e := range m.Entries {
		if !Local(e.Path) {
			return nil, fmt.Errorf("the sync manifest names a path outside the tree: %q", e.Path)
		}
	}
	return &m, nil
}

// Index maps the manifest's entries by path.
func (m *Manifest) Index() map[string]Entry {
	out := make(map[string]Entry, len(m.Entries))
	for _, e := range m.Entries {
		out[e.Path] = e
	}
	return out
}

// HashFile returns the SHA-256 of the regular file name under root, opened without following a symlink or
// waiting on a FIFO, and its size.
func HashFile(root *os.Root, name string) (string, int64, error) {
	f, err := openRegular(root, name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// errNotRegular says a file changed into something else while a sync read it.
var errNotRegular = fmt.Errorf("it is no longer a regular file (it changed during the sync)")

func openRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, readFlags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, errNotRegular)
	}
	return f, nil
}

// Plan is what one sync in sends: the entries that are new or changed since the manifest, and the paths the
// manifest has that the tree no longer does (deepest first, so a directory goes after what it held).
type Plan struct {
	Send    []Entry
	Delete  []string
	Entries []Entry // the tree as the sandbox has it after the sync: the next manifest
}

// PlanSync compares the tree with the last manifest, nil when there is none. A file whose size, time and mode are
// the manifest's keeps the manifest's hash unread (git's and rsync's quick check: the manifest is the sandbox's
// word, so a lie in it only keeps the sandbox's own copy stale, and a sync out then finds the local file's hash
// differs and refuses to apply over it); any other file is hashed. On a first sync nothing is hashed here:
// everything is sent, and WriteTar hashes each file as it sends it, into Send, which is Entries then.
func PlanSync(root *os.Root, t *Tree, last *Manifest) (*Plan, error) {
	if last == nil {
		return &Plan{Send: t.Entries, Entries: t.Entries}, nil
	}
	old := last.Index()
	p := &Plan{}
	seen := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		o, had := old[e.Path]
		if e.Type == TypeFile {
			if had && o.Type == TypeFile && o.Size == e.Size && o.MTime == e.MTime && o.Mode == e.Mode && o.Hash != "" {
				e.Hash = o.Hash
			} else {
				h, n, err := HashFile(root, e.Path)
				if err != nil {
					return nil, err
				}
				if n != e.Size {
					return nil, fmt.Errorf("%s changed while it was read; sync again", e.Path)
				}
				e.Hash = h
			}
		}
		seen[e.Path] = true
		if had && same(o, e) {
			e.MTime = o.MTime // the sandbox's copy keeps the time it was sent with
		} else {
			p.Send = append(p.Send, e)
		}
		p.Entries = append(p.Entries, e)
	}
	for i := len(last.Entries) - 1; i >= 0; i-- {
		if e := last.Entries[i]; !seen[e.Path] {
			p.Delete = append(p.Delete, e.Path)
		}
	}
	return p, nil
}

// same reports whether the sandbox's copy of a, as sent, is b.
func same(a, b Entry) bool {
	return a.Type == b.Type && a.Mode == b.Mode && a.Hash == b.Hash && a.Link == b.Link
}
