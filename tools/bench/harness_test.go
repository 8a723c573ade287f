package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The whole harness at a toy scale: the real simulator and client
// processes, two closed-loop levels and an open-loop one, the floor and
// tokenprobe side by side, written into a markdown file.
func TestHarnessEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the harness's binaries")
	}
	dir := t.TempDir()
	// tokenprobe is built in its own module (the repository's root), the
	// harness in this one.
	for _, b := range []struct{ name, dir, pkg string }{
		{"tokenprobe", "../..", "./cmd/tokenprobe"}, {"tokenprobe-bench", ".", "./cmd/tokenprobe-bench"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.name), b.pkg)
		cmd.Dir = b.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	// And a trace replay: the first 10 s of the shared trace at 20x.
	var replay ReplayOptions
	const trace = "../../../shared/datasets/mooncake_conversation_trace.jsonl"
	if _, err := os.Stat(trace); err == nil {
		replay = ReplayOptions{Trace: trace, Speedups: []float64{20}, For: 500 * time.Millisecond, Runs: 1}
	} else if os.Getenv("TOKENPROBE_REQUIRE_DATASETS") != "" {
		t.Fatalf("%s: %v", trace, err)
	}
	var progress strings.Builder
	rep, err := Run(context.Background(), Options{
		Tokenprobe: filepath.Join(dir, "tokenprobe"), Self: filepath.Join(dir, "tokenprobe-bench"),
		Clients: []string{KindFloor, KindTokenprobe, KindOTLP, KindTraced}, Streams: []int{5, 20}, Rates: []float64{40},
		Duration: time.Second, Interval: 20 * time.Millisecond, Tokens: 10, RateTokens: 3, Progress: &progress,
		Replay: replay, SchedSlice: 100 * time.Microsecond,
		// A wide level at a toy scale: 30 streams, 16 a process, so two
		// client processes against two simulators on one shared port;
		// measured twice, in both orders.
		Wide: WideOptions{Streams: []int{30}, Interval: 20 * time.Millisecond, Tokens: 60, Duration: time.Second, Settle: 200 * time.Millisecond, PerProcess: 16, Pairs: 2},
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.Problems) > 0 || len(rep.Results) != 12 {
		t.Fatalf("%d results, problems %v\n%s", len(rep.Results), rep.Problems, progress.String())
	}
	for _, m := range rep.Results {
		want := int64(m.Load.Tokens)
		if m.Client.Requests == 0 || m.Client.Errors != 0 || m.Client.Chunks != m.Client.Requests*want {
			t.Errorf("%s, %s: %+v: want requests x %d chunks and no errors", m.Load, m.Client.Kind, m.Client, want)
		}
		if m.CPUSeconds <= 0 || m.PeakRSS <= 0 || m.IdleRSS <= 0 || m.PeakRSS < m.IdleRSS {
			t.Errorf("%s, %s: CPU %v s, RSS idle %d peak %d", m.Load, m.Client.Kind, m.CPUSeconds, m.IdleRSS, m.PeakRSS)
		}
		if isTokenprobe(m.Client.Kind) && m.Client.TimingError == nil {
			t.Errorf("%s, %s: no timing error reported", m.Load, m.Client.Kind)
		}
		// Spans reach the collector with tracing on, and only then.
		switch k := m.Client.Kind; {
		case k == KindTraced && (m.OTLPTraceBytes == 0 || m.OTLPMetricBytes == 0):
			t.Errorf("%s, tracing on: the collector got %d bytes of spans, %d of metrics", m.Load, m.OTLPTraceBytes, m.OTLPMetricBytes)
		case k == KindOTLP && (m.OTLPTraceBytes != 0 || m.OTLPMetricBytes == 0):
			t.Errorf("%s, tracing off: the collector got %d bytes of spans, %d of metrics", m.Load, m.OTLPTraceBytes, m.OTLPMetricBytes)
		}
		if m.Client.Kind == KindTokenprobe && m.Load.Rate > 0 && m.Client.DispatchLag == nil {
			t.Errorf("%s: no dispatch lag for an open loop", m.Load)
		}
	}
	if len(rep.Wide) != 4 {
		t.Fatalf("%d wide results, want the floor's and tokenprobe's, twice\n%s", len(rep.Wide), progress.String())
	}
	var order []string
	for _, m := range rep.Wide {
		order = append(order, fmt.Sprintf("%s %d", m.Client.Kind, m.Pair))
	}
	if got := strings.Join(order, ", "); got != "floor 1, tokenprobe 1, tokenprobe 2, floor 2" {
		t.Errorf("wide levels run as %s: want the floor first, then tokenprobe first", got)
	}
	for _, m := range rep.Wide {
		// Every stream's one answer (60 chunks, 1.2 s) outlasts the load.
		if m.Processes != 2 || m.Simulators != 2 || m.Client.Requests != 30 || m.Client.Errors != 0 || m.Client.Chunks != 30*60 || m.Client.PeakInFlight != 30 {
			t.Errorf("wide, %s: %d processes, %d simulators, %+v: want 2, 2, 30 requests of 60 chunks, none failed", m.Client.Kind, m.Processes, m.Simulators, m.Client)
		}
		if m.CPUSeconds <= 0 || m.IdleRSS <= 0 || m.PeakRSS < m.IdleRSS || m.SimCPUSeconds <= 0 || m.BusyPercent <= 0 {
			t.Errorf("wide, %s: CPU %v s, RSS idle %d peak %d, simulators' CPU %v s, machine busy %v%%", m.Client.Kind, m.CPUSeconds, m.IdleRSS, m.PeakRSS, m.SimCPUSeconds, m.BusyPercent)
		}
		if m.Client.Kind == KindTokenprobe && (m.Client.TimingError == nil || m.Client.Timing != nil) {
			t.Errorf("wide, tokenprobe: timing error %+v (its processes' histograms added up, and not kept in the report: %v)", m.Client.TimingError, m.Client.Timing != nil)
		}
	}
	wantMD := []string{"| 30 | tokenprobe | 2 | 2 (2) |", "### Many streams, in several processes", "| 20 | tokenprobe |", "| 40 | floor |", "| 20 | tokenprobe-traced |", "issue 31: tracing on (a span per request over OTLP) costs within 5% CPU per chunk of tracing off, at 20 streams", "vs floor", "1.00x", "Where tokenprobe's dispatch lag was spent: at 40 req/s its goroutines waited runnable"}
	if replay.Trace != "" {
		if len(rep.Replays) != 1 {
			t.Fatalf("%d replays, want 1\n%s", len(rep.Replays), progress.String())
		}
		p := rep.Replays[0]
		if p.Requests == 0 || p.Errors != 0 || p.Window != 10*time.Second || p.CPUSeconds <= 0 || p.SimCPUSeconds <= 0 {
			t.Errorf("replay %+v: want requests, no errors, a 10 s window and CPU of both processes", p)
		}
		if q := p.DispatchLag; q.P50 < 0 || q.P99 < q.P50 || q.Max < q.P99 {
			t.Errorf("replay dispatch lag %+v: want ordered, non-negative quantiles", q)
		}
		wantMD = append(wantMD, "| 20x | first 10 s |", "issue 3: trace replay")
	}
	md := rep.Markdown()
	for _, want := range wantMD {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	doc := filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(doc, []byte("# B\n\nbefore\n"+BeginMarker+"\nold\n"+EndMarker+"\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(doc, md); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(doc)
	if s := string(data); !strings.Contains(s, "before\n") || !strings.Contains(s, "after\n") || strings.Contains(s, "old\n") || !strings.Contains(s, md) {
		t.Errorf("the section was not replaced in place:\n%s", s)
	}
}

func TestWriteSectionNeedsMarkers(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "x.md")
	_ = os.WriteFile(doc, []byte("no markers"), 0o644)
	if err := WriteSection(doc, "x"); err == nil || !strings.Contains(err.Error(), doc) {
		t.Errorf("err = %v, want one naming the file", err)
	}
}

// The bar's verdicts follow the figures: a level that misses says so.
func TestBarsJudgeTheFigures(t *testing.T) {
	rep := &Report{Results: []Measurement{
		{Load: Load{Streams: 1000}, Client: ClientResult{Kind: KindFloor, Chunks: 1e6, PeakInFlight: 1000}, CPUSeconds: 10},
		{Load: Load{Streams: 1000}, Client: ClientResult{Kind: KindTokenprobe, Chunks: 1e6, PeakInFlight: 1000, TimingError: &Quantiles{P99: 1500}}, CPUSeconds: 16},
		{Load: Load{Streams: 1000}, Client: ClientResult{Kind: KindOTLP, Chunks: 1e6}, CPUSeconds: 16},
		{Load: Load{Streams: 1000}, Client: ClientResult{Kind: KindTraced, Chunks: 1e6}, CPUSeconds: 17}, // +6.25%
		{Load: Load{Streams: 5000}, Client: ClientResult{Kind: KindOTLP, Chunks: 1e6}, CPUSeconds: 10},
		{Load: Load{Streams: 5000}, Client: ClientResult{Kind: KindTraced, Chunks: 1e6}, CPUSeconds: 10.4}, // +4%
	}, Idle: &Idle{RSS: 30 << 20, CPUFraction: 0.002, Seconds: 60, Observed: 100},
		Replays: []Replay{{Speedup: 1, Requests: 87, DispatchLag: Quantiles{P99: 900}},
			{Speedup: 10, Requests: 918, DispatchLag: Quantiles{P99: 5400}, Latest: &Latest{Lag: 5400 * time.Microsecond, HarnessLate: 4 * time.Millisecond}},
			{Speedup: 10, Requests: 918, DispatchLag: Quantiles{P99: 9000}, Latest: &Latest{Lag: 10 * time.Millisecond, HarnessLate: 2 * time.Millisecond}}}}
	verdicts := map[string]string{}
	for _, row := range rep.Bars() {
		verdicts[row.Bar] = row.Verdict
		if strings.HasPrefix(row.Bar, "issue 3:") && (!strings.Contains(row.Measured, "5.4 ms late while a 1 ms sleep in the harness woke 4.0 ms late: the machine)") ||
			!strings.Contains(row.Measured, "10.0 ms late while a 1 ms sleep in the harness woke 2.0 ms late: the machine in part)")) {
			t.Errorf("the replay bar does not say how far the machine held the latest requests: %q", row.Measured)
		}
	}
	for bar, want := range map[string]string{
		"client CPU per chunk within 1.5x of the floor at 1,000 streams":                                                    "**missed**", // 1.6x
		"timing error p99 under 1 ms at 1,000 streams":                                                                      "**missed**",
		"issue 31: tracing on (a span per request over OTLP) costs within 5% CPU per chunk of tracing off, at 1000 streams": "**missed**",
		"issue 31: tracing on (a span per request over OTLP) costs within 5% CPU per chunk of tracing off, at 5000 streams": "met",
		"idle daemon (demo config, between runs): under 40 MiB RSS and 1% of a core":                                        "met",
		"issue 3: trace replay dispatch lag p99 under 5 ms, at the trace's pace and at 10x":                                 "**missed**", // 5.4 ms at 10x
	} {
		if verdicts[bar] != want {
			t.Errorf("%s: %q, want %q (all: %v)", bar, verdicts[bar], want, verdicts)
		}
	}
}

// Issue 48's pace: a level holds it only with the rate achieved within
// 1%, lag p99 under 1 ms and max under 5 ms and no error; the highest
// rate held is said for each client.
func TestPaceBars(t *testing.T) {
	open := func(kind string, rate float64, requests int64, p99, maxLag float64, errs int64) Measurement {
		return Measurement{Load: Load{Rate: rate, Duration: 10 * time.Second},
			Client: ClientResult{Kind: kind, Requests: requests, Errors: errs, Seconds: 10.5, DispatchLag: &Quantiles{P50: 100, P99: p99, Max: maxLag}}}
	}
	rep := &Report{Results: []Measurement{
		open(KindFloor, 1000, 10000, 900, 4000, 0),
		open(KindTokenprobe, 1000, 10000, 800, 3000, 0),
		open(KindFloor, 2000, 20000, 950, 4900, 0),
		open(KindTokenprobe, 2000, 20000, 800, 5200, 0), // max over 5 ms
		open(KindFloor, 5000, 49400, 900, 4000, 0),      // 1.2% short
		open(KindTokenprobe, 5000, 50000, 700, 3000, 1), // an error
	}}
	got := map[string]BarRow{}
	for _, row := range rep.Bars() {
		got[row.Bar] = row
	}
	five := got["issue 48: 5,000 requests/s open loop: achieved within 1%, dispatch lag p99 under 1 ms and max under 5 ms, 0 errors"]
	if five.Verdict != "**missed**" || !strings.Contains(five.Measured, "5000/s") || !strings.Contains(five.Measured, "1 errors") {
		t.Errorf("the 5,000/s bar: %+v", five)
	}
	// The floor 1.2% short at 5,000/s: the host's limit, said beside ours.
	if !strings.Contains(five.Measured, "the floor at the same rate 4940/s, lag p99 0.900 ms and max 4.000 ms: it misses the bar too, the host's limit (tokenprobe's p99 0.8x the floor's)") {
		t.Errorf("the 5,000/s bar does not set the floor beside it: %q", five.Measured)
	}
	held := got["issue 48: the highest rate measured at which each client holds the pace (within 1%, lag p99 under 1 ms and max under 5 ms, no error)"]
	if held.Measured != "floor: 2000/s; tokenprobe: 1000/s" {
		t.Errorf("the highest rates held: %q", held.Measured)
	}
	rep.Results[4].Client.Requests = 50000
	for _, row := range rep.Bars() {
		if strings.HasPrefix(row.Bar, "issue 48: 5,000") && !strings.Contains(row.Measured, "it holds the bar, the miss is tokenprobe's") {
			t.Errorf("the 5,000/s bar with the floor on time: %q", row.Measured)
		}
	}
	rep.Results[5].Client.Errors = 0
	for _, row := range rep.Bars() {
		if strings.HasPrefix(row.Bar, "issue 48: 5,000") && (row.Verdict != "met" || strings.Contains(row.Measured, "floor")) {
			t.Errorf("the 5,000/s bar with no error: %+v", row)
		}
	}
}

// The idle bar says what its RSS is made of, and which part put it over.
func TestIdleBarSplitsTheRSS(t *testing.T) {
	const bar = "idle daemon (demo config, between runs): under 40 MiB RSS and 1% of a core"
	rep := &Report{Idle: &Idle{RSS: 45 << 20, RSSAnon: 12 << 20, RSSFile: 33 << 20, RSSFilePMD: 20 << 20, Binary: 40 << 20, CPUFraction: 0.006, Seconds: 60, Observed: 100}}
	row := func() BarRow {
		for _, r := range rep.Bars() {
			if r.Bar == bar {
				return r
			}
		}
		t.Fatal("no idle bar")
		return BarRow{}
	}
	if r := row(); r.Verdict != "**missed**" || !strings.Contains(r.Measured, "45.0 MiB, 0.60% of a core (60 s idle of 100 s); of it 12.0 MiB the daemon's own (anonymous) and 33.0 MiB file pages, mostly of its 40.0 MiB binary (20.0 MiB of them in 2 MiB folios the kernel maps whole, as it does a binary just written): over the bar by the binary's pages") {
		t.Errorf("over the bar: %+v", r)
	}
	rep.Idle.RSSAnon = 41 << 20
	if r := row(); strings.Contains(r.Measured, "by the binary's pages") {
		t.Errorf("the daemon's own pages over the bar, blamed on the binary: %q", r.Measured)
	}
	rep.Idle = &Idle{RSS: 30 << 20, CPUFraction: 0.002, Seconds: 60, Observed: 100} // an older report, no split
	if r := row(); r.Verdict != "met" || strings.Contains(r.Measured, "of it") {
		t.Errorf("an older report: %+v", r)
	}
}

// memOf reads this process's own resident set; its parts add up to it.
func TestMemOfSplitsTheRSS(t *testing.T) {
	m, err := memOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.rss <= 0 || m.anon <= 0 || m.file <= 0 || m.anon+m.file > m.rss+(1<<20) {
		t.Errorf("memOf = %+v", m)
	}
	if _, err := memOf(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
	if p, err := memPMDOf(os.Getpid()); err != nil || p.filePMD < 0 || p.filePMD > p.file+(1<<20) {
		t.Errorf("memPMDOf = %+v, %v", p, err)
	}
}

// A figure measured while the hypervisor took much of the CPU says so,
// and a level measured twice shows both steals.
func TestStealIsShownBesideTheFigures(t *testing.T) {
	rep := &Report{RetrySteal: 5, Results: []Measurement{
		{Load: Load{Rate: 2000}, Client: ClientResult{Kind: KindTokenprobe, Chunks: 1e5, DispatchLag: &Quantiles{P99: 617000}}, Disturbance: Disturbance{StealPercent: 38.8, Remeasured: 45.1}},
		{Load: Load{Streams: 1000}, Client: ClientResult{Kind: KindTokenprobe, Chunks: 1e6, TimingError: &Quantiles{P99: 400}}, Disturbance: Disturbance{StealPercent: 0.3}},
	}}
	measured := map[string]string{}
	for _, row := range rep.Bars() {
		measured[row.Bar] = row.Measured
	}
	if got := measured["dispatch lag p99 under 1 ms at 2,000 requests/s"]; !strings.Contains(got, "(under 39% CPU steal)") {
		t.Errorf("dispatch lag: %q, want the steal named", got)
	}
	if got := measured["timing error p99 under 1 ms at 1,000 streams"]; strings.Contains(got, "steal") {
		t.Errorf("timing error: %q, a quiet level named steal", got)
	}
	md := rep.Markdown()
	for _, want := range []string{"| 38.8% (again: 45.1%) |", "| 0.3% |", "measured again, once"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}
