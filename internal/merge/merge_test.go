package merge

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/runonce"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

const study = `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 2ms, prefill_base: 5ms, prefill_per_token: 10us, seed: 1, faults: {error_500: 0.05}}
profiles:
  - name: study
    load: {sweep: {concurrency: [2, 8], requests: 40}}
    workload: {input_tokens: {mean: 50}, output_tokens: {mean: 8}}
    slo: {ttft: 50ms, objective: 0.9}
    failure: {abort: {error_ratio: 0}, max_error_ratio: 0}
`

// run runs the study, as shard index of count (count 0: whole), and
// returns its invocation folder.
func run(t *testing.T, cfg string, index, count int) string {
	t.Helper()
	dir := t.TempDir()
	var out, progress bytes.Buffer
	code := runonce.Run(context.Background(), runonce.Options{ConfigFile: cfg, ArtifactsDir: dir, Out: &out, Progress: &progress,
		ShardIndex: index, ShardCount: count})
	if code != runonce.ExitOK && code != runonce.ExitSLOFailed && code != runonce.ExitUndecided {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), progress.String())
	}
	m, _ := filepath.Glob(filepath.Join(dir, "*"))
	return m[0]
}

func config(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	if err := os.WriteFile(p, []byte(study), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A run merged alone is the run: every figure computed again from its
// records equals the one the run wrote. The records hold what the
// figures need, and Request reads it back as it was measured.
func TestOneRunMergedIsItself(t *testing.T) {
	runs, err := Load(run(t, config(t), 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := Merge(runs)[0].Summary
	want := runs[0].Summary
	same := func(what string, a, b float64) {
		t.Helper()
		if math.Abs(a-b) > 1e-6*math.Max(1, math.Abs(b)) {
			t.Errorf("%s: merged %v, the run's %v", what, a, b)
		}
	}
	same("requests", float64(got.Requests), float64(want.Requests))
	same("errors", float64(got.Errors), float64(want.Errors))
	same("success", float64(got.Success), float64(want.Success))
	same("attainment", got.Attainment, want.Attainment)
	same("goodput", got.Goodput, want.Goodput)
	same("throughput", got.RequestThroughput, want.RequestThroughput)
	for _, d := range []struct {
		name      string
		got, want stats.Dist
	}{{"ttft", got.TTFT, want.TTFT}, {"ttst", got.TTST, want.TTST}, {"itl", got.ITL, want.ITL}, {"e2e", got.E2E, want.E2E}, {"inter-chunk", got.InterChunk, want.InterChunk}} {
		same(d.name+" count", float64(d.got.Count), float64(d.want.Count))
		same(d.name+" p50", d.got.P50, d.want.P50)
		same(d.name+" p99", d.got.P99, d.want.P99)
	}
	// The knee's levels exactly; its ratios to the nanosecond a record's
	// milliseconds round to, as every figure above.
	if len(got.Stages) != 2 || len(want.Stages) != 2 || got.Knee == nil || want.Knee == nil ||
		got.Knee.CapacityAtSLO != want.Knee.CapacityAtSLO || got.Knee.CliffLevel != want.Knee.CliffLevel || got.Knee.PeakLevel != want.Knee.PeakLevel {
		t.Fatalf("stages %d (the run's %d), knee %+v (the run's %+v)", len(got.Stages), len(want.Stages), got.Knee, want.Knee)
	}
	// A ratio of two p50s of a few milliseconds, each off by up to a
	// nanosecond: a few parts in a million.
	for _, r := range []struct {
		what      string
		got, want float64
	}{{"TTFT", got.Knee.TTFTRatio, want.Knee.TTFTRatio}, {"ITL", got.Knee.ITLRatio, want.Knee.ITLRatio},
		{"peak TTFT", got.Knee.PeakTTFTRatio, want.Knee.PeakTTFTRatio}, {"peak ITL", got.Knee.PeakITLRatio, want.Knee.PeakITLRatio}} {
		if math.Abs(r.got-r.want) > 1e-5*math.Abs(r.want) {
			t.Errorf("knee %s ratio: merged %v, the run's %v", r.what, r.got, r.want)
		}
	}
	for i := range got.Stages {
		same("stage level", got.Stages[i].Level, want.Stages[i].Level)
		same("stage ttft p95", got.Stages[i].TTFT.P95, want.Stages[i].TTFT.P95)
		same("stage requests", float64(got.Stages[i].Requests), float64(want.Stages[i].Requests))
	}
}

// Three shards each run a third of the study's load; merged, they are one
// run of the whole: every request of each, percentiles over all of them,
// goodput over the union of their windows, and the artifacts a run
// writes.
func TestShardsMergeIntoOneStudy(t *testing.T) {
	cfg := config(t)
	var runs []*Run
	for i := range 3 {
		// The --artifacts-dir itself, as the study Job passes it: its
		// newest `tokenprobe run` folder is read.
		rs, err := Load(filepath.Dir(run(t, cfg, i, 3)))
		if err != nil {
			t.Fatal(err)
		}
		if sh := rs[0].Summary.Shard; sh == nil || sh.Index != i || sh.Count != 3 {
			t.Fatalf("shard %d's summary says %+v", i, sh)
		}
		runs = append(runs, rs...)
	}
	ms := Merge(runs)
	if len(ms) != 1 {
		t.Fatalf("%d merged runs", len(ms))
	}
	m := ms[0]
	if n := runs[0].Summary.Requests + runs[1].Summary.Requests + runs[2].Summary.Requests; m.Summary.Requests != n || n != 80 || len(m.Records) != n {
		t.Errorf("merged %d requests and %d records, the shards %d, %d and %d (want 80: 2 levels x 40)", m.Summary.Requests, len(m.Records),
			runs[0].Summary.Requests, runs[1].Summary.Requests, runs[2].Summary.Requests)
	}
	// The percentiles are those of the shards' records put together, and
	// goodput is over the union of their windows.
	var ttft []float64
	good := 0
	var first, last time.Time
	for _, r := range runs {
		for _, rec := range r.Records {
			if rec.TTFTMs != nil && (rec.Outcome == "success" || rec.Outcome == "wrong_answer") {
				ttft = append(ttft, *rec.TTFTMs)
			}
			if rec.Good {
				good++
			}
			end := rec.Start.Add(time.Duration(*orZero(rec.RequestLatencyMs) * float64(time.Millisecond)))
			if first.IsZero() || rec.Start.Before(first) {
				first = rec.Start
			}
			if end.After(last) {
				last = end
			}
		}
	}
	want := stats.Compute(ttft)
	// Within a nanosecond: the merge reads each record's milliseconds back
	// as a time.Duration, whole nanoseconds, and a percentile between two
	// of them moves by as much.
	ns := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6 }
	if m.Summary.TTFT.Count != want.Count || !ns(m.Summary.TTFT.P50, want.P50) || !ns(m.Summary.TTFT.P99, want.P99) {
		t.Errorf("merged TTFT %d p50 %g p99 %g, the records' together %d %g %g", m.Summary.TTFT.Count, m.Summary.TTFT.P50, m.Summary.TTFT.P99, want.Count, want.P50, want.P99)
	}
	if g := float64(good) / last.Sub(first).Seconds(); math.Abs(m.Summary.Goodput-g) > 1e-6*g {
		t.Errorf("merged goodput %g/s, good requests over the union window %g/s", m.Summary.Goodput, g)
	}
	// The merged summary says what it joined, and how far apart the
	// shards began.
	var firstStart, lastStart time.Time
	for _, r := range runs {
		if st := r.Summary.Start; firstStart.IsZero() || st.Before(firstStart) {
			firstStart = st
		}
		if st := r.Summary.Start; st.After(lastStart) {
			lastStart = st
		}
	}
	if mg := m.Summary.Merged; mg == nil || mg.Shards != 3 || mg.StartSpreadMs != float64(lastStart.Sub(firstStart))/float64(time.Millisecond) || lastStart.Equal(firstStart) {
		t.Errorf("merged %+v; the shards began over %s", mg, lastStart.Sub(firstStart))
	}
	if len(m.Summary.Stages) != 2 || m.Summary.Stages[1].Requests != 40 {
		t.Errorf("stages %+v", m.Summary.Stages)
	}
	ids := map[uint64]bool{}
	for _, r := range m.Records {
		if ids[r.ID] {
			t.Fatalf("record id %d twice", r.ID)
		}
		ids[r.ID] = true
	}
	out := t.TempDir()
	if err := Write(out, ms, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"summary.json", "report.html", "study-sim/records.jsonl", "study-sim/summary.json", "study-sim/report.txt", "study-sim/records.csv", "study-sim/summary.csv"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	again, err := Load(filepath.Join(out, "study-sim"))
	if err != nil || len(again[0].Records) != 80 {
		t.Fatalf("the merged run reads back: %v", err)
	}
}

func orZero(p *float64) *float64 {
	if p == nil {
		return new(float64)
	}
	return p
}

// A prefix-cache run merged alone keeps its verdict: the records say each
// request's phase and triple, and the speed-up is computed again from
// them.
func TestPrefixCacheMergedIsItself(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	if err := os.WriteFile(p, []byte(`
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 1ms, prefill_base: 2ms, prefill_per_token: 20us, seed: 1}
profiles:
  - name: cache
    prefix_cache: {prefix_tokens: 64, triples: 4}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := Load(run(t, p, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	want, got := runs[0].Summary.PrefixCache, Merge(runs)[0].Summary.PrefixCache
	if want == nil || got == nil || want.Triples != 4 || got.Triples != want.Triples || got.Verdict != want.Verdict ||
		math.Abs(got.Speedup-want.Speedup) > 1e-5*want.Speedup || got.MinSpeedup != want.MinSpeedup {
		t.Fatalf("merged %+v, the run's %+v", got, want)
	}
}
