package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/browsertest"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// wideSweep is a sweep with the widest figures the suite's runs reach:
// the seeds' five-digit TTFTs (41,660 ms at 50 users), a level count of
// two digits, a queue so long that prefill and the rest are a sliver of
// the TTFT bar, under a 500 ms SLO.
func wideSweep() stats.Summary {
	levels := []float64{1, 2, 4, 8, 16, 32, 50, 64}
	s := stats.Summary{Profile: "staircase", Endpoint: "ollama", Model: "llama3.2:3b-instruct-q4_K_M", Objective: 0.9, LevelName: "concurrency",
		SLOThresholds: map[string]float64{"ttft": 500, "itl": 50}, Requests: 4000, Success: 3990, Errors: 10, Attainment: 0.21,
		TTFT: stats.Dist{Count: 3990, Min: 180, P50: 21_000, P90: 41_000, P95: 45_678, P99: 47_890, Max: 49_999},
		Knee: &stats.Knee{CapacityAtSLO: 2, CliffLevel: 4}}
	for i, l := range levels {
		ttft := 223 * float64(1+i*i*i)
		s.Stages = append(s.Stages, stats.Summary{Level: l, Requests: 500, Success: 499, Attainment: 1 / float64(1+i),
			Goodput: 0.91 / float64(1+i*i), RequestThroughput: 0.91 + float64(i)/10,
			TTFT: stats.Dist{Count: 499, Min: ttft / 2, P50: ttft, P75: ttft * 1.1, P90: ttft * 1.15, P95: ttft * 1.2, P99: ttft * 1.3, Max: ttft * 1.4},
			ITL:  stats.Dist{Count: 499, Min: 9.1, P50: 10.2, P75: 10.4, P90: 10.6, P95: 10.9, P99: 12.3, Max: 14.5}})
	}
	prefill := 12.0
	s.Server = &stats.Server{Breakdown: &stats.Breakdown{Mean: stats.Split{TTFT: 41_660, Queue: 41_640, Prefill: &prefill, Elsewhere: 8},
		Dominant: "queue", Verdict: "TTFT mean 41.7 s, mostly the server's queue"}}
	return s
}

// The one-shot report's charts and its TTFT bar, laid out by a real
// browser with the widest figures the suite's runs reach, have no label
// on another, past its chart's edge or cut by its box. Five-digit y
// ticks ran under the y axis's title, and the bar's short parts read
// "pr" and "elsew".
func TestReportLabelsNeitherOverlapNorClip(t *testing.T) {
	browser := browsertest.Chromium(t)
	var page bytes.Buffer
	if err := HTML(&page, "staircase", []stats.Summary{wideSweep()}, []string{"concurrency"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{1280, 800} {
		if probs := browsertest.LabelProblems(t, browser, page.String(), width); len(probs) > 0 {
			t.Errorf("at %d px:\n%s", width, strings.Join(probs, "\n"))
		}
	}
}

// A search's pooled attainment under its objective is not drawn as a
// pass: the report drew 74% in green beside a 90% objective, the search
// having found a capacity. Nor is any attainment under its objective.
func TestAttainmentUnderItsObjectiveIsNoPass(t *testing.T) {
	search := wideSweep()
	search.Knee, search.Attainment, search.Passed = nil, 0.74, true
	search.Search = &stats.Search{Capacity: 8, Done: true}
	var page bytes.Buffer
	if err := HTML(&page, "search", []stats.Summary{search}, []string{"concurrency"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<b class="pooled">74.0%</b>`) {
		t.Errorf("the search's pooled 74%% beside a 90%% objective is not drawn plain:\n%.3000s", page.String())
	}
	for _, c := range []struct {
		s    stats.Summary
		want string
	}{
		{stats.Summary{Objective: 0.9, Attainment: 0.95, Passed: true}, "passed"},
		{stats.Summary{Objective: 0.9, Attainment: 0.89, Passed: true}, "failed"},
		{stats.Summary{Objective: 0.9, Attainment: 0.89, Undecided: true}, "undecided"},
		{stats.Summary{Attainment: 0.5, Passed: true}, "passed"},
	} {
		if got := AttainmentClass(c.s); got != c.want {
			t.Errorf("attainment %.2f of objective %.2f (passed %v): %q, want %q", c.s.Attainment, c.s.Objective, c.s.Passed, got, c.want)
		}
	}
}
