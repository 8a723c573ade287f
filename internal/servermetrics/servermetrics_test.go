package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/probe/stats"
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
	// A real llama-server's page, as captured: its running and deferred
	// requests and token counters, nothing per request.
	captured := read(t, "llamacpp-de3ff81.txt")
	if captured.Kind != LlamaCpp || captured.Value[Running] != 2 || captured.Value[Waiting] != 4 || captured.Value[PromptTokens] != 23 ||
		captured.Value[GenerationTokens] != 38 || len(captured.Hist) != 0 {
		t.Errorf("llama-server de3ff81: %+v", captured)
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
	var gotAuth, gotAccept, gotEncoding string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotAccept, gotEncoding = r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("Accept-Encoding")
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
	// Compressing the page costs the measured server CPU at every read.
	if gotEncoding != "" {
		t.Fatalf("sent Accept-Encoding %q: the page is asked for uncompressed", gotEncoding)
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

// A server that serves no metrics page (Ollama answers 404) is read
// once in the run, not every interval, and the summary says so plainly.
func TestServerWithoutMetricsIsAskedOnce(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.NotFound(w, nil)
	}))
	defer srv.Close()
	smp := Start(New(Options{URL: srv.URL + "/metrics", Kind: VLLM, Interval: 20 * time.Millisecond}))
	time.Sleep(200 * time.Millisecond)
	smp.Mark()
	rd := smp.Stop()
	if n := asked.Load(); n != 1 {
		t.Errorf("the page was asked for %d times, want once", n)
	}
	sum := summary(time.Now(), 10, 100, 100)
	Explain(sum, rd)
	if want := "this server serves no Prometheus metrics at that URL (HTTP 404): remove server_metrics, or set its url or kind"; sum.Server.Err != want {
		t.Errorf("summary says %q, want %q", sum.Server.Err, want)
	}
}

// hist is a histogram of n observations summing to sum, all in the
// bucket (1, 5].
func hist(n, sum float64) Hist {
	return Hist{Count: n, Sum: sum, Bounds: []float64{1, 5, math.Inf(1)}, Cumulative: []float64{0, n, n}}
}

// A server that creates its series at their first observation has none
// in the reading before a fresh server's first run: they count from zero,
// and the run is split.
func TestSeriesThatAppearLateCountFromZero(t *testing.T) {
	start := time.Now()
	before := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}, Families: map[Role]bool{Queue: true, E2E: true}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Queue: hist(40, 40*4.3), Prefill: hist(40, 40*0.2), E2E: hist(40, 40*5),
	}, Value: map[Role]float64{PromptTokens: 512}}
	sum := summary(start, 40, 4700, 4650)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{before, after}})
	b := sum.Server.Breakdown
	if b == nil || math.Abs(b.Mean.Queue-4300) > 1e-6 || math.Abs(b.Mean.Elsewhere-200) > 1e-6 || *sum.Server.PromptTokens != 512 {
		t.Fatalf("%+v: %s", sum.Server, sum.Server.Note)
	}
}

// A server that observes the queue time only of requests that waited:
// the figures, 92 of 96 requests waited 4,401 ms on average, so
// over all 96 the mean is 4,217.6 ms, and with a client TTFT of 4,221 ms
// the rest is 3.4 ms, not -180 ms.
func TestQueueObservedOnlyForWaiters(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Queue: hist(92, 92*4.401), E2E: hist(96, 96*6),
	}, Value: map[Role]float64{}}
	sum := summary(start, 96, 4221, 4300)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	sv := sum.Server
	if sv.Breakdown == nil {
		t.Fatalf("no breakdown: %s", sv.Note)
	}
	if q := sv.Breakdown.Mean.Queue; math.Abs(q-4217.625) > 0.01 || sv.Queue.Over != 96 || sv.Queue.Count != 92 || sv.Population != 96 {
		t.Fatalf("queue mean %.3f ms over %v (%v observed), population %v; want 4217.625 over 96", q, sv.Queue.Over, sv.Queue.Count, sv.Population)
	}
	if e := sv.Breakdown.Mean.Elsewhere; math.Abs(e-3.375) > 0.01 {
		t.Fatalf("elsewhere %.3f ms, want 3.375", e)
	}
	// The median over all 96: 4 zeros, then the bucket's interpolation.
	if p := *sv.Queue.P50; p < 1000 || p > 5000 {
		t.Fatalf("queue median %v ms", p)
	}
}

