package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// reserve allocates n bytes of disk past off without changing the file's size, so that appends up to that
// much cannot fail for want of space. A file system that cannot preallocate is not refused: the entry is then
// written without the reservation, and a failed append is still rolled back.
func reserve(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	return err
}
