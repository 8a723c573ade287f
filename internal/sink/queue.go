// Package sink holds what the sinks share: the queue that keeps any
// sink from ever holding up the load generator.
package sink

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// Counter is the part of a Prometheus counter the queue needs.
type Counter interface{ Inc() }

// Queue runs a sink on its own goroutine behind a bounded queue. Observe
// never blocks: when the queue is full the result is dropped and counted,
// as k6 counts dropped iterations instead of slowing the load down.
type Queue struct {
	sink    probe.Sink
	dropped Counter
	ch      chan item
	done    chan struct{}
	mu      sync.RWMutex
	closed  bool
	// abandoned is set when a close's deadline passed: what is still
	// queued is then counted as dropped, not handed to the sink.
	abandoned atomic.Bool
	lost      atomic.Int64
}

type item struct {
	r *result.Request
	v slo.Verdict
}

// NewQueue starts a queue of size results in front of sink. dropped may be nil.
func NewQueue(sink probe.Sink, size int, dropped Counter) *Queue {
	q := &Queue{sink: sink, dropped: dropped, ch: make(chan item, size), done: make(chan struct{})}
	go func() {
		defer close(q.done)
		for it := range q.ch {
			if q.abandoned.Load() {
				q.drop()
				continue
			}
			q.sink.Observe(it.r, it.v)
		}
	}()
	return q
}

// Observe hands a result to the sink's goroutine, or drops it.
func (q *Queue) Observe(r *result.Request, v slo.Verdict) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return
	}
	select {
	case q.ch <- item{r, v}:
	default:
		q.drop()
	}
}

func (q *Queue) drop() {
	q.lost.Add(1)
	if q.dropped != nil {
		q.dropped.Inc()
	}
}

// Dropped is how many results the queue has dropped: when it was full,
// and when a close gave up on them.
func (q *Queue) Dropped() int64 { return q.lost.Load() }

// RunStarted tells the sink behind the queue, when it hears runs, at
// once: the start and end of a run carry no result to queue.
func (q *Queue) RunStarted(run *probe.Run) {
	if rs, ok := q.sink.(probe.RunSink); ok {
		rs.RunStarted(run)
	}
}

// RunFinished is RunStarted's pair.
func (q *Queue) RunFinished(run *probe.Run, f probe.Finished) {
	if rs, ok := q.sink.(probe.RunSink); ok {
		rs.RunFinished(run, f)
	}
}

// Close stops taking results and waits until the sink has seen every one
// already queued, so that a flush after Close loses nothing.
func (q *Queue) Close() { q.CloseWithin(context.Background()) }

// CloseWithin is Close within ctx: a sink that cannot keep up (an exporter
// whose collector never answers) holds the caller no longer than ctx. What
// is still queued then is dropped and counted; abandoned is how many. The
// sink's goroutine may still be inside one Observe when it returns.
func (q *Queue) CloseWithin(ctx context.Context) (abandoned int64) {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return 0
	case <-ctx.Done():
	}
	before := q.lost.Load()
	q.abandoned.Store(true)
	// The goroutine may be stuck in the sink: take the rest here.
	for range q.ch {
		q.drop()
	}
	return q.lost.Load() - before
}