// No request queued: the family is on the page (HELP and TYPE alone on a
// lazy server) or its count did not move. Either way the queue is 0 and
// the prefill dominates; "no queue-time series" is only for a page
// without the family.
func TestNoQueueingIsAZeroQueue(t *testing.T) {
	start := time.Now()
	for name, queue := range map[string]map[Role]Hist{
		"declared only": {},
		"did not move":  {Queue: hist(5, 1)},
	} {
		before := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}, Families: map[Role]bool{Queue: true}}
		after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{Prefill: hist(10, 10*0.05), E2E: hist(10, 10*0.5)},
			Value: map[Role]float64{}, Families: map[Role]bool{Queue: true}}
		for r, h := range queue {
			before.Hist[r], after.Hist[r] = h, h
		}
		sum := summary(start, 10, 56, 55)
		Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{before, after}})
		b := sum.Server.Breakdown
		if b == nil || b.Mean.Queue != 0 || b.Dominant != "prefill" || !strings.Contains(b.Verdict, "0.0 ms waiting in the server's queue") {
			t.Errorf("%s: %+v, note %q", name, b, sum.Server.Note)
		}
		if q := sum.Server.Queue; q == nil || q.P50 == nil || *q.P50 != 0 {
			t.Errorf("%s: queue %+v, want a median of 0", name, q)
		}
	}
}

// The server's own TTFT counts from arrival (vLLM): the rest splits into
// the server's front end and the time outside the server.
func TestOutsideTheServer(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Queue: hist(10, 10*1.0), Prefill: hist(10, 10*0.2), TTFT: hist(10, 10*1.23), E2E: hist(10, 10*2),
	}, Value: map[Role]float64{}}
	sum := summary(start, 10, 1300, 1300)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	b := sum.Server.Breakdown
	if b == nil || b.Mean.ServerOther == nil || math.Abs(*b.Mean.ServerOther-30) > 1e-6 || math.Abs(*b.Mean.Outside-70) > 1e-6 {
		t.Fatalf("%+v", b)
	}
	want := "TTFT mean 1.3 s, mostly the server's queue: 1.0 s waiting in the server's queue, 200 ms prefill, 100 ms elsewhere (30 ms in the server's front end, 70 ms outside the server)"
	if b.Verdict != want {
		t.Fatalf("verdict\n%s\nwant\n%s", b.Verdict, want)
	}
	// The client's own connection setup is part of what lies outside the
	// server: named, and named first when it is most of it.
	for network, want := range map[float64]string{
		20: "TTFT mean 1.3 s, mostly the server's queue: 1.0 s waiting in the server's queue, 200 ms prefill, 100 ms elsewhere (30 ms in the server's front end, 70 ms outside the server, 20 ms of it the client's DNS, connect and TLS)",
		90: "TTFT mean 1.3 s, mostly the server's queue: 1.0 s waiting in the server's queue, 200 ms prefill, 100 ms elsewhere (30 ms in the server's front end, 70 ms outside the server, 70 ms of it the client's DNS, connect and TLS)",
	} {
		sum = summary(start, 10, 1300, 1300)
		sum.Network = stats.Dist{Count: 10, Avg: network}
		Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
		if b := sum.Server.Breakdown; b == nil || b.Verdict != want {
			t.Errorf("network %v ms: %+v\nwant %s", network, b, want)
		}
	}
	// A server whose parts exceed the client's whole by more than the
	// slack gets no split, and the note says by how much.
	after.Hist[TTFT] = hist(10, 10*1.5)
	sum = summary(start, 10, 1300, 1300)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if sum.Server.Breakdown != nil || !strings.Contains(sum.Server.Note, "do not add up: its own TTFT mean (1.5 s) exceed the client's mean TTFT (1.3 s) by 200 ms") {
		t.Fatalf("%+v: %q", sum.Server.Breakdown, sum.Server.Note)
	}
	// Within the slack a part is 0, never negative.
	after.Hist[TTFT] = hist(10, 10*1.302)
	sum = summary(start, 10, 1300, 1300)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if b := sum.Server.Breakdown; b == nil || *b.Mean.Outside != 0 {
		t.Fatalf("%+v: %q", b, sum.Server.Note)
	}
}

