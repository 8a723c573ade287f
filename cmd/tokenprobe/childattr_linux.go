package main

import "syscall"

// childAttr starts a child of run --processes in its own process group,
// with SIGTERM sent to it when this process dies (PR_SET_PDEATHSIG).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
