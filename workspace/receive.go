package workspace

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// A sync in that a server receives from the user's machine (a team server, which cannot read the user's disk) is
// one tar stream: the tree's entries as WriteTar sends them, then two trailing entries the stream alone can
// carry: the paths to delete and the new manifest. The trailing ones are told apart by a PAX record of their own,
// so that no name of the tree can pass for one.
const (
	partRecord   = "E2BMCP.sync"
	partDeletes  = "deletes"
	partManifest = "manifest"
)

// WriteSyncTar writes what a server needs for one sync in to w: the entries of the tree under root (as
// WriteTar), then the paths to delete (NUL-separated) and the manifest, which manifest makes once the entries
// are sent (a first sync's hashes are known only then).
func WriteSyncTar(w io.Writer, root *os.Root, entries []Entry, deletes []string,
	manifest func() ([]byte, error)) error {
	tw := tar.NewWriter(w)
	if err := writeEntries(tw, root, entries); err != nil {
		return err
	}
	man, err := manifest()
	if err != nil {
		return err
	}
	for _, p := range []struct {
		part string
		data []byte
	}{{partDeletes, []byte(strings.Join(deletes, "\x00"))}, {partManifest, man}} {
		hdr := &tar.Header{Name: p.part, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(p.data)),
			Format: tar.FormatPAX, PAXRecords: map[string]string{partRecord: p.part}}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(p.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// MaxNameBytes bounds a path, and a symlink's target, in a stream ReceiveTar takes (Linux's PATH_MAX).
const MaxNameBytes = 4096

// Received is what ReceiveTar took from a stream.
type Received struct {
	Entries  int      // files, directories and symlinks of the tree
	Bytes    int64    // of file content
	Deletes  []string // paths to remove, each a clean path inside the tree
	Manifest []byte   // as sent: the caller decodes and checks it
}

// Hold is told the size of a part of a stream that ReceiveTar is about to hold whole, and may refuse it: a server
// that holds a few large bodies at a time takes one of its places for it (and gives it back once the part is held
// no more).
type Hold func(size int64) error

// RefusedError is a stream ReceiveTar refused, and why (Err: the reader's failure, when that was why); nothing
// of it is to be unpacked.
type RefusedError struct {
	Text string
	Err  error
}

func (e *RefusedError) Error() string { return e.Text }
func (e *RefusedError) Unwrap() error { return e.Err }

// ReceiveTar reads a WriteSyncTar stream from r, checking every header as it comes, and writes the tree's
// entries to w as a new tar that carries only what a sync sends (name, type, mode, time, size, a symlink's
// target): each path clean and inside the tree, never below a symlink of the stream, a symlink only to a target
// inside the tree, no hard link, device, FIFO or other kind of entry, no entry twice, within limits (entries,
// each file's bytes, all bytes), the deletions and the manifest last, each once, the manifest of at most
// maxManifest bytes. The first entry that breaks a rule is a RefusedError (or a LimitError); w has then been
// given part of a tar, which the caller throws away. Each hold is called with the size of the deletions or the
// manifest before it is read into memory, and its error ends the stream there (wrapped, as it came).
func ReceiveTar(r io.Reader, w io.Writer, limits Limits, maxManifest int64, hold ...Hold) (*Received, error) {
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	got := &Received{}
	seen := map[string]Entry{} // path → its type and a symlink's target
	haveDeletes, haveManifest, links := false, false, 0
	var names int64 // bytes of the names seen holds
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &RefusedError{Text: fmt.Sprintf("the stream is not a tar that can be read: %v", err), Err: err}
		}
		if part, ok := hdr.PAXRecords[partRecord]; ok {
			var limit int64
			switch {
			case part == partDeletes && !haveDeletes && !haveManifest:
				haveDeletes, limit = true, limits.MaxPathListBytes()
			case part == partManifest && !haveManifest:
				haveManifest, limit = true, maxManifest
			default:
				return nil, &RefusedError{Text: fmt.Sprintf("the stream has a part %q out of place", part)}
			}
			// Refused from its header, before a byte of it is read or held.
			if hdr.Typeflag != tar.TypeReg || hdr.Size > limit {
				return nil, &RefusedError{Text: fmt.Sprintf("the stream's %s is not a regular entry of at most %s", part,
					display.Size(limit))}
			}
			for _, h := range hold {
				if h == nil {
					continue
				}
				if err := h(hdr.Size); err != nil {
					return nil, fmt.Errorf("holding the stream's %s: %w", part, err)
				}
			}
			// The manifest read into memory of its size, once; the deletions path by path.
			if part == partManifest {
				var b bytes.Buffer
				b.Grow(int(hdr.Size))
				_, err = io.CopyN(&b, tr, hdr.Size)
				got.Manifest = b.Bytes()
			} else {
				got.Deletes, err = ReadPaths(tr, limits)
			}
			var refused *RefusedError
			var limited *LimitError
			switch {
			case errors.As(err, &refused), errors.As(err, &limited):
				return nil, err
			case err != nil:
				return nil, &RefusedError{Text: fmt.Sprintf("the stream's %s is cut short: %v", part, err), Err: err}
			}
			continue
		}
		if haveDeletes || haveManifest {
			return nil, &RefusedError{Text: fmt.Sprintf("%q comes after the stream's deletions or manifest", hdr.Name)}
		}
		out, err := checkHeader(hdr, seen, limits, got)
		if err != nil {
			return nil, err
		}
		// seen holds every name and symlink target until the end: a list of paths, bounded as one on its total.
		if names += int64(len(out.Name) + len(out.Linkname)); names > 2*limits.MaxPathListBytes() {
			return nil, &LimitError{Text: fmt.Sprintf("the stream's paths and symlink targets add up to more than %s",
				display.Size(2*limits.MaxPathListBytes()))}
		}
		if out.Typeflag == tar.TypeSymlink {
			links++
		}
		if err := tw.WriteHeader(out); err != nil {
			return nil, err
		}
		if out.Typeflag == tar.TypeReg {
			if n, err := io.Copy(tw, tr); err != nil || n != out.Size {
				return nil, &RefusedError{Text: fmt.Sprintf("%s is cut short in the stream (%v)", out.Name, err), Err: err}
			}
		}
	}
	if !haveManifest {
		return nil, &RefusedError{Text: "the stream ends without its manifest (cut short?)"}
	}
	if err := checkLinks(seen, links); err != nil {
		return nil, err
	}
	return got, tw.Close()
}

