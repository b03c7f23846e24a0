package emulator

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestCopyTree(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	mustWrite := func(rel string, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("a.txt", "hello", 0o640)
	mustWrite("bin/run.sh", "#!/bin/sh\n", 0o755)
	mustWrite("deep/er/x", "x", 0o600)
	if err := os.Symlink("a.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(src, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "sticky"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "sticky"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	// A read-only directory with content must still be copied (and keep its mode).
	mustWrite("ro/file", "r", 0o444)
	if err := os.Chmod(filepath.Join(src, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "ro"), 0o755) })

	dst := filepath.Join(t.TempDir(), "dst")
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(dst) })

	checkFile := func(rel, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if string(got) != data || fi.Mode() != mode || !fi.ModTime().Equal(mtime) {
			t.Errorf("%s: %q %v %v", rel, got, fi.Mode(), fi.ModTime())
		}
	}
	checkFile("a.txt", "hello", 0o640)
	checkFile("bin/run.sh", "#!/bin/sh\n", 0o755)
	checkFile("deep/er/x", "x", 0o600)
	checkFile("ro/file", "r", 0o444)
	for link, target := range map[string]string{"link": "a.txt", "abs-link": "/etc/passwd", "dangling": "missing"} {
		got, err := os.Readlink(filepath.Join(dst, link))
		if err != nil || got != target {
			t.Errorf("%s -> %q %v", link, got, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dst, "sticky")); fi.Mode() != os.ModeDir|os.ModeSticky|0o777 {
		t.Errorf("sticky dir mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(dst, "ro")); fi.Mode().Perm() != 0o555 {
		t.Errorf("ro dir mode %v", fi.Mode())
	}
	// The copy is independent of the source.
	if err := os.WriteFile(filepath.Join(dst, "a.txt"), []byte("changed"), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "a.txt")); string(got) != "hello" {
		t.Fatalf("source changed: %q", got)
	}

	if err := copyTree(src, dst); err == nil {
		t.Fatal("copy onto an existing directory succeeded")
	}
	if err := copyTree(filepath.Join(src, "a.txt"), filepath.Join(t.TempDir(), "f")); err == nil {
		t.Fatal("copy of a file as a tree succeeded")
	}
}

func TestRemoveTreeLockedDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	inner := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(inner, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(inner, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("still there: %v", err)
	}
	if err := removeTree(""); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCopyTree copies a sandbox-like tree (200 files of 4 KiB in 10 directories), as a snapshot or fork does.
func BenchmarkCopyTree(b *testing.B) {
	src := filepath.Join(b.TempDir(), "src")
	if err := seedSandboxDir(src); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4096)
	for d := range 10 {
		dir := filepath.Join(src, "home", "proj", string(rune('a'+d)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 20 {
			if err := os.WriteFile(filepath.Join(dir, string(rune('a'+f))+".txt"), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	dstRoot := b.TempDir()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		dst := filepath.Join(dstRoot, strconv.Itoa(i))
		if err := copyTree(src, dst); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = removeTree(dst)
		b.StartTimer()
	}
}
