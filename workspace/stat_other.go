//go:build !(linux || darwin || freebsd || netbsd)

package workspace

import "io/fs"

// statOf is the quick check's view of a regular file's info. This system gives no change time or inode through
// os.Stat: a local edit that keeps a file's size and restores its modification time is not seen (as with git
// there), unless it falls in the racy window.
func statOf(info fs.FileInfo) *Stat {
	return &Stat{Size: info.Size(), MTime: info.ModTime().UnixNano()}
}