// ReadPaths reads a NUL-separated list of paths (empty: none), each a clean path inside the tree of at most
// MaxNameBytes, at most MaxEntries of them, path by path: what it holds is the paths, not the list besides. The
// reader bounds the list's total; a failure of it is returned as it is.
func ReadPaths(r io.Reader, limits Limits) ([]string, error) {
	br := bufio.NewReaderSize(r, MaxNameBytes+1) // a path and its NUL
	var paths []string
	for {
		p, err := br.ReadSlice(0)
		end := errors.Is(err, io.EOF)
		p = bytes.TrimSuffix(p, []byte{0})
		switch {
		case errors.Is(err, bufio.ErrBufferFull), len(p) > MaxNameBytes: // the last path fills the buffer, unended
			return nil, &RefusedError{Text: fmt.Sprintf("a path of the list is longer than %d bytes", MaxNameBytes)}
		case err != nil && !end:
			return nil, err
		case end && len(p) == 0 && len(paths) == 0:
			return nil, nil
		case len(paths) == limits.MaxEntries:
			return nil, &LimitError{Text: fmt.Sprintf("the list has more than the %d paths a sync takes",
				limits.MaxEntries)}
		}
		name := string(p)
		if !Local(name) {
			return nil, &RefusedError{Text: fmt.Sprintf("%q is not a clean path inside the tree", name)}
		}
		paths = append(paths, name)
		if end {
			return paths, nil
		}
	}
}

