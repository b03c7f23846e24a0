//go:build !linux && !darwin && !freebsd && !windows

package audit

import (
	"errors"
	"os"
)

// reserve: no preallocation here, and (freeBytes) no free space known either, so no call is let in that the log
// could not be sure of recording.
func reserve(*os.File, int64, int64) error { return errNoPreallocation }

func freeBytes(string) (int64, error) {
	return 0, errors.New("this system's free disk space is not known to e2b-mcp")
}
