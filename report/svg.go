package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Series is one line of a chart.
type Series struct {
	Name   string
	Color  string
	Values []float64 // one per x position; NaN leaves a gap
}

// LineChart draws series over categorical x labels as an inline SVG, so a
// report needs no script and no network to show its pictures.
func LineChart(title, unit string, xs []string, series []Series, marks map[int]string) template.HTML {
	const w, h, left, right, top, bottom = 560.0, 260.0, 56.0, 16.0, 28.0, 40.0
	maxY := 0.0
	for _, s := range series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				maxY = math.Max(maxY, v)
			}
		}
	}
	if maxY == 0 {
		maxY = 1
	}
	maxY *= 1.1
	x := func(i int) float64 {
		if len(xs) == 1 {
			return left + (w-left-right)/2
		}
		return left + float64(i)*(w-left-right)/float64(len(xs)-1)
	}
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/maxY) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, w, h, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="16" font-size="13" font-weight="600">%s</text>`, left, template.HTMLEscapeString(title))
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/><text x="%g" y="%.1f" font-size="10" text-anchor="end">%s</text>`,
			left, w-right, y(v), y(v), left-4, y(v)+3, short(v)+unit)
	}
	for i, l := range xs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" font-size="10" text-anchor="middle">%s</text>`, x(i), h-bottom+14, template.HTMLEscapeString(l))
		if m, ok := marks[i]; ok {
			fmt.Fprintf(&b, `<line class="mark" x1="%.1f" x2="%.1f" y1="%g" y2="%g" stroke="#cf222e" stroke-dasharray="4 3"/><text x="%.1f" y="%g" font-size="10" fill="#cf222e" text-anchor="middle">%s</text>`,
				x(i), x(i), top, h-bottom, x(i), h-bottom+28, template.HTMLEscapeString(m))
		}
	}
	for si, s := range series {
		var pts []string
		for i, v := range s.Values {
			if !math.IsNaN(v) {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			}
		}
		fmt.Fprintf(&b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, template.HTMLEscapeString(s.Name), s.Color, strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="2.5" fill="%s"/>`, xy[0], xy[1], s.Color)
		}
		fmt.Fprintf(&b, `<rect x="%g" y="%d" width="10" height="3" fill="%s"/><text x="%g" y="%d" font-size="10">%s</text>`,
			w-right-150, 30+si*13, s.Color, w-right-136, 34+si*13, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func short(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
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
	marks := map[int]string{}
	if k := s.Knee; k != nil {
		for i, st := range s.Stages {
			var names []string
			if st.Level == k.CapacityAtSLO {
				names = append(names, "capacity at SLO")
			}
			if st.Level == k.CliffLevel {
				names = append(names, "TTFT cliff")
			}
			if len(names) > 0 {
				marks[i] = strings.Join(names, " · ")
			}
		}
	}
	return []template.HTML{
		LineChart("TTFT against "+levelName, " ms", xs, []Series{{"TTFT p50", "#0969da", ttft50}, {"TTFT p95", "#cf222e", ttft95}}, marks),
		LineChart("ITL against "+levelName, " ms", xs, []Series{{"ITL p50", "#1a7f37", itl50}, {"ITL p95", "#9a6700", itl95}}, marks),
		LineChart("Goodput and throughput against "+levelName, "/s", xs, []Series{{"throughput", "#57606a", thr}, {"goodput", "#8250df", good}}, marks),
	}
}

// Ladders draws a run's latency distributions as percentile ladders.
func Ladders(s *stats.Summary) []template.HTML {
	xs := []string{"min", "p50", "p75", "p90", "p95", "p99", "max"}
	ladder := func(d stats.Dist) []float64 {
		if d.Count == 0 {
			return nil
		}
		return []float64{d.Min, d.P50, d.P75, d.P90, d.P95, d.P99, d.Max}
	}
	var out []template.HTML
	for _, c := range []struct {
		name, color string
		d           stats.Dist
	}{{"Time to first token", "#cf222e", s.TTFT}, {"Inter-token latency", "#1a7f37", s.ITL}, {"Request latency", "#0969da", s.E2E}} {
		if v := ladder(c.d); v != nil {
			out = append(out, LineChart(c.name+" distribution", " ms", xs, []Series{{c.name, c.color, v}}, nil))
		}
	}
	return out
}

// Trend draws a profile's recent runs: TTFT p95 and ITL p50 (ms), and
// goodput and throughput (per second), oldest first.
func Trend(profile string, runs []stats.Summary, ids []string) []template.HTML {
	var ttft, itl, good, thr []float64
	for _, r := range runs {
		ttft, itl = append(ttft, at(r.TTFT, r.TTFT.P95)), append(itl, at(r.ITL, r.ITL.P50))
		good, thr = append(good, r.Goodput), append(thr, r.RequestThroughput)
	}
	var out []template.HTML
	if !allNaN(ttft) || !allNaN(itl) {
		out = append(out, LineChart(profile+": latency of recent runs", " ms", ids, []Series{{"TTFT p95", "#cf222e", ttft}, {"ITL p50", "#1a7f37", itl}}, nil))
	}
	return append(out, LineChart(profile+": goodput of recent runs", "/s", ids, []Series{{"throughput", "#57606a", thr}, {"goodput", "#8250df", good}}, nil))
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
