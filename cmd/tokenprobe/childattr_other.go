//go:build !linux

package main

import "syscall"

// childAttr starts a child of run --processes in its own process group;
// it watches its parent itself (watchParent), having no parent-death
// signal here.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