// checkHeader checks one entry of the tree and returns the header that carries it on: only what a sync sends.
func checkHeader(hdr *tar.Header, seen map[string]Entry, limits Limits, got *Received) (*tar.Header, error) {
	name := strings.TrimSuffix(hdr.Name, "/")
	refuse := func(why string) error { return &RefusedError{Text: fmt.Sprintf("%q: %s", hdr.Name, why)} }
	if len(hdr.Name) > MaxNameBytes || len(hdr.Linkname) > MaxNameBytes {
		return nil, &RefusedError{Text: fmt.Sprintf("a path or symlink target longer than %d bytes", MaxNameBytes)}
	}
	if !Local(name) {
		return nil, refuse("not a clean relative path inside the tree")
	}
	if _, dup := seen[name]; dup {
		return nil, refuse("sent twice")
	}
	if got.Entries++; got.Entries > limits.MaxEntries {
		return nil, &LimitError{Text: fmt.Sprintf("the stream has more than %d files and directories", limits.MaxEntries)}
	}
	out := &tar.Header{Name: name, Mode: hdr.Mode & 0o7777, ModTime: hdr.ModTime.Truncate(time.Microsecond),
		Format: tar.FormatPAX}
	switch hdr.Typeflag {
	case tar.TypeDir:
		out.Typeflag, out.Name, seen[name] = tar.TypeDir, name+"/", Entry{Type: TypeDir}
	case tar.TypeSymlink:
		if !LinkInside(name, hdr.Linkname) {
			return nil, refuse(fmt.Sprintf("a symlink to %q, outside the tree", hdr.Linkname))
		}
		out.Typeflag, out.Linkname, out.Mode = tar.TypeSymlink, hdr.Linkname, 0o777
		seen[name] = Entry{Type: TypeSymlink, Link: hdr.Linkname}
	case tar.TypeReg:
		if hdr.Size > limits.MaxFileBytes {
			return nil, &LimitError{Text: fmt.Sprintf("%s is %s, over the %s limit of one file in a sync", name,
				display.Size(hdr.Size), display.Size(limits.MaxFileBytes))}
		}
		if got.Bytes += hdr.Size; got.Bytes > limits.MaxTotalBytes {
			return nil, &LimitError{Text: fmt.Sprintf("the files sent add up to more than %s",
				display.Size(limits.MaxTotalBytes))}
		}
		out.Typeflag, out.Size, seen[name] = tar.TypeReg, hdr.Size, Entry{Type: TypeFile}
	case tar.TypeLink:
		return nil, refuse("a hard link, which a sync never sends")
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return nil, refuse("a device or FIFO, which a sync never sends")
	default:
		return nil, refuse(fmt.Sprintf("an entry of type %q, which a sync never sends", hdr.Typeflag))
	}
	return out, nil
}

// checkLinks checks what the stream's symlinks do together, once it has them all (in whatever order they came;
// nothing is unpacked before): no entry lies below one of them, where unpacking it would follow the link, and no
// symlink's target climbs ("..") after passing through one of them, where the lexical check of LinkInside
// cannot tell where it leads.
func checkLinks(seen map[string]Entry, links int) error {
	if links == 0 {
		return nil
	}
	for name, e := range seen {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if seen[d].Type == TypeSymlink {
				return &RefusedError{Text: fmt.Sprintf("%q: below the stream's symlink %q, where unpacking it would follow "+
					"the link", name, d)}
			}
		}
		if e.Type == TypeSymlink && strings.Contains(e.Link, "..") && linksThrough(name, e.Link, seen) {
			return &RefusedError{Text: fmt.Sprintf("%q: a symlink to %q, which climbs out of another symlink of the "+
				"stream", name, e.Link)}
		}
	}
	return nil
}

// linksThrough reports whether a symlink's target climbs ("..") after passing through a symlink of the stream,
// where the lexical check of LinkInside cannot tell where it leads.
func linksThrough(name, target string, seen map[string]Entry) bool {
	p := path.Dir(name)
	for el := range strings.SplitSeq(target, "/") {
		switch el {
		case "", ".":
		case "..":
			p = path.Dir(p)
		default:
			p = path.Join(p, el)
			if seen[p].Type == TypeSymlink {
				return true
			}
		}
	}
	return false
}
