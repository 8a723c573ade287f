package otlp

import (
	"context"
	"sync"
	"sync/atomic"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Signals as tokenprobe_otlp_dropped_total's signal label names them.
const (
	SignalTraces  = "traces"
	SignalMetrics = "metrics"
)

// losses counts what the exporters failed to deliver: a failed export
// (the collector refused, was down, or did not answer within the export's
// timeout) loses its spans or points, which the SDK only logs.
type losses struct {
	report func(signal string, n int64) // nil: counted here only
	// stop ends every export in progress: Shutdown cancels it once its
	// deadline passes, so that no export goes on after it returned.
	stop   context.Context
	cancel context.CancelFunc
	spans  atomic.Int64
	points atomic.Int64
	// ended and exported are the spans made and the spans a collector
	// took: at shutdown, the spans still in the batcher when its deadline
	// passed are the difference, less those already counted lost.
	ended, exported atomic.Int64
	// pending are the spans handed to the batcher and not yet through an
	// export, for admitted.
	pending atomic.Int64
	// settled is set once shutdown has counted every span not delivered:
	// the exports it then cuts short lose nothing more.
	mu      sync.Mutex
	settled bool
}

// settle counts the spans made and neither delivered nor yet counted
// lost, at shutdown: those the batcher still held at the deadline.
func (l *losses) settle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.settled {
		return
	}
	l.settled = true
	if n := l.ended.Load() - l.exported.Load() - l.spans.Load(); n > 0 {
		l.spans.Add(n)
		if l.report != nil {
			l.report(SignalTraces, n)
		}
	}
}

// spanQueue is the batcher's queue: spans past it are dropped and counted.
const spanQueue = 8192

// admitted lets a span into the batcher only while its queue has room,
// and counts the others lost: the SDK's batcher drops what does not fit
// without a count anyone can read. pending covers the queue and the batch
// being exported, so the queue itself never overflows.
type admitted struct {
	sdktrace.SpanProcessor
	l *losses
}

func (a *admitted) OnEnd(s sdktrace.ReadOnlySpan) {
	if a.l.pending.Add(1) > spanQueue {
		a.l.pending.Add(-1)
		a.l.lost(SignalTraces, 1)
		return
	}
	a.SpanProcessor.OnEnd(s)
}

func newLosses(report func(string, int64)) *losses {
	l := &losses{report: report}
	l.stop, l.cancel = context.WithCancel(context.Background())
	return l
}

// bound is ctx, also ended by l.stop.
func (l *losses) bound(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.stop, cancel)
	return ctx, func() { stop(); cancel() }
}

func (l *losses) lost(signal string, n int64) {
	if n <= 0 {
		return
	}
	if signal == SignalTraces {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.settled {
			return
		}
		l.spans.Add(n)
	} else {
		l.points.Add(n)
	}
	if l.report != nil {
		l.report(signal, n)
	}
}

// countingSpans is a span exporter that counts what it failed to export.
type countingSpans struct {
	sdktrace.SpanExporter
	l *losses
}

func (c countingSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := c.l.stop.Err(); err != nil {
		// After Shutdown: the batcher empties its queue, each batch lost
		// at once rather than encoded for a collector that is gone.
		c.l.pending.Add(-int64(len(spans)))
		c.l.lost(SignalTraces, int64(len(spans)))
		return err
	}
	ctx, done := c.l.bound(ctx)
	defer done()
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.l.pending.Add(-int64(len(spans)))
	if err != nil {
		c.l.lost(SignalTraces, int64(len(spans)))
	} else {
		c.l.exported.Add(int64(len(spans)))
	}
	return err
}

// countingMetrics is a metric exporter that counts the data points of
// an export that failed.
type countingMetrics struct {
	sdkmetric.Exporter
	l *losses
}

func (c countingMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	ctx, done := c.l.bound(ctx)
	defer done()
	err := c.Exporter.Export(ctx, rm)
	if err != nil {
		c.l.lost(SignalMetrics, points(rm))
	}
	return err
}

// points is the number of data points in rm.
func points(rm *metricdata.ResourceMetrics) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				n += int64(len(d.DataPoints))
			case metricdata.Gauge[float64]:
				n += int64(len(d.DataPoints))
			case metricdata.Sum[int64]:
				n += int64(len(d.DataPoints))
			case metricdata.Sum[float64]:
				n += int64(len(d.DataPoints))
			case metricdata.Histogram[int64]:
				n += int64(len(d.DataPoints))
			case metricdata.Histogram[float64]:
				n += int64(len(d.DataPoints))
			case metricdata.ExponentialHistogram[int64]:
				n += int64(len(d.DataPoints))
			case metricdata.ExponentialHistogram[float64]:
				n += int64(len(d.DataPoints))
			case metricdata.Summary:
				n += int64(len(d.DataPoints))
			default:
				n++
			}
		}
	}
	return n
}

// Dropped is how many spans and metric points this exporter failed to
// deliver so far, shutdown included.
func (e *Exporter) Dropped() (spans, points int64) {
	return e.losses.spans.Load(), e.losses.points.Load()
}
