package smalldisk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFillLeavesNoRoomUntilRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "disk")
	Mount(t, dir, 64<<10)
	filler := Fill(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing to a full disk: %v, want ENOSPC", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "more"), make([]byte, 8192), 0o600); err != nil {
		t.Fatalf("writing after the filler was removed: %v", err)
	}
}
