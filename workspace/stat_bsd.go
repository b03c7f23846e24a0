//go:build darwin || freebsd || netbsd

package workspace

import "syscall"

func changeTime(st *syscall.Stat_t) syscall.Timespec { return st.Ctimespec }
