package report

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct{ max, step, top float64 }{
		{2575, 1000, 3000}, {858, 250, 1000}, {100, 25, 100}, {0.7, 0.2, 0.8}, {12, 5, 15}, {0, 1, 1},
	} {
		if step, top := niceTicks(c.max, 4); step != c.step || top != c.top {
			t.Errorf("niceTicks(%g) = %g, %g; want %g, %g", c.max, step, top, c.step, c.top)
		}
	}
}

// Runs that came close together in time are placed by time, and their
// labels are not drawn on top of each other: a label is left out where
// it would touch the one before.
func TestTimeLabelsDoNotOverlap(t *testing.T) {
	base := time.Date(2026, 11, 25, 10, 0, 0, 0, time.Local)
	var runs []stats.Summary
	var ids []string
	for i, at := range []time.Duration{0, 2 * time.Second, 4 * time.Second, 10 * time.Minute, 10*time.Minute + time.Second, 20 * time.Minute} {
		runs = append(runs, stats.Summary{Start: base.Add(at), Goodput: float64(i), RequestThroughput: float64(i)})
		ids = append(ids, "#"+strconv.Itoa(i))
	}
	svg := string(Trend("p", runs, ids)[0])
	var xs []float64
	for _, m := range regexp.MustCompile(`class="tick x" x="([0-9.]+)"`).FindAllStringSubmatch(svg, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		xs = append(xs, v)
	}
	if len(xs) < 3 || len(xs) == len(runs) {
		t.Fatalf("%d labels of %d runs: want the crowded ones left out, the others drawn", len(xs), len(runs))
	}
	for i := 1; i < len(xs); i++ {
		if xs[i]-xs[i-1] < labelWidth("10:00:00") {
			t.Errorf("labels at x %v overlap", xs)
		}
	}
}

// Runs of one report drawn together are points, not a line through
// levels nothing was measured at.
func TestAcrossDrawsPointsOfSeparateRuns(t *testing.T) {
	runs := []stats.Summary{{Level: 1, TTFT: stats.Dist{Count: 5, P50: 200}}, {Level: 32, TTFT: stats.Dist{Count: 5, P50: 40000}}}
	charts := Across(runs, []string{"concurrency", "concurrency"})
	if len(charts) != 3 {
		t.Fatalf("%d charts", len(charts))
	}
	for _, c := range charts {
		if strings.Contains(string(c), "<polyline") || !strings.Contains(string(c), `class="series dots"`) {
			t.Errorf("a chart of separate runs joins them:\n%s", c)
		}
	}
}

// Medians interpolated in the server's buckets can add up to more than
// the client's: the split then says the rest is not measurable, never a
// negative share.
func TestSplitNeverShowsANegativeShare(t *testing.T) {
	prefill := 30.0
	got := splitText(stats.Split{TTFT: 100, Queue: 151, Prefill: &prefill, Elsewhere: -81})
	if strings.Contains(got, "-81") || !strings.Contains(got, "elsewhere not measurable") {
		t.Errorf("split %q", got)
	}
	if got := splitText(stats.Split{TTFT: 100, Queue: 50, Elsewhere: 50}); !strings.Contains(got, "50 ms elsewhere") {
		t.Errorf("split %q", got)
	}
}

// No label runs past the chart's right edge: a cliff marked at the last
// level reads leftwards from its line (it was cut to "TT"), and the last
// x label (a time on the status page's trend) ends at the edge.
func TestLabelsStayInsideTheChart(t *testing.T) {
	const width = 600.0
	c := Chart{Title: "TTFT", X: []string{"1", "2", "4", "8", "16", "2026-11-27 03:50:41"},
		Series: []Series{{Name: "p50", Values: []float64{1, 1, 2, 4, 8, 16}}},
		Marks:  []Mark{{At: 5, Kind: "cliff", Label: "TTFT cliff: concurrency 16", Color: "#cf222e"}}}
	svg := string(c.SVG())
	texts := regexp.MustCompile(`<text class="(?:tick x|mark-label cliff)" x="([0-9.]+)"([^>]*)>([^<]*)</text>`).FindAllStringSubmatch(svg, -1)
	if len(texts) < 2 {
		t.Fatalf("labels not found:\n%s", svg)
	}
	anchorOf := regexp.MustCompile(`text-anchor="(\w+)"`)
	for _, m := range texts {
		x, _ := strconv.ParseFloat(m[1], 64)
		wd := labelWidth(m[3])
		anchor := ""
		if a := anchorOf.FindStringSubmatch(m[2]); a != nil {
			anchor = a[1]
		}
		var right float64
		switch anchor {
		case "end":
			right = x
		case "middle":
			right = x + wd/2
		default:
			right = x + wd
		}
		if right > width {
			t.Errorf("%q ends at %.0f, past the chart's %g", m[3], right, width)
		}
	}
}
