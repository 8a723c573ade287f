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
	"time"
)

// Defaults: a check every 15 s, a return when the heap keeps over 32 MiB
// mapped, at most once every 30 s: memory returns within 45 s of the end
// of the burst, and a daemon whose heap stays under 32 MiB (the demo's
// keeps about 10 MiB mapped) never pays for a forced GC. One that holds
// more pays one GC every 30 s at most.
const (
	DefaultEvery     = 15 * time.Second
	DefaultThreshold = 32 << 20
	DefaultMinGap    = 30 * time.Second
)

// Returner decides when to give memory back.
type Returner struct {
	// Threshold is the heap's mapped bytes (objects, free and unused
	// pages, not those already returned) over which memory is returned.
	Threshold uint64
	// MinGap is the least time between two returns.
	MinGap time.Duration

	last time.Time
	// Returned counts the returns, and Freed the mapped bytes they gave
	// back, for a log line or a test.
	Returned int
	Freed    uint64
}

// Check returns memory when the heap keeps more than Threshold mapped and
// the last return was MinGap ago or more; it reports whether it did.
func (r *Returner) Check(now time.Time) bool {
	before := Mapped()
	if before <= r.Threshold || (!r.last.IsZero() && now.Sub(r.last) < r.MinGap) {
		return false
	}
	debug.FreeOSMemory()
	r.last = now
	r.Returned++
	if after := Mapped(); after < before {
		r.Freed += before - after
	}
	return true
}

// Run checks every interval until ctx ends.
func (r *Returner) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.Check(now)
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
