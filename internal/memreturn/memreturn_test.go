package memreturn

import (
	"runtime"
	"testing"
	"time"
)

var sink [][]byte

// After a burst of 256 MiB that is garbage once it ends, one check gives
// the heap's pages back: what the heap keeps mapped falls under the
// threshold, where without the return it stays near the burst until the
// scavenger, paced by a heap goal no GC lowered, gets to it.
func TestABurstIsGivenBack(t *testing.T) {
	burst := func() {
		for range 64 {
			b := make([]byte, 4<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1 // touched: resident, not only reserved
			}
			sink = append(sink, b)
		}
		sink = nil
	}
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
	if !r.Check(now.Add(time.Minute)) || r.Returned != 2 {
		t.Errorf("no return after the gap (%d returns)", r.Returned)
	}
	// Under the threshold, nothing to do.
	if r.Check(now.Add(time.Hour)) {
		t.Error("a return with the heap under the threshold")
	}
}
