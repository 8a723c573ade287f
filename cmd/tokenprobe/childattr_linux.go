package main

import "syscall"

// childAttr starts a child of run --processes in its own process group,
// with SIGTERM sent to it when this process dies (PR_SET_PDEATHSIG; started
// by childproc, which keeps the thread the kernel ties that to).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
