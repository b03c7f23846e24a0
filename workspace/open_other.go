//go:build !unix

package workspace

import "os"

// readFlags open a file of the tree for reading. This system has no O_NOFOLLOW: a symlink put in a file's place
// since the walk is still kept inside the tree by os.Root, and the caller checks that what it opened is a regular
// file.
const readFlags = os.O_RDONLY
