package bench

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/steal"
)

// WideOptions are the levels of many streams: tens of thousands, more than
// one process may hold open under a machine's open-file limit, so each is
// held by as many client processes as the limit needs (each from its own
// source address) against as many simulators sharing one port (`tokenprobe
// sim --reuse-port`), as `tokenprobe run --processes` and several replicas
// hold them. The chunks come Interval apart, long enough that the machine
// is not saturated: what is measured is what a stream costs to hold, and
// how well it is timed, not a CPU-bound machine's queueing.
type WideOptions struct {
	Streams []int
	// Interval between one stream's chunks; Tokens per answer, enough
	// that a stream's answer outlasts Duration (one request a stream, no
	// burst of new requests as answers end together).
	Interval time.Duration
	Tokens   int
	Duration time.Duration
	// Settle is how long the streams have to open (tens of thousands of
	// connections and requests at once) before chunks count for timing.
	Settle time.Duration
	// PerProcess is the most streams one client or simulator process
	// holds; 0 is three quarters of this process's open-file limit.
	PerProcess int
	// Pairs is how many times each level measures the floor and
	// tokenprobe, one after the other, the order swapped each time (0 is
	// 1). One pair's CPU ratio spreads by up to a tenth either way between
	// runs of the same two binaries on a quiet host, and the order may
	// weigh (docs/BENCHMARKS.md, how to read the figures): the bar takes the
	// median pair's (Report.wideCPUBar).
	Pairs int
}

// pairs is o.Pairs, at least 1.
func (o WideOptions) pairs() int { return max(o.Pairs, 1) }

// pairOrder is the order the clients run in at a level's pair-th
// measurement (1-based): as given in odd ones, the floor and tokenprobe
// swapped in even ones; k6, which has no ratio to judge, only in the
// first.
func pairOrder(clients []string, pair int) []string {
	out := make([]string, 0, len(clients))
	for _, k := range clients {
		if k == KindK6 && pair > 1 {
			continue
		}
		out = append(out, k)
	}
	if pair%2 == 0 {
		fl, tp := slices.Index(out, KindFloor), slices.Index(out, KindTokenprobe)
		if fl >= 0 && tp >= 0 {
			out[fl], out[tp] = out[tp], out[fl]
		}
	}
	return out
}

// perProcess is o.PerProcess, or three quarters of the open-file limit:
// room for the process's own files, and for the uneven spread of a shared
// port's connections over its simulators.
func (o WideOptions) perProcess() int {
	if o.PerProcess > 0 {
		return o.PerProcess
	}
	return int(openFileLimit() * 3 / 4)
}

// openFileLimit is this process's open-file limit (Go raised the soft
// limit to the hard one at start); 0 where it cannot be read.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return l.Cur
}

// runWide measures every wide level with every client into rep.Wide. A
// client that cannot hold a level (k6, one process) is a problem the
// report names, not a gap.
func runWide(ctx context.Context, o Options, rep *Report) {
	w := o.Wide
	per := w.perProcess()
	if per <= 0 {
		rep.Problems = append(rep.Problems, "many streams: the open-file limit cannot be read")
		return
	}
	// Each client process gets a source address no process used before
	// in this run: the connections a client closed wait in TIME_WAIT for a
	// minute, holding their ports, and a next client on the same source
	// and destination would run out of the 28,000 (connect: cannot assign
	// requested address).
	source := 0
	sources := func(k int) []string {
		out := make([]string, k)
		for i := range out {
			source++
			out[i] = fmt.Sprintf("127.0.%d.%d", source/250, source%250+1)
		}
		return out
	}
	for _, n := range w.Streams {
		if ctx.Err() != nil {
			return
		}
		procs := (n + per - 1) / per
		port, err := freePort()
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			return
		}
		var sims []*simulator
		stop := func() {
			for _, s := range sims {
				s.stop()
			}
		}
		for range procs {
			s, err := startSimulatorAt(ctx, o.Tokenprobe, o.Progress, "127.0.0.1:"+port, "--bench", "--decode-base", w.Interval.String(), "--reuse-port")
			if err != nil {
				stop()
				rep.Problems = append(rep.Problems, fmt.Sprintf("%d streams: %v", n, err))
				return
			}
			sims = append(sims, s)
		}
		l := Load{URL: sims[0].base + "/v1", Streams: n, Duration: w.Duration, Tokens: w.Tokens, Interval: w.Interval, Settle: w.Settle}
		lv := &wideLevel{n: n, procs: procs, per: per, load: l, sims: sims, sources: sources}
		for pair := 1; pair <= w.pairs(); pair++ {
			lv.measurePair(ctx, o, rep, pair)
		}
		stop()
	}
}

