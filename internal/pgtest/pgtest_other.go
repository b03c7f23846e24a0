//go:build !linux

package pgtest

import "syscall"

// dieWithParent: only Linux can tie a child's life to its parent's; elsewhere Stop (or the test's end) ends it.
func dieWithParent(*syscall.SysProcAttr) {}
