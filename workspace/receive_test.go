package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What WriteSyncTar sends of a tree, ReceiveTar takes whole: the entries as a tar of their own, the deletions and
// the manifest apart.
func TestReceiveTarTakesWhatWriteSyncTarSends(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "a\n", "sub/b.txt": "bb\n"})
	if err := os.Symlink("sub/b.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	tree, err := Walk(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	err = WriteSyncTar(&stream, root, tree.Entries, []string{"gone.txt", "old/dir"},
		func() ([]byte, error) { return []byte(`{"version":1}`), nil })
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	got, err := ReceiveTar(&stream, &out, DefaultLimits, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got.Entries != 4 || got.Bytes != 5 || strings.Join(got.Deletes, ",") != "gone.txt,old/dir" ||
		string(got.Manifest) != `{"version":1}` {
		t.Fatalf("received %+v", got)
	}
	var names []string
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, map[byte]string{tar.TypeReg: "f", tar.TypeDir: "d", tar.TypeSymlink: "l"}[hdr.Typeflag]+hdr.Name)
	}
	if strings.Join(names, ",") != "fa.txt,llink,dsub/,fsub/b.txt" {
		t.Fatalf("passed on %v", names)
	}
}

// Every header that would write outside the tree, or something a sync never sends, refuses the whole stream.
func TestReceiveTarRefuses(t *testing.T) {
	reg := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	link := func(name, target string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
	}
	for _, tc := range []struct {
		name    string
		entries []*tar.Header
		want    string
	}{
		{"climbs", []*tar.Header{reg("../evil")}, "not a clean relative path"},
		{"climbs inside", []*tar.Header{reg("a/../../evil")}, "not a clean relative path"},
		{"absolute", []*tar.Header{reg("/etc/passwd")}, "not a clean relative path"},
		{"symlink out", []*tar.Header{link("out", "../../etc")}, "outside the tree"},
		{"absolute symlink", []*tar.Header{link("out", "/etc")}, "outside the tree"},
		{"below a symlink", []*tar.Header{link("l", "d"), reg("l/x")}, "below the stream's symlink"},
		{"below a symlink, sent first", []*tar.Header{reg("l/x"), link("l", "d")}, "below the stream's symlink"},
		{"climbs through a symlink", []*tar.Header{link("a", "d/e/../.."), {Name: "d/", Typeflag: tar.TypeDir},
			link("d/e", "..")}, "climbs out of another symlink"},
		{"hard link", []*tar.Header{reg("a"), {Name: "b", Typeflag: tar.TypeLink, Linkname: "a"}}, "a hard link"},
		{"device", []*tar.Header{{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, "a device"},
		{"fifo", []*tar.Header{{Name: "p", Typeflag: tar.TypeFifo}}, "a device or FIFO"},
		{"twice", []*tar.Header{reg("a"), reg("a")}, "sent twice"},
		{"no manifest", nil, "without its manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stream bytes.Buffer
			tw := tar.NewWriter(&stream)
			for _, h := range tc.entries {
				if err := tw.WriteHeader(h); err != nil {
					t.Fatal(err)
				}
			}
			if tc.want != "without its manifest" {
				writePart(t, tw, partManifest, "{}")
			}
			tw.Close()
			_, err := ReceiveTar(&stream, &bytes.Buffer{}, DefaultLimits, 1<<20)
			var re *RefusedError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReceiveTar = %v, want a refusal saying %q", err, tc.want)
			}
		})
	}
}

// The limits hold for a stream as for a walk: one file too big, too many entries, too many bytes in all, a
// deletion outside the tree.
func TestReceiveTarLimits(t *testing.T) {
	limits := Limits{MaxEntries: 3, MaxFileBytes: 10, MaxTotalBytes: 15}
	for name, tc := range map[string]struct {
		sizes   []int
		deletes string
		want    string
	}{
		"file":    {[]int{11}, "", "over the 10 bytes limit"},
		"entries": {[]int{1, 1, 1, 1}, "", "more than 3 files"},
		"total":   {[]int{8, 8}, "", "more than 15 bytes"},
		"delete":  {[]int{1}, "../x", "not a clean path"},
	} {
		t.Run(name, func(t *testing.T) {
			var stream bytes.Buffer
			tw := tar.NewWriter(&stream)
			for i, n := range tc.sizes {
				_ = tw.WriteHeader(&tar.Header{Name: string(rune('a' + i)), Typeflag: tar.TypeReg, Size: int64(n)})
				_, _ = tw.Write(bytes.Repeat([]byte("x"), n))
			}
			writePart(t, tw, partDeletes, tc.deletes)
			writePart(t, tw, partManifest, "{}")
			tw.Close()
			_, err := ReceiveTar(&stream, &bytes.Buffer{}, limits, 1<<20)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ReceiveTar = %v, want %q", err, tc.want)
			}
		})
	}
}

func writePart(t *testing.T, tw *tar.Writer, part, data string) {
	t.Helper()
	err := tw.WriteHeader(&tar.Header{Name: part, Typeflag: tar.TypeReg, Size: int64(len(data)), Format: tar.FormatPAX,
		PAXRecords: map[string]string{partRecord: part}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
}
