package web

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/browsertest"
	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// A real browser loads the status page of a running daemon and finds the
// demo profile's last run and its goodput.
func TestStatusPageInABrowser(t *testing.T) {
	browser := browsertest.Chromium(t)
	f := newFixture(t, true)
	if code, _ := f.do(t, "POST", "/api/v1/runs?profile=demo"); code != 202 {
		t.Fatalf("run now: %d", code)
	}
	run := f.waitForRun(t, "demo")
	dom := browsertest.Render(t, browser, f.srv.URL+"/", "--dump-dom")
	row := regexp.MustCompile(`(?s)<tr class="job" data-profile="demo".*?</tr>`).FindString(dom)
	if row == "" {
		t.Fatalf("no row for the demo profile in the rendered page:\n%.2000s", dom)
	}
	if !strings.Contains(row, `href="/runs/1"`) || !strings.Contains(row, `class="passed"`) {
		t.Errorf("the demo row does not show its last run:\n%s", row)
	}
	goodput := regexp.MustCompile(`class="num goodput">([0-9.]+)/s<`).FindStringSubmatch(row)
	if goodput == nil || goodput[1] == "0.00" {
		t.Fatalf("no goodput in the demo row:\n%s", row)
	}
	t.Logf("browser shows run #%d with goodput %s/s (summary: %.2f/s)", run.ID, goodput[1], run.Summary.Goodput)

	// A second run: the page draws the profile's recent-run trends.
	if code, _ := f.do(t, "POST", "/api/v1/runs?profile=demo"); code != 202 {
		t.Fatalf("run now: %d", code)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if recent, _ := f.d.History().Runs(); len(recent) == 2 && recent[0].Result != "running" {
			break
		}
	}
	dom = browsertest.Render(t, browser, f.srv.URL+"/", "--dump-dom")
	trend := regexp.MustCompile(`(?s)<section class="charts-of" data-job="demo on sim">.*?</section>`).FindString(dom)
	// TTFT and ITL on charts of their own, goodput beside attempts and
	// throughput, over the runs' start times, axes titled; TTFT with the
	// profile's SLO line.
	if strings.Count(trend, "<svg") != 3 || strings.Count(trend, `class="series"`) != 5 {
		t.Fatalf("no trend charts for the demo profile:\n%.1500s", trend)
	}
	for _, want := range []string{`class="axis-title x"`, "run start (local time)", `class="axis-title y"`, "TTFT p95 (ms)", "SLO: TTFT 1.0 s"} {
		if !strings.Contains(trend, want) {
			t.Errorf("the trend charts lack %q", want)
		}
	}
	if !regexp.MustCompile(`>\d\d:\d\d:\d\d</text>`).MatchString(trend) {
		t.Error("the trend's x axis is not the runs' times")
	}
	// Attempted beside successful throughput, and the error rate.
	if !regexp.MustCompile(`class="num throughput">[0-9.]+/s \([0-9.]+/s\)<`).MatchString(row) || !strings.Contains(row, `class="num error-rate">0.0%<`) {
		t.Errorf("the demo row lacks attempted throughput or the error rate:\n%s", row)
	}
	// On a 1280-pixel-wide window every column of the table is in view,
	// the error rate and where TTFT went included.
	_, html := f.do(t, "GET", "/")
	html = strings.Replace(html, `<meta http-equiv="refresh" content="10">`, "", 1)
	html = strings.Replace(html, "</body>", `<script>
const right = Math.max(...[...document.querySelectorAll('#jobs th')].map(e => e.getBoundingClientRect().right));
document.body.setAttribute('data-table-right', Math.ceil(right));
</script></body>`, 1)
	page := filepath.Join(t.TempDir(), "status.html")
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	dom = browsertest.Render(t, browser, "file://"+page, "--window-size=1280,900", "--dump-dom")
	m := regexp.MustCompile(`data-table-right="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's width was not measured:\n%.500s", dom)
	}
	right, _ := strconv.Atoi(m[1])
	t.Logf("the profiles table ends at %d px", right)
	if right > 1280 {
		t.Errorf("the profiles table ends at %d px, past a 1280-pixel window", right)
	}
}

// A staged run's page, rendered by a real browser, draws its curves with
// the SLO line on the TTFT chart, titled axes, and capacity at SLO and
// the cliff as two markers of their own; so does the report of the run.
func TestStagedRunChartsInABrowser(t *testing.T) {
	browser := browsertest.Chromium(t)
	f := newFixtureWith(t, `
endpoints:
  - name: sim
    simulator: {slots: 2, prefill_base: 10ms, prefill_per_token: 1ns, decode_base: 10ms, seed: 1}
profiles:
  - name: staged
    load:
      sweep: {concurrency: [1, 2, 4, 8], requests: 40}
    workload: {input_tokens: {mean: 8}, output_tokens: {mean: 20}}
    slo: {ttft: 100ms, objective: 0.9}
    schedule: {manual: true}
`, true)
	if code, body := f.do(t, "POST", "/api/v1/runs?profile=staged"); code != 202 {
		t.Fatalf("run now: %d %s", code, body)
	}
	run := f.waitForRun(t, "staged")
	// Two slots: up to 2 in flight a request's TTFT is its 10 ms prefill,
	// a tenth of the SLO, so a busy machine's stalls stay inside it; at 4
	// half the requests wait a whole answer (20 tokens, 200 ms) first.
	k := run.Summary.Knee
	if k == nil || k.CapacityAtSLO != 2 || k.CliffLevel != 4 {
		t.Fatalf("knee %+v: want capacity 2 and the cliff at 4 (2 slots, a 100 ms TTFT SLO)", k)
	}
	check := func(where, dom string) {
		t.Helper()
		ttft := regexp.MustCompile(`(?s)<svg[^>]*aria-label="TTFT against [^"]*".*?</svg>`).FindString(dom)
		for _, want := range []string{`class="slo"`, "SLO: TTFT 100 ms", `class="axis-title x"`, `class="axis-title y"`, "time to first token (ms)",
			`class="mark capacity"`, "capacity at SLO: concurrency 2", `class="mark cliff"`, "TTFT cliff: concurrency 4", `class="legend"`,
			// The load axis named as the report names it, on both.
			`>concurrency</text>`} {
			if !strings.Contains(ttft, want) {
				t.Errorf("%s: the TTFT chart lacks %q:\n%.3000s", where, want, ttft)
			}
		}
		xs := regexp.MustCompile(`class="mark (capacity|cliff)" x1="([0-9.]+)"`).FindAllStringSubmatch(ttft, -1)
		if len(xs) != 2 || xs[0][2] == xs[1][2] {
			t.Errorf("%s: the capacity and cliff markers are not two lines apart: %v", where, xs)
		}
		roundTicks(t, where, ttft)
		// The TTFT distribution: a CDF on a value axis with the SLO at
		// its value, not a line over evenly spaced percentiles.
		cdf := regexp.MustCompile(`(?s)<svg class="chart cdf"[^>]*aria-label="Time to first token distribution".*?</svg>`).FindString(dom)
		for _, want := range []string{"time to first token (ms)", "share of requests at or under (%)", `class="slo"`, "SLO: TTFT 100 ms", ">100%<"} {
			if !strings.Contains(cdf, want) {
				t.Errorf("%s: the TTFT distribution lacks %q:\n%.2000s", where, want, cdf)
			}
		}
	}
	check("the run page", browsertest.Render(t, browser, fmt.Sprintf("%s/runs/%d", f.srv.URL, run.ID), "--dump-dom"))

	page := filepath.Join(t.TempDir(), "report.html")
	out, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.HTML(out, "staged", []stats.Summary{*run.Summary}, []string{"concurrency"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	out.Close()
	dom := browsertest.Render(t, browser, "file://"+page, "--dump-dom")
	check("the report", dom)
	if !strings.Contains(dom, "staged: concurrency 1 to 8 in 4 stages") || !strings.Contains(dom, "Every stage pooled") {
		t.Errorf("the report does not say the run is staged, or that its totals pool the stages")
	}
	// No label of the status page's and the run page's charts and bars
	// lies on another, past its chart or cut by its box
	// (report TestReportLabelsNeitherOverlapNorClip has the widest figures).
	for _, path := range []string{"/", fmt.Sprintf("/runs/%d", run.ID)} {
		_, html := f.do(t, "GET", path)
		if probs := browsertest.LabelProblems(t, browser, html, 1280); len(probs) > 0 {
			t.Errorf("%s:\n%s", path, strings.Join(probs, "\n"))
		}
	}
}

// roundTicks checks that a chart's y ticks go up in a round step (1, 2,
// 2.5 or 5 times a power of ten) from 0.
func roundTicks(t *testing.T, where, svg string) {
	t.Helper()
	var ticks []float64
	for _, m := range regexp.MustCompile(`class="tick y"[^>]*>([0-9.]+)`).FindAllStringSubmatch(svg, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		ticks = append(ticks, v)
	}
	if len(ticks) < 3 || ticks[0] != 0 {
		t.Errorf("%s: y ticks %v", where, ticks)
		return
	}
	step := ticks[1]
	mantissa := step / math.Pow(10, math.Floor(math.Log10(step)))
	if !slices.Contains([]float64{1, 2, 2.5, 5}, math.Round(mantissa*10)/10) {
		t.Errorf("%s: y ticks %v step by %g, not a round step", where, ticks, step)
	}
	for i := 1; i < len(ticks); i++ {
		if math.Abs(ticks[i]-ticks[i-1]-step) > step/1000 {
			t.Errorf("%s: y ticks %v are not evenly stepped", where, ticks)
		}
	}
}

// A run whose every request failed, rendered by a real browser: the page
// names the reason, the message and the hint, and shows no 0.0 ms latency
// nor a latency chart.
func TestFailedRunInABrowser(t *testing.T) {
	browser := browsertest.Chromium(t)
	f := newDownFixture(t, `
  - name: broken
    endpoints: [down]
    load: {concurrency: 2, requests: 6}
    workload: {output_tokens: {mean: 4}}
    schedule: {manual: true}
`)
	for range 2 { // two runs: the page would draw a trend of them
		if code, body := f.do(t, "POST", "/api/v1/runs?profile=broken"); code != 202 {
			t.Fatalf("run now: %d %s", code, body)
		}
		f.waitForRun(t, "broken")
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if st := f.d.Jobs()[0].State; !st.Running {
				break
			}
		}
	}
	dom := browsertest.Render(t, browser, f.srv.URL+"/", "--dump-dom")
	row := regexp.MustCompile(`(?s)<tr class="job" data-profile="broken".*?</tr>`).FindString(dom)
	if !strings.Contains(row, `class="error"`) || strings.Contains(row, "0.0 ms") || strings.Count(row, "n/a") != 4 {
		t.Errorf("the job's row shows latency for a run without successes, or no error:\n%s", row)
	}
	runs := regexp.MustCompile(`(?s)<table class="runs">.*?</table>`).FindString(dom)
	for _, want := range []string{"no request succeeded", "connect ×6", "connection refused", "nothing listens"} {
		if !strings.Contains(runs, want) {
			t.Errorf("the runs table does not say %q:\n%s", want, runs)
		}
	}
	if strings.Contains(dom, "TTFT p95 of recent runs") || strings.Contains(dom, "ITL p50 of recent runs") {
		t.Error("a latency trend is drawn for runs without latency")
	}
	page := browsertest.Render(t, browser, f.srv.URL+"/runs/1", "--dump-dom")
	failures := regexp.MustCompile(`(?s)<table id="failures">.*?</table>`).FindString(page)
	for _, want := range []string{">connect<", ">6<", "connection refused", "nothing listens"} {
		if !strings.Contains(failures, want) {
			t.Errorf("the run page's failures table lacks %q:\n%s", want, failures)
		}
	}
}