// A restart anywhere in the window withholds every figure: a counter
// down between any two readings (a fresh server's too), a series gone, a
// new start time, a failed reading and then a lower count.
func TestRestartsWithholdEveryFigure(t *testing.T) {
	start := time.Now()
	at := func(i int, e2e float64, started float64) Snapshot {
		s := Snapshot{At: start.Add(time.Duration(i) * time.Second), Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{PromptTokens: 10 * e2e}, Started: started}
		if e2e >= 0 {
			s.Hist[E2E], s.Hist[Queue] = hist(e2e, e2e), hist(e2e, e2e)
		}
		return s
	}
	cases := map[string][]Snapshot{
		// A fresh server: nothing, 10, restarted (lazy: gone), then 30.
		"fresh, series gone":  {at(0, -1, 0), at(1, 10, 0), at(2, -1, 0), at(3, 30, 0)},
		"fresh, counted down": {at(0, 0, 0), at(1, 10, 0), at(2, 2, 0), at(3, 30, 0)},
		"warm, start time":    {at(0, 100, 5), at(1, 110, 5), at(2, 130, 9), at(3, 140, 9)},
		// The reading at the restart failed; the next is lower than the last good one.
		"warm, failed reading": {at(0, 100, 0), at(1, 110, 0), at(3, 20, 0), at(4, 150, 0)},
	}
	for name, snaps := range cases {
		sum := summary(start, 30, 100, 100)
		sum.Start, sum.End = start.Add(time.Second/2), start.Add(3*time.Second+time.Second/2)
		Explain(sum, Readings{Kind: VLLM, Snaps: snaps})
		sv := sum.Server
		if !strings.Contains(sv.Err, "restarted") || sv.Breakdown != nil || sv.Queue != nil || sv.E2E != nil || sv.PromptTokens != nil {
			t.Errorf("%s: %+v", name, sv)
		}
	}
	sum := summary(start, 30, 100, 100)
	sum.Start, sum.End = start.Add(time.Second/2), start.Add(3*time.Second+time.Second/2)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{at(0, 100, 5), at(1, 110, 5), at(2, 120, 5), at(3, 130, 5)}})
	if sum.Server.Err != "" || sum.Server.E2E == nil {
		t.Errorf("no restart: %+v", sum.Server)
	}
}

// A lazy server's page before its first request: the families are there
// as HELP and TYPE lines, which the text decoder drops. Split against the
// same server's page after four requests that observed the queue of the
// three that waited, the queue mean is over all four.
func TestDeclaredFamiliesOfALazyPage(t *testing.T) {
	text, err := os.ReadFile("testdata/sim-lazy-fresh.txt")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(text)
	}))
	defer srv.Close()
	snap, err := New(Options{URL: srv.URL, Kind: VLLM}).Scrape(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap.Hist[Queue]; ok || !snap.has(Queue) || !snap.has(TTFT) || snap.Started == 0 {
		t.Fatalf("queue read %v, declared %v, TTFT declared %v, started %v", ok, snap.has(Queue), snap.has(TTFT), snap.Started)
	}
	after := read(t, "sim-queue-only-waited.txt")
	after.At, after.Started = snap.At.Add(time.Second), snap.Started
	q := after.Hist[Queue]
	sum := summary(snap.At, 4, 1000*q.Sum/4+2, 1)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{snap, after}})
	if sv := sum.Server; sv.Population != 4 || sv.Queue.Count != 3 || math.Abs(sv.Queue.Mean-1000*q.Sum/4) > 1e-9 || sv.Breakdown == nil {
		t.Fatalf("%+v (%s)", sv, sv.Note)
	}
}

