package schedslice

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Apply gives every thread of the process a slice of d; threads started
// later inherit it from the thread that starts them. It returns how many
// threads it set. On kernels before 6.12 the kernel accepts the call and
// ignores the slice; Apply reads it back and says so.
func Apply(d time.Duration) (int, error) {
	if err := Validate(d); err != nil || d == 0 {
		return 0, err
	}
	// Threads started while we set them may come from one not set yet:
	// pass again until a pass finds none new.
	set := map[int]bool{}
	for pass := 0; pass < 3; pass++ {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return len(set), err
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || set[tid] {
				continue
			}
			// Keep the thread's policy and nice value (a user's `nice`
			// stays, and an unprivileged process could not undo it);
			// real-time threads are left as they are.
			cur, err := unix.SchedGetAttr(tid, 0)
			if errors.Is(err, unix.ESRCH) { // the thread ended meanwhile
				continue
			}
			if err != nil {
				return len(set), fmt.Errorf("sched_getattr: %w", err)
			}
			if cur.Policy != unix.SCHED_NORMAL && cur.Policy != unix.SCHED_BATCH {
				continue
			}
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: cur.Policy, Nice: cur.Nice, Runtime: uint64(d)}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
				if errors.Is(err, unix.ESRCH) {
					continue
				}
				return len(set), fmt.Errorf("sched_setattr: %w", err)
			}
			set[tid] = true
			fresh++
		}
		if fresh == 0 {
			break
		}
	}
	n := len(set)
	if got, err := Current(); err != nil || got != d {
		return n, ErrUnsupported
	}
	return n, nil
}

// Current is the calling thread's slice as the kernel reports it (0: the
// kernel's default, or a kernel without custom slices).
func Current() (time.Duration, error) {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return 0, err
	}
	return time.Duration(attr.Runtime), nil
}
