// Package childproc starts child processes that are told when this one
// dies, for as long as it lives.
//
// Linux sends a child's PR_SET_PDEATHSIG (exec.Cmd's SysProcAttr.Pdeathsig)
// when the thread that started it ends, not the process; and Go ends a
// thread whose goroutine returns locked to it (one that entered a network
// namespace, say). A child started from an ordinary goroutine dies when
// its starting thread is later handed to such a goroutine. Start keeps
// that thread for the child until it has been waited for.
package childproc

import (
	"os/exec"
	"runtime"
)

// Start starts cmd from a goroutine locked to its thread, which stays so
// until wait returns. wait is cmd.Wait, to be called as cmd.Wait is: once,
// after reading any pipes to the end.
func Start(cmd *exec.Cmd) (wait func() error, err error) {
	started := make(chan error, 1)
	waited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			<-waited
		}
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return func() error {
		defer close(waited)
		return cmd.Wait()
	}, nil
}
