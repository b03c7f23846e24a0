package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

// The manifest a sync out compares against is read back from the sandbox, so code there can forge it: a base
// entry for a file the sync never sent (one .gitignore ignores, one that looks like a secret) and the listing
// without it would make it a deletion that an apply carries out on the user's tree, or tell whether the file is
// there. The listing never shows what the tree ignores, so its absence says nothing, and no change comes of it.
func TestCompareTakesNoDeletionOfAnIgnoredFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{".gitignore": "*.key\n", "main.go": "package main\n", "id.key": "k", ".env": "A=1\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tree, err := Walk(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(name string) Entry {
		sum := sha256.Sum256([]byte(files[name]))
		return Entry{Path: name, Type: TypeFile, Mode: 0o644, Size: int64(len(files[name])),
			Hash: hex.EncodeToString(sum[:])}
	}
	base := map[string]Entry{}
	for name := range files {
		base[name] = entry(name)
	}
	listing := []Entry{entry(".gitignore"), entry("main.go")}
	changes, fetch := Compare(base, listing, tree)
	if len(changes) > 0 || len(fetch) > 0 {
		t.Fatalf("a forged base of ignored files gave changes %+v (fetch %v)", changes, fetch)
	}
}
