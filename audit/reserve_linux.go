package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// reserve allocates n bytes of disk past off without changing the file's size, so that appends up to that
// much cannot fail for want of space. It returns errNoPreallocation on a file system that cannot.
func reserve(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return errNoPreallocation
	}
	return err
}

// freeBytes is the space an unprivileged writer may still take on dir's file system.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
