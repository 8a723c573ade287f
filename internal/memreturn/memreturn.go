// Package memreturn gives the heap's free memory back to the operating
// system after a burst, so that a daemon's resident size falls back to its
// baseline within a minute of a hostile run.
//
// Go's runtime keeps freed heap pages mapped, and returns them only as
// its scavenger paces itself against the heap goal of the last GC. An
// idle daemon allocates little, so no GC lowers that goal: after four 60
// MB answers the daemon held 368 MB for 170 s and more, against a 32 MB
// baseline (issue 45). debug.FreeOSMemory forces a GC and returns every
// free page at once; it costs one GC, so it runs only while the heap
// keeps more than a threshold mapped, at most once an interval.
package memreturn

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults: a check every 15 s, a return when the heap keeps over 32 MiB
// mapped, at most once every 30 s: memory returns within 45 s of the end
// of the burst, and a daemon whose heap stays under 32 MiB (the demo's
// keeps about 10 MiB mapped) never pays for a forced GC. One that holds
// more pays one GC every 30 s at most.
//
// A daemon that goes idle (its last run ended) asks for a return through
// Settle, whatever the threshold: what the run left is garbage then, and
// the demo's heap falls from about 16 MiB resident to 10 (docs/BENCHMARKS.md,
// idle). It costs one GC of a small heap, at most once every
// DefaultSettleGap; a settle inside the gap waits it out.
const (
	DefaultEvery     = 15 * time.Second
	DefaultThreshold = 32 << 20
	DefaultMinGap    = 30 * time.Second
	DefaultSettleGap = 10 * time.Second
)

// Returner decides when to give memory back.
type Returner struct {
	// Threshold is the heap's mapped bytes (objects, free and unused
	// pages, not those already returned) over which memory is returned.
	Threshold uint64
	// MinGap is the least time between two returns over the threshold.
	MinGap time.Duration
	// SettleGap is the least time between a return and one Settle asks
	// for.
	SettleGap time.Duration

	once   sync.Once
	settle chan struct{}
	last   time.Time
	// Returned counts the returns, and Freed the mapped bytes they gave
	// back, for a log line or a test.
	Returned atomic.Int64
	Freed    atomic.Uint64

	// now and after are the clock (time.Now and time.After when nil), a
	// test's to replace.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// Check returns memory when the heap keeps more than Threshold mapped and
// the last return was MinGap ago or more; it reports whether it did.
func (r *Returner) Check(now time.Time) bool {
	before := Mapped()
	if before <= r.Threshold || (!r.last.IsZero() && now.Sub(r.last) < r.MinGap) {
		return false
	}
	r.free(now, before)
	return true
}

func (r *Returner) free(now time.Time, before uint64) {
	debug.FreeOSMemory()
	r.last = now
	r.Returned.Add(1)
	if after := Mapped(); after < before {
		r.Freed.Add(before - after)
	}
}

func (r *Returner) settled() chan struct{} {
	r.once.Do(func() { r.settle = make(chan struct{}, 1) })
	return r.settle
}

// Settle asks Run for a return whatever the threshold, at once or when
// SettleGap since the last return has passed; it never blocks, and asks
// made before Run takes one are one ask.
func (r *Returner) Settle() {
	select {
	case r.settled() <- struct{}{}:
	default:
	}
}

// Run checks every interval, and returns what Settle asks for, until ctx
// ends.
func (r *Returner) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	clock, after := r.now, r.after
	if clock == nil {
		clock = time.Now
	}
	if after == nil {
		after = time.After
	}
	var due <-chan time.Time // a settle waiting out its gap
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.Check(now)
		case <-r.settled():
			if due != nil {
				continue // already waiting
			}
			now := clock()
			if wait := r.SettleGap - now.Sub(r.last); !r.last.IsZero() && wait > 0 {
				due = after(wait)
				continue
			}
			r.free(now, Mapped())
		case <-due:
			due = nil
			r.free(clock(), Mapped())
		}
	}
}

var samples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
	{Name: "/memory/classes/heap/unused:bytes"},
}

// Mapped is the heap's bytes the process holds from the operating system:
// its objects (live, or garbage not yet swept), its free pages and its
// unused parts of spans; not what was already returned.
func Mapped() uint64 {
	s := make([]metrics.Sample, len(samples))
	copy(s, samples)
	metrics.Read(s)
	var n uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += v.Value.Uint64()
		}
	}
	return n
}
