//go:build unix

package setup

import "syscall"

// OpenFileLimit is the process's open-file limit now (Go raised the soft
// limit to the hard one at start), 0 where it cannot be read.
func OpenFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}
