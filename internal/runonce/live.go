package runonce

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// isTerminal reports whether w is a terminal (a character device): the
// live view redraws itself there, and writes plain lines elsewhere (a CI
// log, a file, a pipe).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// recent is how many of the latest requests the live latency figures are
// read over: the run as it is now, not its average since the start.
const recent = 512

// live keeps what the live view shows of the requests measured so far.
// It is a probe.Sink: Observe is a few appends under a lock, off the
// request's path.
type live struct {
	mu             sync.Mutex
	ttft, itl      []float64 // ring buffers of the latest values, in ms
	next           [2]int
	good, counted  int
	success        int
	reasons        map[string]int
	first, lastEnd time.Time
}

func newLive() *live { return &live{reasons: map[string]int{}} }

func (l *live) Observe(r *result.Request, v slo.Verdict) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.first.IsZero() || r.Start.Before(l.first) {
		l.first = r.Start
	}
	if r.End.After(l.lastEnd) {
		l.lastEnd = r.End
	}
	if v.Counted {
		l.counted++
		if v.Good {
			l.good++
		}
	}
	switch r.Outcome {
	case result.Error:
		l.reasons[r.Reason.String()]++
	case result.WrongAnswer:
		l.reasons["wrong_answer"]++
	case result.Success:
		l.success++
	}
	if r.Measured() {
		if r.HasTTFT() {
			l.push(0, &l.ttft, float64(r.TTFT)/1e6)
		}
		if itl, ok := r.ITL(); ok {
			l.push(1, &l.itl, float64(itl)/1e6)
		}
	}
}

func (l *live) push(i int, ring *[]float64, v float64) {
	if len(*ring) < recent {
		*ring = append(*ring, v)
		return
	}
	(*ring)[l.next[i]] = v
	l.next[i] = (l.next[i] + 1) % recent
}

// snapshot is what one frame shows.
type snapshot struct {
	ttftP50, ttftP95, itlP50 float64
	haveTTFT, haveITL        bool
	goodput, throughput      float64
	attainment               float64
	counted                  int
	reasons                  string
}

func (l *live) snapshot() snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s snapshot
	if len(l.ttft) > 0 {
		sorted := slices.Clone(l.ttft)
		sort.Float64s(sorted)
		s.ttftP50, s.ttftP95, s.haveTTFT = stats.Percentile(sorted, 50), stats.Percentile(sorted, 95), true
	}
	if len(l.itl) > 0 {
		sorted := slices.Clone(l.itl)
		sort.Float64s(sorted)
		s.itlP50, s.haveITL = stats.Percentile(sorted, 50), true
	}
	if d := l.lastEnd.Sub(l.first).Seconds(); d > 0 {
		s.goodput, s.throughput = float64(l.good)/d, float64(l.success)/d
	}
	if l.counted > 0 {
		s.attainment = float64(l.good) / float64(l.counted)
	}
	s.counted = l.counted
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l.reasons)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, l.reasons[k]))
	}
	s.reasons = strings.Join(parts, ", ")
	return s
}

// planned is how much of the run is planned: the requests of the stages
// that count them and the time of those that last a duration.
func planned(plan probe.Plan) (requests int, duration time.Duration) {
	if plan.Search != nil {
		return 0, 0 // a search decides its steps as it goes
	}
	for _, st := range plan.Stages {
		switch {
		case st.Requests > 0:
			requests += st.Requests
		case st.Duration > 0:
			duration += st.Duration
		}
	}
	return requests, duration
}

// frame is the live view's block of lines.
func frame(run *probe.Run, l *live) []string {
	p := run.Progress()
	phase := fmt.Sprintf("%s %g", p.Stage.LevelName(), p.Level)
	if n := len(run.Plan.Stages); n > 1 && run.Plan.Search == nil {
		phase += fmt.Sprintf(" (stage %d of %d)", p.StageIndex+1, n)
	}
	if run.Plan.Search != nil {
		phase += fmt.Sprintf(" (search step %d of at most %d)", p.StageIndex+1, len(run.Plan.Stages))
	}
	progress := fmt.Sprintf("%.1f s elapsed", p.Elapsed.Seconds())
	requests, duration := planned(run.Plan)
	frac := -1.0
	switch {
	case p.Warmup:
		phase = "warmup"
		progress = fmt.Sprintf("%.1f s of warmup, %d of %d requests", p.Elapsed.Seconds(), p.Done, run.Plan.Warmup)
		frac = float64(p.Done) / float64(run.Plan.Warmup)
	case requests > 0 && duration == 0:
		frac = float64(p.Done) / float64(requests)
	case duration > 0 && requests == 0:
		frac = p.Elapsed.Seconds() / duration.Seconds()
	}
	if frac >= 0 {
		frac = min(frac, 1)
		const width = 24
		bar := strings.Repeat("#", int(frac*width)) + strings.Repeat("-", width-int(frac*width))
		progress = fmt.Sprintf("[%s] %3.0f%% · %s", bar, 100*frac, progress)
		if frac > 0 && frac < 1 && p.Elapsed > 0 {
			eta := time.Duration(float64(p.Elapsed) * (1 - frac) / frac)
			progress += " · ETA " + eta.Round(time.Second).String()
		}
	}
	s := l.snapshot()
	errs := fmt.Sprintf("%d errors", p.Errors)
	if s.reasons != "" {
		errs += " (" + s.reasons + ")"
	}
	latency := "no success yet"
	if s.haveTTFT {
		latency = fmt.Sprintf("TTFT p50 %s p95 %s", stats.FormatMillis(s.ttftP50), stats.FormatMillis(s.ttftP95))
		if s.haveITL {
			latency += " · ITL p50 " + stats.FormatMillis(s.itlP50)
		}
		latency += fmt.Sprintf(" (latest %d requests)", min(recent, s.counted))
	}
	good := fmt.Sprintf("%.2f req/s of %.2f req/s", s.goodput, s.throughput)
	if s.counted > 0 {
		good += fmt.Sprintf(" · SLO attainment %.1f%%", 100*s.attainment)
	}
	return []string{
		fmt.Sprintf("  %s · %s", run.Profile, phase),
		"  progress   " + progress,
		fmt.Sprintf("  requests   %d done · %d in flight · %s", p.Done, p.InFlight, errs),
		"  latency    " + latency,
		"  goodput    " + good,
	}
}

// liveView redraws the frame in place every interval on a terminal, and
// once more when stopped, so that the last frame stays on the screen.
func liveView(w io.Writer, every time.Duration, run *probe.Run, l *live) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	drawn := 0
	draw := func() {
		var b strings.Builder
		if drawn > 0 {
			fmt.Fprintf(&b, "\x1b[%dA", drawn) // back to the frame's first line
		}
		lines := frame(run, l)
		for _, line := range lines {
			b.WriteString("\x1b[2K" + line + "\n") // clear the line, then write it
		}
		drawn = len(lines)
		_, _ = io.WriteString(w, b.String())
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			draw()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		draw()
	}
}
