//go:build unix

package filelock

import "os"

// SyncDir makes the entries last created, renamed or removed in dir durable, as a replacement made under a lock
// needs before the lock is released.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
