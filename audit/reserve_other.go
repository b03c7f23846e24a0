//go:build !linux

package audit

import "os"

// reserve does nothing where the file system offers no preallocation through a portable call; a failed append
// is still rolled back, so a full disk costs the entry, never the file's integrity.
func reserve(*os.File, int64, int64) error { return nil }