// TGI's prefill histogram observes batches: its mean stays over its own
// count (each request of a batch waited the batch's prefill), while the
// queue's is over the requests finished.
func TestPrefillPerBatch(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: TGI, Hist: map[Role]Hist{}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(time.Minute), Kind: TGI, Hist: map[Role]Hist{
		Queue: hist(40, 40*1.0), Prefill: hist(10, 10*0.2), E2E: hist(40, 40*2),
	}, Value: map[Role]float64{}}
	sum := summary(start, 40, 1250, 1250)
	Explain(sum, Readings{Kind: TGI, Snaps: []Snapshot{zero, after}})
	sv := sum.Server
	if sv.Population != 40 || sv.Prefill == nil || math.Abs(sv.Prefill.Mean-200) > 1e-9 || sv.Prefill.Over != 0 || sv.Breakdown == nil {
		t.Fatalf("population %v, prefill %+v, breakdown %+v (%s)", sv.Population, sv.Prefill, sv.Breakdown, sv.Note)
	}
}

// The server's TTFT clock is read from its own means, not its kind: a
// vLLM-named server whose TTFT starts at scheduling (llm-d-inference-sim
// v0.10.2: 4.27 s of queue, 202 ms of prefill, a TTFT of 204 ms) is split,
// its outside part being the client's TTFT less queue and server TTFT; a
// TTFT below its own prefill fits neither clock, and only the parts that
// need it are withheld.
func TestTheServersClockIsCalibrated(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Queue: hist(48, 48*4.26886), Prefill: hist(48, 48*0.202), TTFT: hist(48, 48*0.204), E2E: hist(48, 48*5),
	}, Value: map[Role]float64{}}
	sum := summary(start, 48, 4483.86, 4400)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	b := sum.Server.Breakdown
	if b == nil {
		t.Fatalf("no split: %s", sum.Server.Note)
	}
	if b.ServerTTFTClock != ClockScheduling || math.Abs(b.Mean.Queue-4268.86) > 1e-6 || math.Abs(b.Mean.Elsewhere-13) > 1e-6 ||
		math.Abs(*b.Mean.ServerOther-2) > 1e-6 || math.Abs(*b.Mean.Outside-11) > 1e-6 {
		t.Fatalf("clock %q, split %+v, other %v, outside %v", b.ServerTTFTClock, b.Mean, *b.Mean.ServerOther, *b.Mean.Outside)
	}
	if !strings.Contains(b.Verdict, "4.3 s waiting in the server's queue, 202 ms prefill, 13 ms elsewhere (2.0 ms in the server's front end, 11 ms outside the server)") ||
		!strings.Contains(b.Verdict, "starts when it schedules") {
		t.Fatalf("verdict %q", b.Verdict)
	}
	// The same server at arrival (vLLM): its TTFT holds the queue.
	after.Hist[TTFT] = hist(48, 48*(4.26886+0.202+0.002))
	sum = summary(start, 48, 4483.86, 4400)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if b := sum.Server.Breakdown; b == nil || b.ServerTTFTClock != ClockArrival || math.Abs(*b.Mean.Outside-11) > 1e-6 {
		t.Fatalf("arrival: %+v (%s)", b, sum.Server.Note)
	}
	// A TTFT below the server's own prefill: queue, prefill and elsewhere
	// stand, the outside part is withheld with the reason.
	after.Hist[TTFT] = hist(48, 48*0.05)
	sum = summary(start, 48, 4483.86, 4400)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	b = sum.Server.Breakdown
	if b == nil || b.ServerTTFTClock != "" || b.Mean.Outside != nil || b.Mean.ServerOther != nil || math.Abs(b.Mean.Elsewhere-13) > 1e-6 ||
		!strings.Contains(b.Withheld, "below its own prefill mean") || !strings.Contains(b.Verdict, "not given") {
		t.Fatalf("neither: %+v (%s)", b, sum.Server.Note)
	}
}

