package workspace

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"
)

// WriteTar writes entries of the tree under root to w as one tar stream, in their order (a directory before what
// it holds), with their modes and times; a symlink is sent as a symlink. A file not hashed yet is hashed as it is
// sent (its Hash set in entries); one hashed already must still have that content, and a file whose size
// changed is an error, so that the sandbox never gets a file the manifest does not describe.
func WriteTar(w io.Writer, root *os.Root, entries []Entry) error {
	tw := tar.NewWriter(w)
	if err := writeEntries(tw, root, entries); err != nil {
		return err
	}
	return tw.Close()
}

func writeEntries(tw *tar.Writer, root *os.Root, entries []Entry) error {
	for i := range entries {
		e := &entries[i]
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode), ModTime: time.Unix(0, e.MTime), Format: tar.FormatPAX}
		switch e.Type {
		case TypeDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case TypeSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
		case TypeFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		default:
			return fmt.Errorf("%s: cannot send an entry of type %q", e.Path, e.Type)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if e.Type == TypeFile {
			if err := copyFile(tw, root, e); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(w io.Writer, root *os.Root, e *Entry) error {
	f, err := openRegular(root, e.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(f, e.Size))
	if err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if n != e.Size || (e.Hash != "" && sum != e.Hash) {
		return fmt.Errorf("%s changed while it was sent; sync again", e.Path)
	}
	e.Hash = sum
	return nil
}
