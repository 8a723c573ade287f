package bench

import (
	"sync"
	"syscall"
	"time"
)

// Held is what a client process spent in the part of a closed loop's load
// when its streams are open: its own CPU time and the content chunks it
// read from the settle instant (Load.Settle) to the load's end. At the
// wide levels every answer outlasts the load, so no stream opens or ends
// in that window: it is the reading and stamping of chunks. The rest of a
// stream's life is outside it: opening its connection (tens of thousands
// of handshakes at once), sending its request, its chunks before and after
// the window, and its result's work at its end (tokenprobe observes a
// request's gaps into its histograms then).
// The whole process's CPU per chunk, which the bars judge, is both.
type Held struct {
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// Chunks are the content chunks read in the window. The floor counts
	// SSE events: the same at the wide levels, and at a level whose
	// answers end in the window each answer's finishing chunk and [DONE]
	// too (the report shows Held for the wide levels only).
	Chunks int64 `json:"chunks"`
	// OpenAtStart and OpenAtEnd are the streams open as the window began
	// and as it ended: fewer than the level's at the start, and the
	// window holds openings too.
	OpenAtStart int64 `json:"open_at_start"`
	OpenAtEnd   int64 `json:"open_at_end"`
	// GCCycles are the garbage collections before the window: at the
	// wide levels, while the streams opened and the heap grew. StackBytes
	// and ScanHeapBytes are what a collection walks as the window begins:
	// the memory held for goroutine stacks and the heap that holds
	// pointers. The floor's are the least a Go client holding the streams
	// walks.
	GCCycles      uint64 `json:"gc_cycles"`
	StackBytes    uint64 `json:"stack_bytes"`
	ScanHeapBytes uint64 `json:"scan_heap_bytes"`
}

// CPUPerMillionChunks is the window's CPU seconds per million chunks.
func (h *Held) CPUPerMillionChunks() float64 {
	if h == nil || h.Chunks == 0 {
		return 0
	}
	return h.CPUSeconds / float64(h.Chunks) * 1e6
}

// addHeld is the held window of a level's processes together: their CPU,
// chunks and open streams added, the longest window. A process without
// one (its load too short to settle) leaves the level without one.
func addHeld(sum, h *Held) *Held {
	if sum == nil || h == nil {
		return nil
	}
	return &Held{Seconds: max(sum.Seconds, h.Seconds), CPUSeconds: sum.CPUSeconds + h.CPUSeconds, Chunks: sum.Chunks + h.Chunks,
		OpenAtStart: sum.OpenAtStart + h.OpenAtStart, OpenAtEnd: sum.OpenAtEnd + h.OpenAtEnd,
		GCCycles: sum.GCCycles + h.GCCycles, StackBytes: sum.StackBytes + h.StackBytes, ScanHeapBytes: sum.ScanHeapBytes + h.ScanHeapBytes}
}

// heldMark is one end of the window.
type heldMark struct {
	at     time.Time
	cpu    time.Duration
	chunks int64
	open   int64
	// the collector's, at the window's start
	gcCycles, stackBytes, scanHeapBytes uint64
}

// heldWindow takes the two marks of a Held, each from a timer.
type heldWindow struct {
	chunks, open func() int64
	cpu          func() time.Duration // this process's CPU time so far

	mu     sync.Mutex
	from   *heldMark
	held   *Held
	timers [2]*time.Timer // begin's and end's; nil where not armed
	ended  chan struct{}  // closed once end has returned or will not run
	once   sync.Once
}

func newHeldWindow(chunks, open func() int64, cpu func() time.Duration) *heldWindow {
	return &heldWindow{chunks: chunks, open: open, cpu: cpu, ended: make(chan struct{})}
}

// startHeld arms the window of a load that starts now and lasts d: from
// settle to d. chunks and open read the client's counters. A load that
// does not outlast its settling has no window (nil).
func startHeld(settle, d time.Duration, chunks, open func() int64) *heldWindow {
	if settle <= 0 || settle >= d {
		return nil
	}
	w := newHeldWindow(chunks, open, selfCPU)
	w.timers[0] = time.AfterFunc(settle, w.begin)
	w.timers[1] = time.AfterFunc(d, w.end)
	return w
}

func (w *heldWindow) mark() heldMark {
	return heldMark{at: time.Now(), cpu: w.cpu(), chunks: w.chunks(), open: w.open()}
}

func (w *heldWindow) begin() {
	m := w.mark()
	m.gcCycles, m.stackBytes, m.scanHeapBytes = collectorWork()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.from = &m
}

func (w *heldWindow) end() {
	defer w.closeEnded()
	m := w.mark()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.from == nil || w.held != nil {
		return
	}
	f := w.from
	w.held = &Held{Seconds: m.at.Sub(f.at).Seconds(), CPUSeconds: (m.cpu - f.cpu).Seconds(), Chunks: m.chunks - f.chunks,
		OpenAtStart: f.open, OpenAtEnd: m.open, GCCycles: f.gcCycles, StackBytes: f.stackBytes, ScanHeapBytes: f.scanHeapBytes}
}

func (w *heldWindow) closeEnded() { w.once.Do(func() { close(w.ended) }) }

// result stops the timers and is the window, or nil where the load ended
// before the window did (cancelled).
func (w *heldWindow) result() *Held {
	if w == nil {
		return nil
	}
	if t := w.timers[0]; t != nil {
		t.Stop()
	}
	if t := w.timers[1]; t == nil || t.Stop() {
		w.closeEnded() // end will not run from its timer
	}
	<-w.ended // or it fired: its mark may still be being taken
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held
}

// selfCPU is this process's user plus system time so far (all threads).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return rusageCPU(&ru)
}
