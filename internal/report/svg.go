package report

import (
	"cmp"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Series is one line of a chart.
type Series struct {
	Name   string
	Color  string
	Values []float64 // one per x position; NaN leaves a gap
	// Dots draws the points unjoined: points of separate runs, with no
	// measurement between them for a line to suggest.
	Dots bool
}

// Chart is a line chart drawn as an inline SVG, so a report needs no
// script and no network to show its pictures. Every chart names its axes
// and its lines; an SLO threshold is a labelled horizontal line, and
// capacity at SLO and the TTFT cliff are vertical markers of their own.
type Chart struct {
	Title string
	// XTitle and YTitle name the axes; Unit follows each y tick.
	XTitle, YTitle, Unit string
	// X are the x labels, evenly spaced; with At, the points are placed
	// by time instead (a trend of runs that did not come evenly).
	X  []string
	At []time.Time
	// Series are the lines, one value per x.
	Series []Series
	// Threshold, when Label is set, is drawn as a horizontal line at Value.
	Threshold Threshold
	Marks     []Mark
}

// Threshold is an SLO's limit on the chart's quantity.
type Threshold struct {
	Value float64
	Label string
}

// Mark is a vertical marker at an x position: capacity at SLO, the cliff.
type Mark struct {
	At    int
	Kind  string // a class: "capacity", "cliff"
	Label string
	Color string
}

// LineChart is a chart of series over x labels, for callers that need no
// more than that.
func LineChart(title, unit string, xs []string, series []Series, marks map[int]string) template.HTML {
	c := Chart{Title: title, Unit: unit, X: xs, Series: series}
	for i, m := range marks {
		c.Marks = append(c.Marks, Mark{At: i, Kind: "mark", Label: m, Color: "#cf222e"})
	}
	return c.SVG()
}

// SVG draws the chart.
func (c Chart) SVG() template.HTML {
	const w, h, right, top, bottom = 600.0, 300.0, 16.0, 44.0, 58.0
	maxY := 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				maxY = math.Max(maxY, v)
			}
		}
	}
	if c.Threshold.Label != "" {
		maxY = math.Max(maxY, c.Threshold.Value)
	}
	if maxY == 0 {
		maxY = 1
	}
	stepY, maxY := niceTicks(maxY*1.05, 4)
	left := yTicksLeft(stepY, maxY, c.Unit)
	n := len(c.X)
	x := func(i int) float64 {
		if n == 1 {
			return left + (w-left-right)/2
		}
		if len(c.At) == n && c.At[n-1].After(c.At[0]) {
			f := c.At[i].Sub(c.At[0]).Seconds() / c.At[n-1].Sub(c.At[0]).Seconds()
			return left + f*(w-left-right)
		}
		return left + float64(i)*(w-left-right)/float64(n-1)
	}
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/maxY) }
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, esc(c.Title))
	fmt.Fprintf(&b, `<text class="title" x="%g" y="17" font-size="13" font-weight="600">%s</text>`, left, esc(c.Title))
	for v := 0.0; v <= maxY+stepY/2; v += stepY {
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/><text class="tick y" x="%g" y="%.1f" font-size="10" text-anchor="end">%s</text>`,
			left, w-right, y(v), y(v), left-4, y(v)+3, short(v)+c.Unit)
	}
	// Label the x positions that fit beside the one labelled before:
	// runs placed by time may crowd together.
	lastRight := math.Inf(-1)
	for i, l := range c.X {
		half := labelWidth(l) / 2
		if x(i)-half < lastRight+6 {
			continue
		}
		// A label that would run past the chart's edge (a time on the
		// status page's trend, at the last run) ends at the edge instead.
		at, anchor := x(i), "middle"
		switch {
		case at+half > w-1:
			at, anchor = w-1, "end"
		case at-half < 1:
			at, anchor = 1, "start"
		}
		fmt.Fprintf(&b, `<text class="tick x" x="%.1f" y="%g" font-size="10" text-anchor="%s">%s</text>`, at, h-bottom+14, anchor, esc(l))
		lastRight = x(i) + half
	}
	if c.XTitle != "" {
		fmt.Fprintf(&b, `<text class="axis-title x" x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>`, left+(w-left-right)/2, h-bottom+30, esc(c.XTitle))
	}
	if c.YTitle != "" {
		fmt.Fprintf(&b, `<text class="axis-title y" transform="translate(13 %g) rotate(-90)" font-size="11" text-anchor="middle">%s</text>`, top+(h-top-bottom)/2, esc(c.YTitle))
	}
	if t := c.Threshold; t.Label != "" {
		fmt.Fprintf(&b, `<line class="slo" x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#bf8700" stroke-width="1.5" stroke-dasharray="6 4"/><text class="slo-label" x="%g" y="%.1f" font-size="10" fill="#9a6700">%s</text>`,
			left, w-right, y(t.Value), y(t.Value), left+4, y(t.Value)-4, esc(t.Label))
	}
	for mi, m := range c.Marks {
		if m.At < 0 || m.At >= n {
			continue
		}
		// Two marks at one level are set side by side, never on top of each other.
		dx := float64(mi%2) * 3
		// The label reads rightwards from its line, or leftwards where
		// it would run past the chart's edge (a cliff at the last level
		// was cut to "TT").
		lx, anchor := x(m.At)+dx+3, "start"
		if lx+labelWidth(m.Label) > w-1 {
			lx, anchor = x(m.At)+dx-3, "end"
		}
		fmt.Fprintf(&b, `<line class="mark %s" x1="%.1f" x2="%.1f" y1="%g" y2="%g" stroke="%s" stroke-width="1.5" stroke-dasharray="4 3"/><text class="mark-label %s" x="%.1f" y="%g" font-size="10" fill="%s" text-anchor="%s">%s</text>`,
			m.Kind, x(m.At)+dx, x(m.At)+dx, top, h-bottom, m.Color, m.Kind, lx, top+10+float64(mi)*12, m.Color, anchor, esc(m.Label))
	}
	var legend []Series
	for _, s := range c.Series {
		var pts []string
		for i, v := range s.Values {
			if !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			}
		}
		radius := 2.5
		if s.Dots {
			radius = 3.5
			fmt.Fprintf(&b, `<g class="series dots" data-name="%s">`, esc(s.Name))
		} else {
			fmt.Fprintf(&b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, esc(s.Name), s.Color, strings.Join(pts, " "))
		}
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%g" fill="%s"/>`, xy[0], xy[1], radius, s.Color)
		}
		if s.Dots {
			b.WriteString(`</g>`)
		}
		legend = append(legend, s)
	}
	// The legend is a row under the title, clear of the lines.
	lx := left
	for _, s := range legend {
		fmt.Fprintf(&b, `<g class="legend"><rect x="%g" y="27" width="10" height="3" fill="%s"/><text x="%g" y="31" font-size="10">%s</text></g>`,
			lx, s.Color, lx+14, esc(s.Name))
		lx += 24 + 5.6*float64(len([]rune(s.Name)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped above
}

// niceTicks is a step of 1, 2, 2.5 or 5 times a power of ten giving
// about n ticks from 0 up to highest, and the last tick, at or above it:
// axes read 0, 500, 1000 ms, not 0, 858, 1716.
func niceTicks(highest float64, n int) (step, top float64) {
	if highest <= 0 || math.IsNaN(highest) || math.IsInf(highest, 0) {
		return 1, 1
	}
	raw := highest / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * pow
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	return step, math.Ceil(highest/step-1e-9) * step
}

// yTicksLeft is the plot's left edge: far enough right that the widest
// y tick ("75000 ms") ends clear of the rotated y axis title, whose line
// is 11 pixels high around x 13.
func yTicksLeft(step, top float64, unit string) float64 {
	widest := 0.0
	for v := 0.0; v <= top+step/2; v += step {
		widest = max(widest, labelWidth(short(v)+unit))
	}
	return max(64, 4+widest+24)
}

// labelWidth is about how wide a 10-pixel label is drawn.
func labelWidth(s string) float64 { return 5.6 * float64(len([]rune(s))) }

func short(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// sloLine is the chart threshold of SLO kind in s, if the profile sets one.
func sloLine(s *stats.Summary, kind, what string) Threshold {
	v, ok := s.SLOThresholds[kind]
	if !ok {
		return Threshold{}
	}
	return Threshold{Value: v, Label: fmt.Sprintf("SLO: %s %s", what, stats.FormatMillis(v))}
}

// kneeMarks are the capacity at SLO and the TTFT cliff of s, each a
// marker of its own, at the stages' positions.
func kneeMarks(s *stats.Summary, levelName string) []Mark {
	k := s.Knee
	if k == nil {
		return nil
	}
	var out []Mark
	for i, st := range s.Stages {
		if k.CapacityAtSLO > 0 && st.Level == k.CapacityAtSLO {
			out = append(out, Mark{At: i, Kind: "capacity", Label: fmt.Sprintf("capacity at SLO: %s %g", levelName, st.Level), Color: "#1a7f37"})
		}
		if k.CliffLevel > 0 && st.Level == k.CliffLevel {
			out = append(out, Mark{At: i, Kind: "cliff", Label: fmt.Sprintf("TTFT cliff: %s %g", levelName, st.Level), Color: "#cf222e"})
		}
	}
	return out
}

// CliffCharts draws latency and goodput against the load level of a
// multi-stage run: where TTFT leaves the floor while ITL stays, and where
// goodput parts from throughput.
func CliffCharts(s *stats.Summary, levelName string) []template.HTML {
	if len(s.Stages) < 2 {
		return nil
	}
	var xs []string
	var ttft50, ttft95, itl50, itl95, good, thr []float64
	for _, st := range s.Stages {
		xs = append(xs, fmt.Sprintf("%g", st.Level))
		ttft50, ttft95 = append(ttft50, at(st.TTFT, st.TTFT.P50)), append(ttft95, at(st.TTFT, st.TTFT.P95))
		itl50, itl95 = append(itl50, at(st.ITL, st.ITL.P50)), append(itl95, at(st.ITL, st.ITL.P95))
		good, thr = append(good, st.Goodput), append(thr, st.RequestThroughput)
	}
	marks := kneeMarks(s, levelName)
	return []template.HTML{
		Chart{Title: "TTFT against " + levelName, XTitle: levelName, YTitle: "time to first token (ms)", Unit: " ms", X: xs,
			Series: []Series{{Name: "TTFT p50", Color: "#0969da", Values: ttft50}, {Name: "TTFT p95", Color: "#cf222e", Values: ttft95}}, Threshold: sloLine(s, "ttft", "TTFT"), Marks: marks}.SVG(),
		Chart{Title: "ITL against " + levelName, XTitle: levelName, YTitle: "inter-token latency (ms)", Unit: " ms", X: xs,
			Series: []Series{{Name: "ITL p50", Color: "#1a7f37", Values: itl50}, {Name: "ITL p95", Color: "#9a6700", Values: itl95}}, Threshold: sloLine(s, "itl", "ITL"), Marks: marks}.SVG(),
		Chart{Title: "Goodput and throughput against " + levelName, XTitle: levelName, YTitle: "requests per second", Unit: "/s", X: xs,
			Series: []Series{{Name: "throughput (successes)", Color: "#57606a", Values: thr}, {Name: "goodput (met every SLO)", Color: "#8250df", Values: good}}, Marks: marks}.SVG(),
	}
}

// Dist is one distribution of a CDF chart.
type Dist struct {
	Name, Color string
	D           stats.Dist
}

// CDF draws distributions on a value axis: for each value, the share of
// requests at or under it, through the distribution's percentiles (min,
// p50, p75, p90, p95, p99, max) joined by straight lines, so that a long
// tail is as long on the page as it was. A threshold is a vertical line
// at its value. A distribution without values is left out.
func CDF(title, xTitle string, dists []Dist, t Threshold) template.HTML {
	const w, h, left, right, top, bottom = 600.0, 300.0, 64.0, 16.0, 44.0, 58.0
	shares := []float64{0, 50, 75, 90, 95, 99, 100}
	maxX := 0.0
	var drawn []Dist
	for _, d := range dists {
		if d.D.Count > 0 {
			drawn = append(drawn, d)
			maxX = math.Max(maxX, d.D.Max)
		}
	}
	if t.Label != "" {
		maxX = math.Max(maxX, t.Value)
	}
	stepX, maxX := niceTicks(maxX, 5)
	x := func(v float64) float64 { return left + (w-left-right)*v/maxX }
	y := func(pct float64) float64 { return top + (h-top-bottom)*(1-pct/100) }
	esc := template.HTMLEscapeString
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart cdf" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, esc(title))
	fmt.Fprintf(&b, `<text class="title" x="%g" y="17" font-size="13" font-weight="600">%s</text>`, left, esc(title))
	for pct := 0.0; pct <= 100; pct += 25 {
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/><text class="tick y" x="%g" y="%.1f" font-size="10" text-anchor="end">%g%%</text>`,
			left, w-right, y(pct), y(pct), left-4, y(pct)+3, pct)
	}
	for v := 0.0; v <= maxX+stepX/2; v += stepX {
		// A tick label that would run past the chart's right edge
		// ("100000" at the last tick) ends at the edge instead.
		at, anchor := x(v), "middle"
		if at+labelWidth(short(v))/2 > w-1 {
			at, anchor = w-1, "end"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%g" y2="%g" stroke="#f0f0f0"/><text class="tick x" x="%.1f" y="%g" font-size="10" text-anchor="%s">%s</text>`,
			x(v), x(v), top, h-bottom, at, h-bottom+14, anchor, short(v))
	}
	fmt.Fprintf(&b, `<text class="axis-title x" x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>`, left+(w-left-right)/2, h-bottom+30, esc(xTitle))
	fmt.Fprintf(&b, `<text class="axis-title y" transform="translate(13 %g) rotate(-90)" font-size="11" text-anchor="middle">share of requests at or under (%%)</text>`, top+(h-top-bottom)/2)
	if t.Label != "" {
		// The label reads leftwards from its line, or rightwards where it
		// would run into the y axis (an SLO near 0 of a long axis).
		lx, anchor := x(t.Value)-4, "end"
		if lx-labelWidth(t.Label) < left+2 {
			lx, anchor = x(t.Value)+4, "start"
		}
		fmt.Fprintf(&b, `<line class="slo" x1="%.1f" x2="%.1f" y1="%g" y2="%g" stroke="#bf8700" stroke-width="1.5" stroke-dasharray="6 4"/><text class="slo-label" x="%.1f" y="%g" font-size="10" fill="#9a6700" text-anchor="%s">%s</text>`,
			x(t.Value), x(t.Value), top, h-bottom, lx, h-bottom-6, anchor, esc(t.Label))
	}
	lx := left
	for _, d := range drawn {
		vals := []float64{d.D.Min, d.D.P50, d.D.P75, d.D.P90, d.D.P95, d.D.P99, d.D.Max}
		var pts []string
		for i, v := range vals {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(v), y(shares[i])))
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, esc(d.Name), d.Color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<g class="legend"><rect x="%g" y="27" width="10" height="3" fill="%s"/><text x="%g" y="31" font-size="10">%s</text></g>`,
			lx, d.Color, lx+14, esc(d.Name))
		lx += 24 + labelWidth(d.Name)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped above
}

// Distributions draws a run's TTFT, ITL and request latency each as a
// CDF on a value axis, with its SLO line.
func Distributions(s *stats.Summary) []template.HTML {
	var out []template.HTML
	for _, c := range []struct {
		name, kind, short, color string
		d                        stats.Dist
	}{{"Time to first token", "ttft", "TTFT", "#cf222e", s.TTFT}, {"Inter-token latency", "itl", "ITL", "#1a7f37", s.ITL},
		{"Request latency", "request_latency", "request latency", "#0969da", s.E2E}} {
		if c.d.Count > 0 {
			out = append(out, CDF(c.name+" distribution", strings.ToLower(c.name)+" (ms)",
				[]Dist{{Name: c.short + " of successful requests", Color: c.color, D: c.d}}, sloLine(s, c.kind, c.short)))
		}
	}
	return out
}

// Trend draws a profile's recent runs over time, oldest first: TTFT p95
// and ITL p50 each on a chart of its own (they differ by orders of
// magnitude), and goodput against throughput and attempts.
func Trend(profile string, runs []stats.Summary, ids []string) []template.HTML {
	var ttft, itl, good, thr, tried []float64
	var when []time.Time
	xs := make([]string, len(runs))
	timed := true
	for i, r := range runs {
		ttft, itl = append(ttft, at(r.TTFT, r.TTFT.P95)), append(itl, at(r.ITL, r.ITL.P50))
		good, thr = append(good, r.Goodput), append(thr, r.RequestThroughput)
		attempted := 0.0
		if r.DurationSeconds > 0 {
			attempted = float64(r.Success+r.Errors+r.WrongAnswers) / r.DurationSeconds
		}
		tried = append(tried, attempted)
		when = append(when, r.Start)
		timed = timed && !r.Start.IsZero()
		xs[i] = ids[i]
		if !r.Start.IsZero() {
			xs[i] = r.Start.Local().Format("15:04:05")
		}
	}
	if !timed {
		when = nil
	}
	xTitle := "run start (local time)"
	if !timed {
		xTitle = "run"
	}
	var out []template.HTML
	last := &runs[len(runs)-1]
	if !allNaN(ttft) {
		out = append(out, Chart{Title: profile + ": TTFT p95 of recent runs", XTitle: xTitle, YTitle: "TTFT p95 (ms)", Unit: " ms", X: xs, At: when,
			Series: []Series{{Name: "TTFT p95", Color: "#cf222e", Values: ttft}}, Threshold: sloLine(last, "ttft", "TTFT")}.SVG())
	}
	if !allNaN(itl) {
		out = append(out, Chart{Title: profile + ": ITL p50 of recent runs", XTitle: xTitle, YTitle: "ITL p50 (ms)", Unit: " ms", X: xs, At: when,
			Series: []Series{{Name: "ITL p50", Color: "#1a7f37", Values: itl}}, Threshold: sloLine(last, "itl", "ITL")}.SVG())
	}
	return append(out, Chart{Title: profile + ": goodput of recent runs", XTitle: xTitle, YTitle: "requests per second", Unit: "/s", X: xs, At: when,
		Series: []Series{{Name: "attempted (all but cancelled)", Color: "#9a6700", Values: tried}, {Name: "throughput (successes)", Color: "#57606a", Values: thr}, {Name: "goodput (met every SLO)", Color: "#8250df", Values: good}}}.SVG())
}

// at is a percentile v of d, or NaN (a gap, never a 0 ms point) when d
// has no values: a run without successes has no latency.
func at(d stats.Dist, v float64) float64 {
	if d.Count == 0 {
		return math.NaN()
	}
	return v
}

func allNaN(vs []float64) bool {
	for _, v := range vs {
		if !math.IsNaN(v) {
			return false
		}
	}
	return true
}

// Across draws the runs of one report together against their load level,
// when there are several: each run at its level (a staged run at each of
// its stages), so that a baseline at concurrency 1 and an overload at 32
// become one picture of the cliff. The points are not joined: nothing
// was measured between two runs' levels. Runs whose levels count different
// things (concurrency, rate) are drawn on no common axis: nil.
func Across(runs []stats.Summary, levelNames []string) []template.HTML {
	if len(runs) < 2 {
		return nil
	}
	type point struct {
		level                float64
		ttft, itl, good, thr float64
	}
	var pts []point
	for i, r := range runs {
		if levelNames[i] != levelNames[0] {
			return nil
		}
		levels := r.Stages
		if len(levels) == 0 {
			levels = []stats.Summary{r}
		}
		for _, st := range levels {
			pts = append(pts, point{level: st.Level, ttft: at(st.TTFT, st.TTFT.P50), itl: at(st.ITL, st.ITL.P50), good: st.Goodput, thr: st.RequestThroughput})
		}
	}
	slices.SortStableFunc(pts, func(a, b point) int { return cmp.Compare(a.level, b.level) })
	var xs []string
	var ttft, itl, good, thr []float64
	for _, p := range pts {
		xs = append(xs, fmt.Sprintf("%g", p.level))
		ttft, itl, good, thr = append(ttft, p.ttft), append(itl, p.itl), append(good, p.good), append(thr, p.thr)
	}
	ln := levelNames[0]
	first := &runs[0]
	return []template.HTML{
		Chart{Title: "TTFT of every run, against " + ln, XTitle: ln, YTitle: "TTFT p50 (ms)", Unit: " ms", X: xs,
			Series: []Series{{Name: "TTFT p50", Color: "#cf222e", Values: ttft, Dots: true}}, Threshold: sloLine(first, "ttft", "TTFT")}.SVG(),
		Chart{Title: "ITL of every run, against " + ln, XTitle: ln, YTitle: "ITL p50 (ms)", Unit: " ms", X: xs,
			Series: []Series{{Name: "ITL p50", Color: "#1a7f37", Values: itl, Dots: true}}, Threshold: sloLine(first, "itl", "ITL")}.SVG(),
		Chart{Title: "Goodput and throughput of every run, against " + ln, XTitle: ln, YTitle: "requests per second", Unit: "/s", X: xs,
			Series: []Series{{Name: "throughput (successes)", Color: "#57606a", Values: thr, Dots: true}, {Name: "goodput (met every SLO)", Color: "#8250df", Values: good, Dots: true}}}.SVG(),
	}
}
