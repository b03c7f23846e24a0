//go:build !unix

package filelock

// SyncDir does nothing outside Unix: Windows has no directory fsync, and its file system journal already records
// a rename.
func SyncDir(string) error { return nil }
