package schedslice

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
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
	// More goroutines locked to threads than the process has threads,
	// all holding theirs at once, make the runtime start new ones.
	var wg, locked sync.WaitGroup
	release := make(chan struct{})
	for range len(before) + 4 {
		locked.Add(1)
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			locked.Done()
			<-release
		})
	}
	locked.Wait()
	after := slices(t)
	close(release)
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

// A process started with `nice` keeps its nice value: an unprivileged
// process could not lower it again, and must not raise its priority.
func TestApplyKeepsNice(t *testing.T) {
	if os.Getenv("SCHEDSLICE_CHILD") == "1" {
		if _, err := Apply(200 * time.Microsecond); err != nil && !errors.Is(err, ErrUnsupported) {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		attr, _ := unix.SchedGetAttr(0, 0)
		fmt.Printf("nice=%d slice=%d\n", attr.Nice, attr.Runtime)
		os.Exit(0)
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		t.Skip("no nice(1)")
	}
	// nice adds to the niceness the suite runs at, which a busy machine's
	// shell may already have raised: the child's is ours plus 5 (capped
	// at 19), whatever ours is.
	own, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Skip(err)
	}
	want := min(20-own+5, 19) // getpriority(2) returns 20 - nice
	cmd := exec.Command(nice, "-n", "5", os.Args[0], "-test.run=^TestApplyKeepsNice$")
	cmd.Env = append(os.Environ(), "SCHEDSLICE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("nice=%d ", want)) {
		t.Errorf("after Apply under nice -n 5 (the suite at nice %d): %s, want nice=%d", 20-own, out, want)
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
