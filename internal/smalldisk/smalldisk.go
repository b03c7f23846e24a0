// Package smalldisk gives tests a real file system that fills up: a tmpfs of a given size, mounted in the
// test's temporary folder. Mounting needs root (as in CI); elsewhere the test is skipped with the reason, and in CI
// it fails (internal/optional).
package smalldisk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

// Mount mounts a tmpfs of size bytes on dir (created if missing) and unmounts it when the test ends.
func Mount(t testing.TB, dir string, size int64) {
	t.Helper()
	if os.Getuid() != 0 {
		optional.Missing(t, "mounting a small tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "tmpfs",
		dir).CombinedOutput(); err != nil {
		optional.Missing(t, fmt.Sprintf("cannot mount a tmpfs here: %v: %s", err, bytes.TrimSpace(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
}

// Fill writes a file in dir until the disk is full and returns its path; removing it gives the space back.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

// FillLeaving fills the disk of dir but for about free bytes (to the page) and returns the filler's path, as Fill.
func FillLeaving(t testing.TB, dir string, free int64) string {
	t.Helper()
	path := Fill(t, dir)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, max(0, st.Size()-free)); err != nil {
		t.Fatal(err)
	}
	return path
}
