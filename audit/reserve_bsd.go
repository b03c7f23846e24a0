//go:build darwin || freebsd

package audit

import (
	"os"

	"golang.org/x/sys/unix"
)

// reserve: these systems have no preallocation past the end of a file through a portable call, so the room is
// counted against the free space instead (see provide).
func reserve(*os.File, int64, int64) error { return errNoPreallocation }

// freeBytes is the space an unprivileged writer may still take on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
