package servermetrics

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/sim"
)

func read(t *testing.T, file string) Snapshot {
	t.Helper()
	f, err := os.Open("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fams, err := Parse(f, expfmt.NewFormat(expfmt.TypeTextPlain))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var names []string
	for _, f := range fams {
		names = append(names, f.GetName())
	}
	kind := Detect(names)
	snap := Reduce(fams, kind, "")
	return snap
}

// Every server kind's /metrics, in the shape that server writes, is read
// into the same roles; each file's header names the version it is from.
func TestCapturedShapes(t *testing.T) {
	all := []Role{Queue, Prefill, TTFT, ITL, E2E, Running, Waiting, KVCache, PrefixHits, PrefixQueries, Preemptions, PromptTokens, GenerationTokens}
	cases := []struct {
		file string
		kind Kind
		has  []Role
	}{
		{"vllm-0.11.txt", VLLM, all},
		{"vllm-0.6.txt", VLLM, []Role{Queue, Prefill, TTFT, ITL, E2E, Running, Waiting, KVCache, PrefixHitRate, Preemptions, PromptTokens, GenerationTokens}},
		{"sglang-0.5.txt", SGLang, []Role{Queue, TTFT, ITL, E2E, Running, Waiting, KVCache, PrefixHitRate, PromptTokens, GenerationTokens}},
		{"tgi-3.txt", TGI, []Role{Queue, Prefill, ITL, E2E, Running, Waiting, PromptTokens, GenerationTokens}},
		{"llamacpp.txt", LlamaCpp, []Role{Running, Waiting, KVCache, PromptTokens, GenerationTokens}},
		{"nim-1.txt", NIM, []Role{TTFT, ITL, E2E, Running, Waiting, KVCache, PromptTokens, GenerationTokens}},
	}
	for _, c := range cases {
		snap := read(t, c.file)
		if snap.Kind != c.kind {
			t.Errorf("%s: detected %q, want %q", c.file, snap.Kind, c.kind)
			continue
		}
		var got []Role
		for _, r := range Roles() {
			_, h := snap.Hist[r]
			_, v := snap.Value[r]
			if h || v {
				got = append(got, r)
			}
		}
		if !slices.Equal(got, c.has) {
			t.Errorf("%s: read %v, want %v", c.file, got, c.has)
		}
		// The same load in every file: 8 running, 32 waiting, 20480
		// prompt tokens, and the queue (where there is one) 40 requests
		// and 172.4 s.
		if snap.Value[Running] != 8 || snap.Value[Waiting] != 32 || snap.Value[PromptTokens] != 20480 {
			t.Errorf("%s: running %v waiting %v prompt tokens %v", c.file, snap.Value[Running], snap.Value[Waiting], snap.Value[PromptTokens])
		}
		if q, ok := snap.Hist[Queue]; ok && (q.Count != 40 || q.Sum != 172.4 || !math.IsInf(q.Bounds[len(q.Bounds)-1], 1)) {
			t.Errorf("%s: queue %+v", c.file, q)
		}
		if kv, ok := snap.Value[KVCache]; ok && kv != 0.4375 {
			t.Errorf("%s: KV cache %v", c.file, kv)
		}
	}
	// TGI's prefill is its batches' prefill, not the decode beside it.
	if p := read(t, "tgi-3.txt").Hist[Prefill]; p.Count != 40 {
		t.Errorf("TGI prefill counted %v observations, want the 40 of method=prefill", p.Count)
	}
}

func TestDetect(t *testing.T) {
	for names, want := range map[string]Kind{
		"vllm:num_requests_running go_goroutines":                         VLLM,
		"num_requests_running vllm:num_requests_running vllm:a vllm:b":    NIM,
		"sglang:num_running_reqs":                                         SGLang,
		"tgi_queue_size tgi_request_count":                                TGI,
		"llamacpp:requests_processing":                                    LlamaCpp,
		"go_goroutines process_cpu_seconds_total":                         "",
		"DCGM_FI_DEV_GPU_UTIL tokenprobe_requests_total http_requests_in": "",
	} {
		if got := Detect(strings.Fields(names)); got != want {
			t.Errorf("%s: %q, want %q", names, got, want)
		}
	}
}

func TestQuantile(t *testing.T) {
	h := Hist{Count: 10, Bounds: []float64{1, 2, 4, math.Inf(1)}, Cumulative: []float64{2, 6, 10, 10}}
	for q, want := range map[float64]float64{0.5: 1.75, 0.1: 0.5, 0.9: 3.5, 1: 4} {
		if got, _, _, ok := quantile(q, h); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	// Observations past the last finite bound: the bound, as Prometheus.
	h = Hist{Count: 4, Bounds: []float64{1, math.Inf(1)}, Cumulative: []float64{1, 4}}
	if got, _, _, _ := quantile(0.5, h); got != 1 {
		t.Errorf("q0.5 in +Inf = %v, want 1", got)
	}
	if _, _, _, ok := quantile(0.5, Hist{Count: 3}); ok {
		t.Error("a histogram with no buckets has a median")
	}
}

// snapshots builds readings from a queue, prefill and e2e histogram that
// rise by the given totals between two readings.
func snapshots(start time.Time, requests, queueSum, prefillSum float64) Readings {
	bounds := []float64{0.3, 1, 4, 5, math.Inf(1)}
	all := func(n float64) []float64 { return []float64{n, n, n, n, n} }
	before := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{
		Queue: {Count: 100, Sum: 10, Bounds: bounds, Cumulative: all(100)},
		E2E:   {Count: 100, Sum: 200, Bounds: bounds, Cumulative: []float64{0, 50, 100, 100, 100}},
	}, Value: map[Role]float64{Running: 0, Waiting: 0, PromptTokens: 1000}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Queue: {Count: 100 + requests, Sum: 10 + queueSum, Bounds: bounds, Cumulative: []float64{100, 100, 100, 100 + requests, 100 + requests}},
		E2E:   {Count: 100 + requests, Sum: 200 + 2*queueSum, Bounds: bounds, Cumulative: []float64{0, 50, 100, 100 + requests, 100 + requests}},
	}, Value: map[Role]float64{Running: 8, Waiting: 32, PromptTokens: 1000 + 512*requests}}
	if prefillSum >= 0 {
		before.Hist[Prefill] = Hist{Count: 100, Sum: 1, Bounds: bounds, Cumulative: all(100)}
		after.Hist[Prefill] = Hist{Count: 100 + requests, Sum: 1 + prefillSum, Bounds: bounds, Cumulative: all(100 + requests)}
	}
	return Readings{Kind: VLLM, URL: "http://vllm:8000/metrics", Snaps: []Snapshot{before, after}}
}