// Absent is not zero, and zero is not absent: a fresh server that creates
// its queue family at the first queued request (llm-d-inference-sim) and
// has finished requests with none waiting queued nothing; one whose
// requests waited yet has no queue family exposes none; a kind without
// one (llama.cpp, no histograms at all) says so, not "no request".
func TestAbsentIsNotZero(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{Waiting: 0}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Prefill: hist(10, 10*0.05), TTFT: hist(10, 10*0.051), E2E: hist(10, 10*0.5),
	}, Value: map[Role]float64{Waiting: 0}}
	sum := summary(start, 10, 56, 55)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	b := sum.Server.Breakdown
	if b == nil || b.Mean.Queue != 0 || b.Dominant != "prefill" || !strings.Contains(b.Verdict, "appears at its first queued request") {
		t.Fatalf("fresh lazy server: %+v, note %q", b, sum.Server.Note)
	}
	after.Value[Waiting] = 3
	sum = summary(start, 10, 56, 55)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if sum.Server.Breakdown != nil || !strings.Contains(sum.Server.Note, "requests waited, yet no queue time") {
		t.Fatalf("waited without a queue family: %+v, note %q", sum.Server.Breakdown, sum.Server.Note)
	}
	llama := read(t, "llamacpp-de3ff81.txt")
	later := read(t, "llamacpp-de3ff81.txt")
	llama.At, later.At = start, start.Add(time.Minute)
	sum = summary(start, 10, 56, 55)
	Explain(sum, Readings{Kind: LlamaCpp, Snaps: []Snapshot{llama, later}})
	if !strings.Contains(sum.Server.Note, "(llamacpp) exposes no queue-time series") {
		t.Fatalf("llama.cpp: note %q", sum.Server.Note)
	}
}

// A restart a long interval hides: no process start time, no reading
// between the kill and the return, so every counter only rose. The server
// counted fewer finished requests than the probe had answers (the issue's
// 31 against 34), or its metrics URL refused a connection between two
// readings: either withholds the window's figures.
func TestARestartCannotHideInALongInterval(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{Queue: hist(100, 100), E2E: hist(100, 100)}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(10 * time.Second), Kind: VLLM, Hist: map[Role]Hist{Queue: hist(131, 131), E2E: hist(131, 131)}, Value: map[Role]float64{}}
	sum := summary(start, 34, 100, 100)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if !strings.Contains(sum.Server.Err, "restarted or lost count: it counted 31 finished requests in the run's window, the probe had 34") || sum.Server.Breakdown != nil || sum.Server.Queue != nil {
		t.Fatalf("31 of 34: %+v", sum.Server)
	}
	// The last answer or two of a window may be recorded just after its
	// closing reading: not a restart.
	after.Hist[E2E], after.Hist[Queue] = hist(132, 132), hist(132, 132)
	sum = summary(start, 34, 100, 100)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if sum.Server.Err != "" {
		t.Fatalf("32 of 34: %+v", sum.Server)
	}
	sum = summary(start, 34, 100, 100)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}, Refused: []time.Time{start.Add(4 * time.Second)}})
	if !strings.Contains(sum.Server.Err, "refused connections between two readings") {
		t.Fatalf("refused in between: %+v", sum.Server)
	}
}

