package memreturn

import (
	"os"
	"runtime/debug"
	"sync"
)

// DefaultIdlePercent is the GC percent of an idle daemon. Between runs the
// heap holds about 4 MiB that lives, and each scrape of the metrics page
// leaves about 2 MB of garbage (client_golang's gathering and a gzip
// writer): at GOGC=100 the heap climbs back to twice what lives within a
// few scrapes and stays there. At 50 the idle demo daemon keeps about
// 1.3 MiB less resident for about 0.05% of a core more; at 25, 2.6 MiB
// less for 0.3% more, over half again what the idle daemon spends
// (docs/BENCHMARKS.md, how to read the figures).
const DefaultIdlePercent = 50

// IdleGC lowers the garbage collector's percent while no run is in
// progress, and puts back the one the process had as a run starts. The
// headroom a higher percent buys is fewer collections under a run's
// allocation rate; an idle daemon allocates only as it is scraped.
//
// A process started with GOGC set keeps it: the operator chose.
type IdleGC struct {
	// Percent is the idle GC percent; DefaultIdlePercent when 0.
	Percent int

	mu    sync.Mutex
	saved int  // the percent before Idle, put back by Busy
	idle  bool // Idle set the percent and Busy has not put it back
	set   func(int) int
}

// Idle lowers the GC percent, unless GOGC was set or it already is.
func (g *IdleGC) Idle() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idle || os.Getenv("GOGC") != "" {
		return
	}
	p := g.Percent
	if p == 0 {
		p = DefaultIdlePercent
	}
	g.saved = g.setPercent(p)
	if g.saved >= 0 && g.saved <= p {
		g.setPercent(g.saved) // already as low, or lower: leave it
		return
	}
	g.idle = true
}

// Busy puts back the percent Idle lowered.
func (g *IdleGC) Busy() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.idle {
		return
	}
	g.setPercent(g.saved)
	g.idle = false
}

func (g *IdleGC) setPercent(p int) int {
	if g.set != nil {
		return g.set(p)
	}
	return debug.SetGCPercent(p)
}
