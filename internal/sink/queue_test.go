package sink

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

type blockingSink struct {
	release chan struct{}
	mu      sync.Mutex
	seen    int
}

func (b *blockingSink) Observe(*result.Request, slo.Verdict) {
	<-b.release
	b.mu.Lock()
	b.seen++
	b.mu.Unlock()
}

type count struct{ n atomic.Int64 }

func (c *count) Inc() { c.n.Add(1) }

// A stuck sink never holds up Observe: what does not fit is dropped and
// counted, and Close delivers everything that was queued.
func TestQueueDropsInsteadOfBlocking(t *testing.T) {
	sink := &blockingSink{release: make(chan struct{})}
	dropped := &count{}
	q := NewQueue(sink, 4, dropped)
	r := &result.Request{}
	for range 20 {
		q.Observe(r, slo.Verdict{}) // returns at once although the sink is stuck
	}
	// One in the sink's hands, four queued, the rest dropped.
	if n := dropped.n.Load(); n != 15 && n != 16 {
		t.Fatalf("dropped %d of 20 with a queue of 4", n)
	}
	close(sink.release)
	q.Close()
	if got := int64(sink.seen) + dropped.n.Load(); got != 20 {
		t.Fatalf("seen %d + dropped %d != 20", sink.seen, dropped.n.Load())
	}
	q.Observe(r, slo.Verdict{}) // after Close: ignored, no panic
}

// A sink stuck for good (an exporter whose collector never answers) holds
// a close no longer than its deadline; what was queued is counted lost.
func TestCloseWithinGivesUpOnAStuckSink(t *testing.T) {
	sink := &blockingSink{release: make(chan struct{})}
	defer close(sink.release)
	dropped := &count{}
	q := NewQueue(sink, 8, dropped)
	r := &result.Request{}
	q.Observe(r, slo.Verdict{})
	for len(q.ch) != 0 { // until the sink holds it
		time.Sleep(time.Millisecond)
	}
	for range 8 {
		q.Observe(r, slo.Verdict{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan int64)
	go func() { done <- q.CloseWithin(ctx) }()
	select {
	case n := <-done:
		if n != 8 || q.Dropped() != 8 || dropped.n.Load() != 8 {
			t.Fatalf("abandoned %d, Dropped %d, counter %d; want the 8 queued", n, q.Dropped(), dropped.n.Load())
		}
	case <-time.After(time.Minute): // a hang, not a timing
		t.Fatal("CloseWithin waited for the stuck sink")
	}
}
