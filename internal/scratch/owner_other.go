//go:build !unix

package scratch

import "io/fs"

// ownedByMe is true where the system's temporary directory is the user's own (Windows keeps one per user).
func ownedByMe(fs.FileInfo) bool { return true }
