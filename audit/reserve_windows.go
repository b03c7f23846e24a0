package audit

import (
	"os"

	"golang.org/x/sys/windows"
)

// reserve: Windows has no preallocation that keeps a file's size, so the room is counted against the free space
// instead (see provide).
func reserve(*os.File, int64, int64) error { return errNoPreallocation }

// freeBytes is the space the server's user may still take on dir's volume.
func freeBytes(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, nil, nil); err != nil {
		return 0, err
	}
	return int64(free), nil
}