func summary(start time.Time, requests int, ttftMean, ttftP50 float64) *stats.Summary {
	return &stats.Summary{Success: requests, TTFT: stats.Dist{Count: requests, Avg: ttftMean, P50: ttftP50},
		Start: start.Add(time.Second), End: start.Add(50 * time.Second)}
}

func TestBreakdownNamesTheQueue(t *testing.T) {
	start := time.Now()
	sum := summary(start, 40, 4700, 4650)
	Explain(sum, snapshots(start, 40, 40*4.3, 40*0.2))
	s := sum.Server
	b := s.Breakdown
	if s.Err != "" || b == nil {
		t.Fatalf("%+v", s)
	}
	if math.Abs(b.Mean.Queue-4300) > 1e-6 || math.Abs(*b.Mean.Prefill-200) > 1e-6 || math.Abs(b.Mean.Elsewhere-200) > 1e-6 {
		t.Fatalf("mean split %+v", b.Mean)
	}
	if b.Dominant != "queue" {
		t.Fatalf("dominant %q", b.Dominant)
	}
	want := "TTFT mean 4.7 s, mostly the server's queue: 4.3 s waiting in the server's queue, 200 ms prefill, 200 ms elsewhere"
	if b.Verdict != want {
		t.Fatalf("verdict\n%s\nwant\n%s", b.Verdict, want)
	}
	// The medians: every queue time in (4 s, 5 s], so its middle; every
	// prefill in (0, 300 ms], so 150 ms.
	if b.P50 == nil || b.P50.Queue != 4500 || *b.P50.Prefill != 150 || b.P50.Elsewhere != 0 {
		t.Fatalf("p50 split %+v (%s)", b.P50, b.P50Note)
	}
	if s.Running == nil || s.Running.Peak != 8 || s.Waiting.Avg != 16 || *s.PromptTokens != 512*40 {
		t.Fatalf("levels %+v %+v, tokens %v", s.Running, s.Waiting, s.PromptTokens)
	}
	if s.Note != "" {
		t.Fatalf("note %q", s.Note)
	}
}

func TestBreakdownAtLowLoad(t *testing.T) {
	start := time.Now()
	sum := summary(start, 40, 60, 58)
	Explain(sum, snapshots(start, 40, 40*0.0005, 40*0.045))
	if b := sum.Server.Breakdown; b == nil || b.Dominant != "prefill" || !strings.Contains(b.Verdict, "mostly the server's prefill") {
		t.Fatalf("%+v", b)
	}
	// vLLM's first queue bucket is (0, 300 ms]: its middle says nothing
	// of a 58 ms median, so the medians are not split.
	if b := sum.Server.Breakdown; b.P50 != nil || !strings.Contains(b.P50Note, "too coarse") {
		t.Fatalf("median split %+v: %q", b.P50, b.P50Note)
	}
	// No prefill series: the queue is still split out, and the verdict
	// says the prefill is in the rest.
	sum = summary(start, 40, 60, 58)
	Explain(sum, snapshots(start, 40, 40*0.0005, -1))
	if b := sum.Server.Breakdown; b == nil || b.Dominant != "elsewhere" || b.Mean.Prefill != nil || !strings.Contains(b.Verdict, "exposes no prefill series") {
		t.Fatalf("%+v", b)
	}
}

