package compare

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/browsertest"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// The compare report's charts, laid out by a real browser with the widest
// figures the suite's runs reach (five-digit TTFTs under a 500 ms SLO),
// have no label on another, past its chart's edge or cut by its box.
func TestCompareReportLabelsNeitherOverlapNorClip(t *testing.T) {
	browser := browsertest.Chromium(t)
	run := func(scale float64) *Run {
		d := func(p50 float64) stats.Dist {
			return stats.Dist{Count: 999, Min: p50 / 40, P50: p50, P75: p50 * 1.1, P90: p50 * 1.2, P95: p50 * 1.25, P99: p50 * 1.3, Max: p50 * 1.4}
		}
		return &Run{Summary: stats.Summary{Profile: "overload", Endpoint: "ollama", Requests: 1000, Success: 999, Objective: 0.9,
			SLOThresholds: map[string]float64{"ttft": 500, "itl": 50, "request_latency": 60_000},
			TTFT:          d(41_660 * scale), ITL: d(10.2 * scale), E2E: d(52_345 * scale)}}
	}
	base, next := run(1), run(1.2)
	pairs := []Pair{{Key: base.Key(), Base: base, New: next, Rows: Compare(base, next, Options{Resamples: 200})}}
	var page bytes.Buffer
	if err := HTML(&page, pairs, Gate{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<svg") {
		t.Fatal("the compare report has no chart")
	}
	for _, width := range []int{1280, 800} {
		if probs := browsertest.LabelProblems(t, browser, page.String(), width); len(probs) > 0 {
			t.Errorf("at %d px:\n%s", width, strings.Join(probs, "\n"))
		}
	}
}
