package memreturn

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

var sink [][]byte

// After a burst of 256 MiB that is garbage once it ends, one check gives
// the heap's pages back: what the heap keeps mapped falls under the
// threshold, where without the return it stays near the burst until the
// scavenger, paced by a heap goal no GC lowered, gets to it.
func burst() {
	for range 64 {
		b := make([]byte, 4<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touched: resident, not only reserved
		}
		sink = append(sink, b)
	}
	sink = nil
}

func TestABurstIsGivenBack(t *testing.T) {
	burst()
	runtime.GC() // the burst is free now, but its pages are kept
	kept := Mapped()
	if kept < 128<<20 {
		t.Skipf("the runtime returned the burst by itself (%d MiB kept): nothing to test", kept>>20)
	}
	r := Returner{Threshold: DefaultThreshold, MinGap: time.Minute}
	now := time.Now()
	if !r.Check(now) {
		t.Fatalf("no return with %d MiB mapped", kept>>20)
	}
	if after := Mapped(); after > DefaultThreshold {
		t.Errorf("%d MiB mapped after the return (%d MiB before)", after>>20, kept>>20)
	}
	// A second burst within the gap waits for it: one forced GC a gap.
	burst()
	runtime.GC()
	if r.Check(now.Add(time.Second)) {
		t.Error("a second return within the gap")
	}
	if !r.Check(now.Add(time.Minute)) || r.Returned.Load() != 2 {
		t.Errorf("no return after the gap (%d returns)", r.Returned.Load())
	}
	// Under the threshold, nothing to do.
	if r.Check(now.Add(time.Hour)) {
		t.Error("a return with the heap under the threshold")
	}
}

// A daemon gone idle asks for a return under the threshold: Run gives the
// heap's free pages back at once, and a second ask inside SettleGap waits
// out the gap (on the test's clock) before it returns.
func TestSettleReturnsUnderTheThreshold(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	asked := make(chan time.Duration, 1)
	fire := make(chan time.Time)
	r := &Returner{Threshold: 1 << 40, MinGap: time.Hour, SettleGap: time.Minute,
		now:   func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		after: func(d time.Duration) <-chan time.Time { asked <- d; return fire }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx, time.Hour); close(done) }()
	defer func() { cancel(); <-done }()
	returned := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); r.Returned.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d returns after 10 s, want %d", r.Returned.Load(), n)
			}
		}
	}

	burst()
	runtime.GC()
	kept := Mapped()
	if kept < 128<<20 {
		t.Skipf("the runtime returned the burst by itself (%d MiB kept): nothing to test", kept>>20)
	}
	r.Settle()
	returned(1)
	if after := Mapped(); after > kept/2 {
		t.Errorf("%d MiB mapped after the settle (%d MiB before)", after>>20, kept>>20)
	}

	burst()
	runtime.GC()
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	r.Settle()
	select {
	case d := <-asked:
		if d != 59*time.Second {
			t.Errorf("the second settle waits %v, want the rest of the gap (59s)", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the second settle, inside the gap, did not wait for it (%d returns)", r.Returned.Load())
	}
	if n := r.Returned.Load(); n != 1 {
		t.Fatalf("%d returns inside the gap, want 1", n)
	}
	fire <- now
	returned(2)
}
