//go:build unix

package scratch

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByMe reports whether this process's user owns the file: a sweep never touches another user's directories.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
