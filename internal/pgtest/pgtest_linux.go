package pgtest

import "syscall"

// dieWithParent has the server killed when the test process dies, even by SIGKILL, so no cluster outlives it.
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