// llm-d-inference-sim's own pages, as captured: a fresh server shows
// gauges alone (no queue family, no start time); after 12 requests on its
// 4 slots its means say its TTFT starts at scheduling (12 x 20 ms, below
// its 57 ms mean queue), and the split reads it so.
func TestCapturedLLMDSimPages(t *testing.T) {
	fresh, after := read(t, "llmd-0.10.2-fresh.txt"), read(t, "llmd-0.10.2-after.txt")
	if fresh.Kind != VLLM || fresh.has(Queue) || fresh.has(E2E) || fresh.Started != 0 {
		t.Fatalf("fresh page: kind %q, queue family %v, start time %v", fresh.Kind, fresh.has(Queue), fresh.Started)
	}
	q := after.Hist[Queue]
	if q.Count != 8 || after.Hist[E2E].Count != 12 || after.Hist[TTFT].Count != 12 || after.Started != 0 {
		t.Fatalf("after 12 requests: queue %v of %v finished, TTFT %v", q.Count, after.Hist[E2E].Count, after.Hist[TTFT].Count)
	}
	start := time.Now()
	fresh.At, after.At = start, start.Add(5*time.Second)
	// A client TTFT of queue + prefill + 2 ms over the 12 requests.
	clientTTFT := 1000*(q.Sum+after.Hist[Prefill].Sum)/12 + 2
	sum := summary(start, 12, clientTTFT, clientTTFT)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{fresh, after}})
	b := sum.Server.Breakdown
	if b == nil || b.ServerTTFTClock != ClockScheduling || math.Abs(b.Mean.Elsewhere-2) > 1e-6 || math.Abs(b.Mean.Queue-1000*q.Sum/12) > 1e-6 {
		t.Fatalf("%+v (%s)", b, sum.Server.Note)
	}
}

// TensorRT-LLM's trtllm-serve and Dynamo's frontend, in the shapes their
// source names: each detected and read into the same roles. trtllm-serve
// has a queue histogram and is split (its clock read from its means);
// Dynamo's frontend has none and says so.
func TestKindsFromTheirSource(t *testing.T) {
	trt := read(t, "trtllm-serve.txt")
	if trt.Kind != TRTLLM || trt.Hist[Queue].Count != 40 || trt.Hist[Queue].Sum != 172.4 || trt.Hist[TTFT].Count != 40 || trt.Hist[E2E].Count != 40 {
		t.Fatalf("trtllm-serve: %+v", trt)
	}
	dyn := read(t, "dynamo-frontend.txt")
	if dyn.Kind != Dynamo || dyn.Value[Running] != 8 || dyn.Value[Waiting] != 32 || dyn.Value[PromptTokens] != 20480 || dyn.Hist[TTFT].Count != 40 || dyn.has(Queue) {
		t.Fatalf("dynamo frontend: %+v", dyn)
	}
	start := time.Now()
	zero := Snapshot{At: start, Kind: TRTLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}}
	trt.At = start.Add(time.Minute)
	sum := summary(start, 40, 4520, 4500) // the queue 4.31 s, the server's TTFT 4.51 s
	Explain(sum, Readings{Kind: TRTLLM, Snaps: []Snapshot{zero, trt}})
	if b := sum.Server.Breakdown; b == nil || b.ServerTTFTClock != ClockArrival || math.Abs(b.Mean.Queue-4310) > 1e-6 || math.Abs(*b.Mean.Outside-10) > 1e-6 {
		t.Fatalf("trtllm-serve split: %+v (%s)", b, sum.Server.Note)
	}
	zero.Kind, dyn.At = Dynamo, start.Add(time.Minute)
	sum = summary(start, 40, 4520, 4500)
	Explain(sum, Readings{Kind: Dynamo, Snaps: []Snapshot{zero, dyn}})
	if !strings.Contains(sum.Server.Note, "(dynamo) exposes no queue-time series") {
		t.Fatalf("dynamo: %q", sum.Server.Note)
	}
}

// A metrics URL that refuses a connection (the server down between two
// readings) is noted with its time, for the window it falls in.
func TestARefusedReadingIsNoted(t *testing.T) {
	addr, err := hostile.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	s := Start(New(Options{URL: "http://" + addr + "/metrics", Kind: VLLM, Interval: 100 * time.Millisecond}))
	rd := s.Stop()
	if len(rd.Refused) == 0 || rd.Failed != len(rd.Refused) {
		t.Fatalf("%d failed readings, %d noted as refused (%v)", rd.Failed, len(rd.Refused), rd.Err)
	}
}

