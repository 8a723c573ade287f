package schedslice

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func slices(t *testing.T) map[int]time.Duration {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]time.Duration{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if attr, err := unix.SchedGetAttr(tid, 0); err == nil {
			out[tid] = time.Duration(attr.Runtime)
		}
	}
	return out
}

// Every thread gets the slice, and threads the runtime starts afterwards
// inherit it.
func TestApplySetsEveryThreadAndNewOnes(t *testing.T) {
	const d = 200 * time.Microsecond
	n, err := Apply(d)
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("this kernel has no custom slices: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	before := slices(t)
	if n < 1 || n > len(before)+1 {
		t.Errorf("set %d threads, the process has %d", n, len(before))
	}
	// More goroutines locked to threads in blocking sleeps than the
	// process has threads make the runtime start new ones.
	var wg sync.WaitGroup
	for range len(before) + 4 {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			_ = unix.Nanosleep(&unix.Timespec{Nsec: int64(30 * time.Millisecond)}, nil)
		})
	}
	time.Sleep(10 * time.Millisecond)
	after := slices(t)
	wg.Wait()
	newThreads := 0
	for tid, got := range after {
		if _, old := before[tid]; !old {
			newThreads++
		}
		if got != d {
			t.Errorf("thread %d has a slice of %v, want %v", tid, got, d)
		}
	}
	if newThreads == 0 {
		t.Error("no new thread was started: inheritance not checked")
	}
}

func TestValidate(t *testing.T) {
	for d, ok := range map[time.Duration]bool{0: true, Min: true, Max: true, 50 * time.Microsecond: false, time.Second: false} {
		if err := Validate(d); (err == nil) != ok {
			t.Errorf("Validate(%v) = %v", d, err)
		}
	}
	if _, err := Apply(time.Second); err == nil {
		t.Error("Apply took a slice over the kernel's bound")
	}
}
