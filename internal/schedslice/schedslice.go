// Package schedslice asks the kernel to run this process's threads in
// short time slices, so that a thread woken by a chunk's arrival or a
// send time runs at once instead of waiting for another process's thread
// to finish its slice.
//
// A probe shares its machine: with a simulator in the benchmark, with
// other workloads in a pod. Linux's EEVDF scheduler (6.6 and later) lets
// a woken thread preempt the running one only when its virtual deadline
// is earlier, and with the default slice (0.75 ms times 1 + log2 of the
// CPUs, capped at 8) a woken thread can wait a whole slice. Since Linux
// 6.12 a thread may ask for a shorter slice (sched_setattr's
// sched_runtime for SCHED_OTHER), without privileges: its deadlines come
// sooner, so it preempts sooner. Its share of the CPU (its weight) does
// not change; only how long it waits when it wakes.
package schedslice

import (
	"errors"
	"fmt"
	"time"
)

// The kernel's bounds for a custom slice.
const (
	Min = 100 * time.Microsecond //nolint:revive // the least, not minutes
	Max = 100 * time.Millisecond
)

// ErrUnsupported is returned where the platform has no custom slices.
var ErrUnsupported = errors.New("custom scheduling slices need Linux 6.12 or later")

// Validate checks a slice given by a user: 0 (leave the kernel's) or
// between Min and Max.
func Validate(d time.Duration) error {
	if d != 0 && (d < Min || d > Max) {
		return fmt.Errorf("scheduling slice %v: want 0 (the kernel's) or %v to %v", d, Min, Max)
	}
	return nil
}
