package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
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
	// Stated is the Started of the walk whose stats the entries' Local are (0 when unknown: every file is then
	// hashed again).
	Stated  int64   `json:"stated,omitempty"`
	Entries []Entry `json:"entries"`
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
	Stated  int64   // the next manifest's Stated
}

// PlanSync compares the tree with the last manifest, nil when there is none. A file keeps the manifest's hash
// unread when the quick check git makes passes: its mode and its Stat (size, modification and change times,
// inode) are those the manifest recorded, and none of those times is within racyWindow of the walk that recorded
// them or after it. The last condition is git's "racily clean" rule: a file changed in the same tick of the file
// system's clock as the walk that saw it may keep its size and times, so its hash is only trusted once the
// change time is safely older than that walk. Any other file is hashed. The manifest is the sandbox's word, so a
// lie in it only keeps the sandbox's own copy stale, and a sync out then finds the local file's hash differs and
// refuses to apply over it. On a first sync nothing is hashed here: everything is sent, and WriteTar hashes each
// file as it sends it, into Send, which is Entries then.
func PlanSync(root *os.Root, t *Tree, last *Manifest) (*Plan, error) {
	if last == nil {
		return &Plan{Send: t.Entries, Entries: t.Entries, Stated: t.Started}, nil
	}
	old := last.Index()
	p := &Plan{Stated: t.Started}
	seen := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		o, had := old[e.Path]
		if e.Type == TypeFile {
			if had && o.Type == TypeFile && o.Mode == e.Mode && o.Hash != "" && unchanged(o.Local, e.Local, last.Stated) {
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

// racyWindow is how close to the walk that recorded it a file's time may be and still be trusted by the quick
// check: the file system's clock lags the wall clock by up to a scheduler tick, and some file systems keep times
// to the second (HFS+, many network file systems) or to two seconds (FAT).
const racyWindow = int64(2 * time.Second)

// unchanged reports whether a local file whose stat was "was" when a walk that started at stated knew its hash,
// and is now, still has that content by the quick check.
func unchanged(was, now *Stat, stated int64) bool {
	if was == nil || now == nil || *was != *now || stated == 0 {
		return false
	}
	return was.MTime < stated-racyWindow && was.CTime < stated-racyWindow
}

// same reports whether the sandbox's copy of a, as sent, is b.
func same(a, b Entry) bool {
	return a.Type == b.Type && a.Mode == b.Mode && a.Hash == b.Hash && a.Link == b.Link
}
