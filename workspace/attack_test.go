package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A file of 10 GB (sparse: it takes no disk) is refused by its size before a byte of it is read.
func TestWalkRefusesAHugeSparseFile(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "huge.img"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 30); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	_, err = Walk(openRoot(t, dir), Options{})
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "huge.img is 10.0 GiB") {
		t.Fatalf("walk = %v, want a limit error naming huge.img", err)
	}
}

// 100,000 empty files are refused once the walk passes the limit of entries, naming the way out.
func TestWalkRefusesTooManyFiles(t *testing.T) {
	dir := t.TempDir()
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", d))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 1000 {
			f, err := os.Create(filepath.Join(sub, fmt.Sprintf("f%04d", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	tree, err := Walk(openRoot(t, dir), Options{})
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "more than 50000 files and directories") {
		t.Fatalf("walk = %v (%d entries), want a limit error", err, len(tree.entriesOrNil()))
	}
}

func (t *Tree) entriesOrNil() []Entry {
	if t == nil {
		return nil
	}
	return t.Entries
}

// The listing is the sandbox's word: a path that climbs out of the tree is an error, not a path to diff.
func TestParseListingRefusesPathsOutOfTheTree(t *testing.T) {
	tree, err := Walk(openRoot(t, t.TempDir()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"../escape", "a/../../escape", "/etc/passwd", "a//b", "./a"} {
		listing := []byte("f\x00644\x001\x001.0\x00" + bad + "\x00\x00")
		if _, err := ParseListing(listing, tree, 100); err == nil || !strings.Contains(err.Error(), "outside the tree") {
			t.Errorf("listing %q: %v, want it refused", bad, err)
		}
	}
}

// A tar from the sandbox may carry only the files asked for, as regular files.
func TestReadFetchedRefusesWhatWasNotAskedFor(t *testing.T) {
	asked := []Change{{Path: "a.txt", New: &Entry{Path: "a.txt", Type: TypeFile}}}
	for _, hdr := range []*tar.Header{
		{Name: "../a.txt", Typeflag: tar.TypeReg, Size: 1},
		{Name: "b.txt", Typeflag: tar.TypeReg, Size: 1},
		{Name: "a.txt", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		tw.WriteHeader(hdr)
		if hdr.Size > 0 {
			tw.Write([]byte("x"))
		}
		tw.Close()
		if _, err := ReadFetched(&buf, append([]Change(nil), asked...), DefaultLimits); err == nil {
			t.Errorf("a tar with %s (%c) was read", hdr.Name, hdr.Typeflag)
		}
	}
}

// Changes that would write through a symlink, or make one leading out of the tree, or touch ../, are refused as
// a whole, and nothing is written.
func TestApplyRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	for name, c := range map[string]Change{
		"a file through a local symlink":  {Path: "link/x.txt", New: &Entry{Path: "link/x.txt", Type: TypeFile, Mode: 0o644}, NewData: []byte("x")},
		"a file through a symlink inside": {Path: "inner/x.txt", New: &Entry{Path: "inner/x.txt", Type: TypeFile, Mode: 0o644}, NewData: []byte("x")},
		"a symlink out of the tree":       {Path: "esc", New: &Entry{Path: "esc", Type: TypeSymlink, Link: "../../" + filepath.Base(outside)}},
		"an absolute symlink":             {Path: "abs", New: &Entry{Path: "abs", Type: TypeSymlink, Link: outside}},
		"a path with ..":                  {Path: "../x.txt", New: &Entry{Path: "../x.txt", Type: TypeFile, Mode: 0o644}, NewData: []byte("x")},
	} {
		t.Run(name, func(t *testing.T) {
			local := t.TempDir()
			os.Symlink(outside, filepath.Join(local, "link"))
			os.Mkdir(filepath.Join(local, "sub"), 0o755)
			os.Symlink("sub", filepath.Join(local, "inner"))
			ok := Change{Path: "fine.txt", New: &Entry{Path: "fine.txt", Type: TypeFile, Mode: 0o644}, NewData: []byte("fine")}
			err := Apply(openRoot(t, local), []Change{ok, c}, nil)
			var ce *ConflictError
			if !errors.As(err, &ce) {
				t.Fatalf("apply = %v, want it refused", err)
			}
			if _, err := os.Stat(filepath.Join(local, "fine.txt")); err == nil {
				t.Error("a refused apply wrote fine.txt")
			}
			if _, err := os.Stat(filepath.Join(local, "sub", "x.txt")); err == nil {
				t.Error("a refused apply wrote through the symlink inner")
			}
			if ents, _ := os.ReadDir(outside); len(ents) > 0 {
				t.Errorf("something was written outside the tree: %v", ents)
			}
		})
	}
}

// A file that changes between its hash and its sending fails the tar, so the sandbox never unpacks content the
// manifest does not describe.
func TestWriteTarRefusesAFileChangedSinceItsHash(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "before\n"})
	root := openRoot(t, dir)
	tree, err := Walk(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanSync(root, tree, &Manifest{Version: ManifestVersion})
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, map[string]string{"a.txt": "after!\n"}) // the same size
	var buf bytes.Buffer
	if err := WriteTar(&buf, root, plan.Send); err == nil || !strings.Contains(err.Error(), "a.txt changed while it was sent") {
		t.Fatalf("WriteTar = %v, want a.txt named as changed", err)
	}
}

// listedSandbox is a sandbox whose listing is given, and which counts the fetches asked of it.
type listedSandbox struct {
	listing []byte
	fetches int
}

func (s *listedSandbox) List([]string) ([]byte, error) { return s.listing, nil }

func (s *listedSandbox) Fetch([]string) (io.ReadCloser, error) {
	s.fetches++
	return nil, errors.New("fetched")
}

// listingOf is find's listing (ListCommand's format) of a tree of regular files of the sizes given.
func listingOf(sizes map[string]int64) []byte {
	var b bytes.Buffer
	b.WriteString("d\x00755\x004096\x001733450000.0\x00\x00\x00") // the root
	for name, size := range sizes {
		fmt.Fprintf(&b, "f\x00644\x00%d\x001733450000.0\x00%s\x00\x00", size, name)
	}
	return b.Bytes()
}

// What the sandbox's listing says is too big to bring back is refused before anything is fetched: the sandbox
// would otherwise first write it all into a tar of its own (a sparse file of 10 GB is 10 GB there).
func TestChangesRefuseWhatIsTooBigBeforeFetching(t *testing.T) {
	tree, err := Walk(openRoot(t, t.TempDir()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	limits := Limits{MaxEntries: 100, MaxFileBytes: 100, MaxTotalBytes: 150}
	for _, tc := range []struct {
		name  string
		sizes map[string]int64
		want  string
	}{
		{"a file over the limit of one", map[string]int64{"a.txt": 10, "big.bin": 10 << 30},
			"big.bin is 10.0 GiB in the sandbox, over the 100 bytes limit"},
		{"files over the limit of all", map[string]int64{"a.txt": 100, "b.txt": 100}, "add up to more than 150 bytes"},
	} {
		s := &listedSandbox{listing: listingOf(tc.sizes)}
		_, _, _, err := Changes(s, &Manifest{}, tree, limits)
		var le *LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) || s.fetches != 0 {
			t.Errorf("%s: Changes = %v after %d fetches, want a limit error saying %q and no fetch", tc.name, err,
				s.fetches, tc.want)
		}
	}
}

// A tar that fails (a file gone since the listing, a disk full) leaves neither its list nor what it wrote of the
// archive in the sandbox: a partial tar may be as big as what it read.
func TestTarCommandLeavesNothingWhenItFails(t *testing.T) {
	remote, scratch := t.TempDir(), t.TempDir()
	write(t, remote, map[string]string{"a.txt": strings.Repeat("a", 100_000)})
	list, tarPath := filepath.Join(scratch, "list"), filepath.Join(scratch, "out.tar")
	if err := os.WriteFile(list, []byte("a.txt\x00gone.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("bash", "-c", TarCommand(remote, list, tarPath)).Run(); err == nil {
		t.Fatal("a tar of a file that is gone succeeded")
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("a failed tar left %v", left)
	}
}
