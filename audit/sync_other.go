//go:build !linux

package audit

import "os"

// syncData makes what was appended to f durable.
func syncData(f *os.File) error { return f.Sync() }
