//go:build linux

package childproc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A child outlives the threads of this process that end. Eight rounds of
// 64 goroutines that return locked to their threads, all at once, take
// every idle thread, the one that started the child among them unless
// Start keeps it (cmd.Start alone: killed in 9 of 10 runs here).
func TestChildOutlivesEndedThreads(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	wait, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = wait() })
	tids := make(chan int, 8*64)
	for range 8 {
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				runtime.LockOSThread()
				tids <- unix.Gettid()
				time.Sleep(5 * time.Millisecond)
			})
		}
		wg.Wait()
	}
	close(tids)
	// The kernel signals the child as the thread exits: once every one of
	// them is gone, a kill is pending or done.
	deadline := time.Now().Add(time.Minute)
	for tid := range tids {
		// Go parks the main thread rather than end it.
		for tid != os.Getpid() {
			if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("thread %d, its goroutine ended locked to it, still runs after a minute", tid)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if why := killed(cmd.Process.Pid); why != "" {
		t.Fatalf("the child was killed when the thread that started it ended: %s", why)
	}
}

// A start that fails returns its error; a child that ends is waited for.
func TestStartFails(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/child")); err == nil {
		t.Fatal("a child that cannot start started")
	}
	cmd := exec.Command("true")
	wait, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("true: %v", err)
	}
}

// killed says how process pid is dead or dying ("" if it is neither): gone,
// a zombie, or with SIGKILL pending.
func killed(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "gone"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "State":
			if strings.HasPrefix(v, "Z") || strings.HasPrefix(v, "X") {
				return "state " + v
			}
		case "SigPnd", "ShdPnd":
			if m, err := strconv.ParseUint(v, 16, 64); err == nil && m&(1<<(unix.SIGKILL-1)) != 0 {
				return "SIGKILL pending"
			}
		}
	}
	return ""
}
