package workspace

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// Change is one path the sandbox changed since the sync in: Old is the base (nil when the sandbox added it), New
// the sandbox's (nil when it deleted it); the data are a file's content or a symlink's target.
type Change struct {
	Path             string
	Old, New         *Entry
	OldData, NewData []byte
}

// Kind words what the change is: "added", "deleted" or "modified".
func (c Change) Kind() string {
	switch {
	case c.Old == nil:
		return "added"
	case c.New == nil:
		return "deleted"
	}
	return "modified"
}

// Binary reports whether either side is a binary file, which the patch carries as git's binary literal.
func (c Change) Binary() bool {
	return isBinary(c.OldData) || isBinary(c.NewData)
}

// gitMode is an entry's mode as git writes it.
func gitMode(e *Entry) string {
	switch {
	case e.Type == TypeSymlink:
		return "120000"
	case e.Mode&0o111 != 0:
		return "100755"
	}
	return "100644"
}

// blobID is git's name for content: the SHA-1 of "blob <size>\0" and the content.
func blobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

const nullID = "0000000000000000000000000000000000000000"

// WritePatch writes the changes as a patch git apply accepts (at the root of the tree, as -p1): text as unified
// hunks, binary files as git's binary literals, modes and symlinks as git records them. A path that changes
// between a file and a symlink is a deletion and an addition, as in git.
func WritePatch(w *bytes.Buffer, changes []Change) {
	for _, c := range changes {
		if c.Old != nil && c.New != nil && (c.Old.Type == TypeSymlink) != (c.New.Type == TypeSymlink) {
			writeChange(w, Change{Path: c.Path, Old: c.Old, OldData: c.OldData})
			writeChange(w, Change{Path: c.Path, New: c.New, NewData: c.NewData})
			continue
		}
		writeChange(w, c)
	}
}

func writeChange(w *bytes.Buffer, c Change) {
	name := quotePath("a/"+c.Path) + " " + quotePath("b/"+c.Path)
	fmt.Fprintf(w, "diff --git %s\n", name)
	binary := c.Binary()
	oldID, newID := nullID, nullID
	if c.Old != nil {
		oldID = blobID(c.OldData)
	}
	if c.New != nil {
		newID = blobID(c.NewData)
	}
	switch {
	case c.Old == nil:
		fmt.Fprintf(w, "new file mode %s\nindex %s..%s\n", gitMode(c.New), oldID, newID)
	case c.New == nil:
		fmt.Fprintf(w, "deleted file mode %s\nindex %s..%s\n", gitMode(c.Old), oldID, newID)
	default:
		if gitMode(c.Old) != gitMode(c.New) {
			fmt.Fprintf(w, "old mode %s\nnew mode %s\n", gitMode(c.Old), gitMode(c.New))
		}
		if bytes.Equal(c.OldData, c.NewData) {
			return
		}
		fmt.Fprintf(w, "index %s..%s\n", oldID, newID)
	}
	if len(c.OldData) == 0 && len(c.NewData) == 0 {
		return // an empty file added or deleted: the header says it all
	}
	if binary {
		w.WriteString("GIT binary patch\n")
		writeLiteral(w, c.NewData)
		writeLiteral(w, c.OldData)
		return
	}
	from, to := "/dev/null", "/dev/null"
	if c.Old != nil {
		from = quotePath("a/" + c.Path)
	}
	if c.New != nil {
		to = quotePath("b/" + c.Path)
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", from, to)
	writeHunks(w, c.OldData, c.NewData)
}

// writeLiteral writes data as a "literal" hunk of a git binary patch: zlib-deflated, in git's base85, 52 bytes a
// line, each line led by its length.
func writeLiteral(w *bytes.Buffer, data []byte) {
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(data)
	zw.Close()
	fmt.Fprintf(w, "literal %d\n", len(data))
	deflated := z.Bytes()
	for len(deflated) > 0 {
		n := min(len(deflated), 52)
		if n <= 26 {
			w.WriteByte(byte('A' + n - 1))
		} else {
			w.WriteByte(byte('a' + n - 27))
		}
		encode85(w, deflated[:n])
		w.WriteByte('\n')
		deflated = deflated[n:]
	}
	w.WriteByte('\n')
}

const alphabet85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

func encode85(w *bytes.Buffer, b []byte) {
	for len(b) > 0 {
		var v uint32
		for i := range 4 {
			v <<= 8
			if i < len(b) {
				v |= uint32(b[i])
			}
		}
		var out [5]byte
		for i := 4; i >= 0; i-- {
			out[i] = alphabet85[v%85]
			v /= 85
		}
		w.Write(out[:])
		b = b[min(len(b), 4):]
	}
}

// quotePath quotes a path as git does when it holds a quote, a backslash or a control character: in C's syntax,
// other bytes in octal.
func quotePath(p string) string {
	if !strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == '"' || r == '\\' || r == 0x7f }) {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\%03o`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
