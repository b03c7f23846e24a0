//go:build linux || darwin || freebsd || netbsd

package workspace

import (
	"io/fs"
	"syscall"
)

// statOf is the quick check's view of a regular file's info.
func statOf(info fs.FileInfo) *Stat {
	s := &Stat{Size: info.Size(), MTime: info.ModTime().UnixNano()}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		c := changeTime(st)
		s.CTime, s.Ino = int64(c.Sec)*1e9+int64(c.Nsec), uint64(st.Ino)
	}
	return s
}