// wideLevel is one wide level as runWide set it up: n streams over
// procs client processes of at most per streams, against sims.
type wideLevel struct {
	n, procs, per int
	load          Load
	sims          []*simulator
	sources       func(k int) []string // k source addresses no process used before
}

// measurePair measures the level's clients once each, in pairOrder, into
// rep.Wide.
func (lv *wideLevel) measurePair(ctx context.Context, o Options, rep *Report, pair int) {
	w, n := o.Wide, lv.n
	of := ""
	if w.pairs() > 1 {
		of = fmt.Sprintf(" (pair %d of %d)", pair, w.pairs())
	}
	for _, kind := range pairOrder(o.Clients, pair) {
		if ctx.Err() != nil {
			return
		}
		if kind != KindTokenprobe && kind != KindFloor && kind != KindK6 || kind == KindK6 && o.K6 == "" {
			continue
		}
		if kind == KindK6 && o.K6WideMaxStreams > 0 && n > o.K6WideMaxStreams {
			// k6 runs a test in one process (spreading one takes its
			// operator or its cloud): past the limit it fails, which
			// the level below this one has shown.
			rep.Problems = append(rep.Problems, fmt.Sprintf("k6 at %d streams: not run (--k6.wide-max-streams %d): k6 runs a test in one process, which may open %d files here; the levels it was run at show how it fails past that",
				n, o.K6WideMaxStreams, openFileLimit()))
			continue
		}
		inProcs := lv.procs
		if kind == KindK6 {
			inProcs = 1
		}
		fmt.Fprintf(o.Progress, "bench: %d streams (%s apart) with %s in %d processes against %d simulators for %s%s ...\n", n, w.Interval, kind, inProcs, len(lv.sims), w.Duration, of)
		cpuBefore := simCPU(lv.sims)
		meter := steal.Start()
		var (
			m   Measurement
			err error
		)
		if kind == KindK6 {
			m, err = measureK6(ctx, o.K6, lv.load)
		} else {
			m, err = measureProcesses(ctx, o, kind, lv.load, lv.sources(lv.procs))
		}
		m.StealPercent, m.BusyPercent = meter.Percent(), meter.BusyPercent()
		m.SimCPUSeconds = (simCPU(lv.sims) - cpuBefore).Seconds()
		m.Simulators = len(lv.sims)
		m.Pair = pair
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d streams, %s%s: %v", n, kind, of, err))
			fmt.Fprintf(o.Progress, "bench:   failed: %v\n", err)
			continue
		}
		fmt.Fprintf(o.Progress, "bench:   %.0f chunks/s, %.2f CPU s per 1M chunks, %.1f KiB per stream, timing error %s, %d errors, machine %.0f%% busy\n",
			m.ChunksPerSecond(), m.CPUPerMillionChunks(), m.RSSPerStream()/1024, quants(m.Client.TimingError), m.Client.Errors, m.BusyPercent)
		if kind == KindK6 && lv.procs > 1 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("k6 at %d streams: one process, as k6 runs a test, past the %d streams one process holds here: %d of %d requests failed", n, lv.per, m.Client.Errors, m.Client.Requests))
		}
		rep.Wide = append(rep.Wide, m)
		if kind != KindK6 { // k6 reports no held window
			if p := heldProblem(n, kind, m.Client.Held, w); p != "" {
				rep.Problems = append(rep.Problems, p+of)
			}
		}
		if m.Client.FirstError != "" {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d streams, %s%s: %s", n, kind, of, m.Client.FirstError))
		}
		time.Sleep(2 * time.Second) // the closed connections' sockets leave TIME_WAIT's way
	}
}

// heldProblem says why a level's held window is not n streams all open
// and streaming, or "": no window, streams still opening as it began, or
// fewer chunks in it than n streams send at w.Interval (1% short).
func heldProblem(n int, kind string, h *Held, w WideOptions) string {
	if h == nil {
		return fmt.Sprintf("%d streams, %s: no held window (the load ended before the window after %s did)", n, kind, w.Settle)
	}
	if h.OpenAtStart < int64(n) {
		return fmt.Sprintf("%d streams, %s: %d of %d streams open %s in, as the held window began: it counts openings too", n, kind, h.OpenAtStart, n, w.Settle)
	}
	if want := float64(n) * h.Seconds / w.Interval.Seconds(); w.Interval > 0 && float64(h.Chunks) < 0.99*want {
		return fmt.Sprintf("%d streams, %s: %d chunks in the held window of %.1f s, where %d streams %s apart send %.0f: not all of them were streaming",
			n, kind, h.Chunks, h.Seconds, n, w.Interval, want)
	}
	return ""
}

// simCPU is the CPU time the simulators have spent so far.
func simCPU(sims []*simulator) time.Duration {
	var sum time.Duration
	for _, s := range sims {
		d, _ := cpuOf(s.cmd.Process.Pid)
		sum += d
	}
	return sum
}