func TestWhatTheBreakdownCannotSay(t *testing.T) {
	start := time.Now()
	cases := map[string]struct {
		rd   Readings
		sum  *stats.Summary
		want string
	}{
		"other traffic": {snapshots(start, 400, 400*4.3, 400*0.2), summary(start, 40, 4700, 4650), "other traffic is mixed in"},
		"no request":    {snapshots(start, 0, 0, 0), summary(start, 40, 4700, 4650), "recorded no request"},
	}
	noQueue := snapshots(start, 40, 1, 1)
	for _, s := range noQueue.Snaps {
		delete(s.Hist, Queue)
	}
	noQueue.Kind = TGI
	cases["no queue series"] = struct {
		rd   Readings
		sum  *stats.Summary
		want string
	}{noQueue, summary(start, 40, 4700, 4650), "(tgi) exposes no queue-time series"}
	for name, c := range cases {
		Explain(c.sum, c.rd)
		if !strings.Contains(c.sum.Server.Note, c.want) || c.sum.Server.Breakdown != nil {
			t.Errorf("%s: note %q, breakdown %+v; want %q and no breakdown", name, c.sum.Server.Note, c.sum.Server.Breakdown, c.want)
		}
	}
	restarted := snapshots(start, 40, 1, 1)
	restarted.Snaps[1].Hist[Queue] = Hist{Count: 3, Sum: 1, Bounds: []float64{math.Inf(1)}, Cumulative: []float64{3}}
	sum := summary(start, 40, 4700, 4650)
	Explain(sum, restarted)
	if !strings.Contains(sum.Server.Err, "restarted") || sum.Server.Breakdown != nil || sum.Server.Note != "" {
		t.Errorf("a server restarted in the window: %+v", sum.Server)
	}
	one := snapshots(start, 40, 1, 1)
	one.Snaps, one.Err = one.Snaps[:1], nil
	sum = summary(start, 40, 4700, 4650)
	Explain(sum, one)
	if sum.Server.Err == "" || sum.Server.Breakdown != nil {
		t.Errorf("one reading: %+v", sum.Server)
	}
}

// The simulator answers in protobuf, a server of the text format in text:
// both are read, with the bearer token, and a refusal names its status.
func TestScrapeBothFormats(t *testing.T) {
	s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/metrics", nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("the simulator answered %q, not protobuf", f)
	}
	src := New(Options{URL: "http://" + s.Addr() + "/metrics", Model: "m"})
	snap, err := src.Scrape(context.Background())
	if err != nil || src.Kind() != VLLM || len(snap.Hist) != 5 {
		t.Fatalf("simulator: %v, kind %q, %d histograms", err, src.Kind(), len(snap.Hist))
	}

	text, err := os.ReadFile("testdata/vllm-0.11.txt")
	if err != nil {
		t.Fatal(err)
	}
	var gotAuth, gotAccept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotAccept = r.Header.Get("Authorization"), r.Header.Get("Accept")
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(text)
	}))
	defer srv.Close()
	src = New(Options{URL: srv.URL + "/metrics", Kind: VLLM, BearerToken: "s3cret"})
	snap, err = src.Scrape(context.Background())
	if err != nil || snap.Hist[Queue].Count != 40 {
		t.Fatalf("text: %v %+v", err, snap.Hist[Queue])
	}
	if gotAuth != "Bearer s3cret" || !strings.HasPrefix(gotAccept, "application/vnd.google.protobuf") {
		t.Fatalf("sent Authorization %q, Accept %q", gotAuth, gotAccept)
	}
	_, err = New(Options{URL: srv.URL + "/refuse"}).Scrape(context.Background())
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("refused: %v", err)
	}
	if u := New(Options{URL: "http://user:pw@host:9/metrics"}).URL(); strings.Contains(u, "pw") {
		t.Fatalf("URL %q shows the password", u)
	}
}

// A server whose page cannot be read gives the run no figures and the
// reason, counted; it does not hold the run up past the first reading's
// bound.
func TestSamplerOfAnUnreadablePage(t *testing.T) {
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	src := New(Options{URL: "http://" + addr + "/metrics", Kind: VLLM, Interval: 50 * time.Millisecond})
	start := time.Now()
	smp := Start(src)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Start took %v", took)
	}
	time.Sleep(200 * time.Millisecond)
	rd := smp.Stop()
	if len(rd.Snaps) != 0 || rd.Failed < 2 || rd.Err == nil {
		t.Fatalf("readings %d, failed %d, err %v", len(rd.Snaps), rd.Failed, rd.Err)
	}
	sum := summary(time.Now(), 10, 100, 100)
	Explain(sum, rd)
	if !strings.Contains(sum.Server.Err, "could not be read") || sum.Server.Breakdown != nil {
		t.Fatalf("%+v", sum.Server)
	}
	// Readings that failed between good ones are counted in the report.
	rd = snapshots(time.Now(), 40, 40*4.3, 40*0.2)
	rd.Failed, rd.Err = 3, errors.New("HTTP 503")
	sum = summary(rd.Snaps[0].At, 40, 4700, 4650)
	Explain(sum, rd)
	if !strings.Contains(sum.Server.Err, "3 readings of the server's metrics failed (the last: HTTP 503)") || sum.Server.Breakdown == nil {
		t.Fatalf("%+v", sum.Server)
	}
}