// A reading between two stages (Mark) while the interval's reading is
// still on its way must not land out of order: a page served later holds
// higher counts, and one appended before an older page reads as a restart
// that never happened (a CI run under load lost a run's server figures
// so). The server here holds the interval's second reading until the
// next request comes in, or 300 ms pass.
func TestReadingsNeverOverlap(t *testing.T) {
	var asked atomic.Int64
	next := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := asked.Add(1)
		if n == 2 {
			select {
			case <-next:
				time.Sleep(50 * time.Millisecond) // the later page is on its way back first
			case <-time.After(300 * time.Millisecond):
			}
		}
		// Each page counts one more finished request than the one before.
		fmt.Fprintf(w, "# TYPE vllm:e2e_request_latency_seconds histogram\nvllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} %d\nvllm:e2e_request_latency_seconds_count %d\nvllm:e2e_request_latency_seconds_sum %d\n", n, n, n)
		w.(http.Flusher).Flush()
		if n > 2 {
			select {
			case next <- struct{}{}:
			default:
			}
		}
	}))
	defer srv.Close()
	smp := Start(New(Options{URL: srv.URL + "/metrics", Kind: VLLM, Interval: 50 * time.Millisecond}))
	for asked.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	smp.Mark() // while the interval's reading is held
	for asked.Load() < 4 {
		time.Sleep(time.Millisecond) // the held reading is answered, the interval goes on
	}
	rd := smp.Stop()
	if why := restart(rd.Snaps); why != "" {
		counts := make([]float64, len(rd.Snaps))
		for i, s := range rd.Snaps {
			counts[i] = s.Hist[E2E].Count
		}
		t.Fatalf("readings out of order (%s): counts %v", why, counts)
	}
}

// The split adds up. An overloaded server whose prefill mean is over its
// own TTFT mean by less than the slack, on an arrival clock (client TTFT
// 1,000 ms, queue 700, prefill 289, server TTFT 968): elsewhere is 11 ms,
// the front end's part -21 ms, within the slack, and outside 32 ms. It
// read "11 ms elsewhere (0.0 ms front end, 32 ms outside)": the front end
// set to 0 and nothing taken off outside. Now outside is what elsewhere
// holds; and a queue and prefill over the client's TTFT within the slack
// come off the prefill.
func TestTheSplitAddsUp(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(time.Minute), Kind: VLLM, Hist: map[Role]Hist{
		Queue: hist(40, 40*0.700), Prefill: hist(40, 40*0.289), TTFT: hist(40, 40*0.968), E2E: hist(40, 40*2),
	}, Value: map[Role]float64{}}
	sum := summary(start, 40, 1000, 990)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	b := sum.Server.Breakdown
	if b == nil {
		t.Fatalf("no split: %s", sum.Server.Note)
	}
	if why := b.Mean.AddsUp(); why != "" {
		t.Fatalf("%s: %+v", why, b.Mean)
	}
	if math.Abs(*b.Mean.Outside-11) > 1e-6 || *b.Mean.ServerOther != 0 || !strings.Contains(b.Verdict, "11 ms elsewhere (0.0 ms in the server's front end, 11 ms outside the server") {
		t.Fatalf("outside %v, front end %v: %q", *b.Mean.Outside, *b.Mean.ServerOther, b.Verdict)
	}
	// The server's queue and prefill over the client's TTFT by 8 ms,
	// within its 30 ms slack.
	after.Hist[Prefill], after.Hist[TTFT] = hist(40, 40*0.308), hist(40, 40*1.008)
	sum = summary(start, 40, 1000, 990)
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if b = sum.Server.Breakdown; b == nil || b.Mean.AddsUp() != "" || b.Mean.Elsewhere != 0 || math.Abs(*b.Mean.Prefill-300) > 1e-6 {
		t.Fatalf("over by 8 ms: %+v (%s)", b, sum.Server.Note)
	}
}
