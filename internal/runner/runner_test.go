package runner

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/servermetrics"
	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// lifecycle records what a RunSink hears.
type lifecycle struct {
	started, observed int
	finished          []probe.Finished
}

func (l *lifecycle) Observe(*result.Request, slo.Verdict)       { l.observed++ }
func (l *lifecycle) RunStarted(*probe.Run)                      { l.started++ }
func (l *lifecycle) RunFinished(_ *probe.Run, f probe.Finished) { l.finished = append(l.finished, f) }

// plain is a Sink that hears requests only.
type plain struct{ observed int }

func (p *plain) Observe(*result.Request, slo.Verdict) { p.observed++ }

func newRun(t *testing.T, objective float64, sinks ...probe.Sink) *probe.Run {
	// A 200 ms prefill against a 50 ms TTFT: every request misses by far
	// more than a busy machine's stalls of the probe could explain.
	s, err := sim.Start("127.0.0.1:0", sim.Config{Slots: 4, PrefillBase: 200 * time.Millisecond, DecodeBase: time.Millisecond, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &probe.Run{
		Profile:  "p",
		Plan:     probe.Plan{Stages: []probe.Stage{{Concurrency: 2, Requests: 6}}},
		Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 4}, true, 1),
		SLO:      slo.Set{Thresholds: []slo.Threshold{{Kind: slo.TTFT, Max: 50 * time.Millisecond}}, Objective: objective},
		Endpoint: &client.Endpoint{Name: "sim", BaseURL: s.URL(), API: openai.Chat, Model: "m", Timeout: 10 * time.Second},
		Client:   client.New(client.Options{}),
		Sinks:    sinks,
	}
}

// Every RunSink hears the start and the end, with the verdict the caller
// gets; a plain Sink hears the requests only.
func TestExecuteTellsEveryRunSink(t *testing.T) {
	l, p := &lifecycle{}, &plain{}
	// A TTFT objective of 50 ms that half the requests must meet, each
	// missing it by 150 ms: failed.
	f := Execute(context.Background(), newRun(t, 0.5, l, p), Options{})
	if f.Err != nil || f.Verdict != probe.Failed || f.Summary == nil || f.Summary.Requests != 6 {
		t.Fatalf("finished %+v", f)
	}
	if l.started != 1 || len(l.finished) != 1 || l.finished[0].Verdict != probe.Failed || l.observed != 6 || p.observed != 6 {
		t.Fatalf("run sink heard %+v, plain sink %d requests", l, p.observed)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if f := Execute(ctx, newRun(t, 0), Options{}); f.Verdict != probe.Cancelled {
		t.Fatalf("a cancelled run: %v (%v)", f.Verdict, f.Err)
	}
}

// With a GPU source the summary says what the GPUs did, even when the
// source is down.
func TestExecuteSamplesTheGPUs(t *testing.T) {
	f := Execute(context.Background(), newRun(t, 0), Options{GPU: gpu.Open("", nil), GPUInterval: 10 * time.Millisecond})
	if f.Summary.GPU == nil {
		t.Fatal("no GPU figures in the summary")
	}
}

// One function drives a run: no package but runner calls a probe.Run's
// Execute (the daemon, `tokenprobe run` and the benchmark harness all go
// through runner.Execute).
func TestOnlyRunnerExecutesRuns(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "deploy" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "../../probe" || dir == "../../internal/runner" {
			return nil // the engine itself, and runner
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				// probe.Run's Execute takes the context alone; a template's
				// Execute takes a writer and data.
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Execute" && len(call.Args) == 1 {
					if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "runner" {
						t.Errorf("%s: a run executed outside runner.Execute", fset.Position(call.Pos()))
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Against the simulator at eight times its slots, the server's queue
// explains the client's TTFT: the breakdown's queue is the simulator's own
// mean queue time over all requests within 2%, the rest is small and never
// negative, and the verdict names the queue. With one request at a time it
// names the prefill and a queue of 0. Each on a fresh simulator, which
// counts as vLLM does and, again, with the habits of servers that count
// otherwise: series created at their first observation, and the queue
// time observed only for requests that waited.
func TestExecuteExplainsTTFTWithTheServersQueue(t *testing.T) {
	for _, habits := range []sim.MetricsHabits{{}, {Lazy: true, QueueOnlyWaited: true}} {
		for _, c := range []struct {
			concurrency, requests int
			dominant              string
		}{{16, 64, "queue"}, {1, 12, "prefill"}} {
			name := fmt.Sprintf("concurrency %d, %+v", c.concurrency, habits)
			// The figures are timings of a loaded machine: an attempt that
			// a busy neighbour disturbed is tried again.
			timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
				s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", Slots: 2, PrefillBase: 20 * time.Millisecond, DecodeBase: 5 * time.Millisecond, Seed: 1, Metrics: habits})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				run := &probe.Run{
					Profile:  "p",
					Plan:     probe.Plan{Stages: []probe.Stage{{Concurrency: c.concurrency, Requests: c.requests}}},
					Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 20}, true, 1),
					Endpoint: &client.Endpoint{Name: "sim", BaseURL: s.URL(), API: openai.Chat, Model: "m", Timeout: 30 * time.Second},
					Client:   client.New(client.Options{}),
				}
				src := servermetrics.New(servermetrics.Options{URL: "http://" + s.Addr() + "/metrics", Model: "m", Interval: 100 * time.Millisecond})
				f := Execute(context.Background(), run, Options{Server: src})
				sv := f.Summary.Server
				if f.Err != nil || sv == nil || sv.Breakdown == nil {
					t.Fatalf("%s: %v, server %+v", name, f.Err, sv)
				}
				b := sv.Breakdown
				total, n := s.QueueTime()
				truth := float64(total) / float64(time.Millisecond) / float64(n)
				t.Logf("%s: %s (the simulator's queue: %.1f ms mean)", name, b.Verdict, truth)
				if sv.Kind != "vllm" || sv.Population != float64(c.requests) {
					t.Errorf("%s: kind %q, the server finished %v requests of %d", name, sv.Kind, sv.Population, c.requests)
				}
				if c.dominant == "queue" && math.Abs(b.Mean.Queue-truth) > 0.02*truth {
					a.Errorf("%s: queue %.1f ms, the simulator's %.1f ms: more than 2%% apart", name, b.Mean.Queue, truth)
				}
				if c.dominant == "prefill" && b.Mean.Queue > 1 {
					a.Errorf("%s: queue %.1f ms with one request at a time", name, b.Mean.Queue)
				}
				// Elsewhere is the client's own share: a few tenths of a millisecond
				// on an idle machine (the 5 ms), more where its goroutines
				// wait for a busy core. Never negative.
				bound := max(10, 0.05*b.Mean.TTFT)
				if rest := b.Mean.Elsewhere; rest < 0 || rest > bound {
					a.Errorf("%s: %.1f ms of the client's %.1f ms TTFT outside the server's queue and prefill", name, rest, b.Mean.TTFT)
				}
				if b.Mean.Outside == nil || *b.Mean.Outside > bound {
					a.Errorf("%s: outside the server %v ms, want under %.0f (the simulator's TTFT counts from arrival)", name, b.Mean.Outside, bound)
				}
				if b.Dominant != c.dominant {
					a.Errorf("%s: %q dominates, want %q: %s", name, b.Dominant, c.dominant, b.Verdict)
				}
				if c.dominant == "queue" && (sv.Waiting == nil || sv.Waiting.Peak < 8 || sv.Running.Peak != 2) {
					a.Errorf("%s: waiting %+v running %+v: want the queue and both slots seen", name, sv.Waiting, sv.Running)
				}
			})
		}
	}
}

// A server restarted in the middle of a run, fresh (no request before the
// run) or warm, and with lazy series or not: every server figure is
// withheld and the report says it restarted.
func TestExecuteWithholdsTheFiguresOfARestartedServer(t *testing.T) {
	for _, c := range []struct {
		warm bool
		lazy bool
	}{{false, true}, {true, true}, {false, false}, {true, false}} {
		name := fmt.Sprintf("warm %v, lazy %v", c.warm, c.lazy)
		cfg := sim.Config{Model: "m", Slots: 2, PrefillBase: 20 * time.Millisecond, DecodeBase: 5 * time.Millisecond, Metrics: sim.MetricsHabits{Lazy: c.lazy}}
		first, err := sim.NewHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var current atomic.Pointer[sim.Handler]
		current.Store(first)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { current.Load().ServeHTTP(w, r) }))
		defer srv.Close()
		ep := &client.Endpoint{Name: "sim", BaseURL: srv.URL + "/v1", API: openai.Chat, Model: "m", Timeout: 30 * time.Second}
		newRun := func(requests int) *probe.Run {
			return &probe.Run{
				Profile:  "p",
				Plan:     probe.Plan{Stages: []probe.Stage{{Concurrency: 2, Requests: requests}}},
				Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 20}, true, 1),
				Endpoint: ep, Client: client.New(client.Options{}),
			}
		}
		run := newRun(40)
		if c.warm {
			if f := Execute(context.Background(), newRun(20), Options{}); f.Err != nil {
				t.Fatal(f.Err)
			}
		}
		// The restart comes once a quarter of the run's requests are served.
		go func() {
			for {
				if _, _, served, _ := first.Stats(); served >= 10+map[bool]uint64{true: 20}[c.warm] {
					break
				}
				time.Sleep(time.Millisecond)
			}
			second, _ := sim.NewHandler(cfg)
			current.Store(second)
		}()
		src := servermetrics.New(servermetrics.Options{URL: srv.URL + "/metrics", Model: "m", Interval: 50 * time.Millisecond})
		f := Execute(context.Background(), run, Options{Server: src})
		sv := f.Summary.Server
		if f.Err != nil || sv == nil {
			t.Fatalf("%s: %v", name, f.Err)
		}
		if !strings.Contains(sv.Err, "restarted") || sv.Breakdown != nil || sv.Queue != nil || sv.ITL != nil || sv.PromptTokens != nil {
			t.Errorf("%s: %+v", name, sv)
		}
	}
}

// A 1/4/8/16 sweep on a fresh simulator that creates its series at their
// first observation and observes only the queue times of requests that
// waited: every level has the server's queue, 0 where nothing waited, and
// the knee's levels a queue of their own.
func TestExecuteSplitsEveryLevelOfASweepOnAFreshServer(t *testing.T) {
	timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
		s, err := sim.Start("127.0.0.1:0", sim.Config{Model: "m", Slots: 4, PrefillBase: 20 * time.Millisecond, DecodeBase: 5 * time.Millisecond,
			Metrics: sim.MetricsHabits{Lazy: true, QueueOnlyWaited: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var stages []probe.Stage
		for _, c := range []int{1, 4, 8, 16} {
			stages = append(stages, probe.Stage{Concurrency: c, Requests: 4 * c})
		}
		run := &probe.Run{
			Profile:  "sweep",
			Plan:     probe.Plan{Stages: stages},
			Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 20}, true, 1),
			Endpoint: &client.Endpoint{Name: "sim", BaseURL: s.URL(), API: openai.Chat, Model: "m", Timeout: 30 * time.Second},
			Client:   client.New(client.Options{}),
		}
		src := servermetrics.New(servermetrics.Options{URL: "http://" + s.Addr() + "/metrics", Model: "m", Interval: 100 * time.Millisecond})
		f := Execute(context.Background(), run, Options{Server: src})
		if f.Err != nil || len(f.Summary.Stages) != 4 {
			t.Fatalf("%v, %d stages", f.Err, len(f.Summary.Stages))
		}
		for i, st := range f.Summary.Stages {
			sv := st.Server
			if sv == nil || sv.Queue == nil || sv.Breakdown == nil {
				t.Errorf("level %g: server %+v", st.Level, sv)
				continue
			}
			t.Logf("level %g: %s", st.Level, sv.Breakdown.Verdict)
			if i < 2 && sv.Queue.Mean > 1 || i == 3 && sv.Queue.Mean < 20 {
				a.Errorf("level %g: queue mean %.1f ms", st.Level, sv.Queue.Mean)
			}
			// Elsewhere is the client's own share: on a busy machine its
			// goroutines wait for a core, so it is bounded as the run it
			// sweeps, never negative.
			if e := sv.Breakdown.Mean.Elsewhere; e < 0 || e > max(10, 0.05*sv.Breakdown.Mean.TTFT) {
				a.Errorf("level %g: %.1f ms elsewhere", st.Level, sv.Breakdown.Mean.Elsewhere)
			}
		}
	})
}

// Two replicas behind no load balancer (base_urls), each with its own
// metrics page: the run's figures are the two pooled as one server (its
// finished requests the probe's, none withheld as a restart), each
// replica's beside them against the requests the probe sent it (half
// each), and the figures a sweep's stages read are pooled too. With one
// replica's page alone, every run was withheld ("96 against 192").
func TestExecuteSplitsTwoReplicasAndPoolsThem(t *testing.T) {
	cfg := sim.Config{Model: "m", Slots: 2, PrefillBase: 20 * time.Millisecond, DecodeBase: 2 * time.Millisecond}
	var urls []string
	var replicas []servermetrics.Replica
	for range 2 {
		h, err := sim.NewHandler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		urls = append(urls, srv.URL+"/v1")
		replicas = append(replicas, servermetrics.Replica{
			Options: servermetrics.Options{URL: srv.URL + "/metrics", Model: "m", Interval: 50 * time.Millisecond}, BaseURL: srv.URL + "/v1"})
	}
	ep := &client.Endpoint{Name: "pair", BaseURLs: urls, API: openai.Chat, Model: "m", Timeout: 30 * time.Second}
	run := &probe.Run{
		Profile:  "p",
		Plan:     probe.Plan{Stages: []probe.Stage{{Concurrency: 2, Requests: 24}, {Concurrency: 4, Requests: 24}}},
		Workload: workload.NewSynthetic(workload.Lengths{Mean: 8}, workload.Lengths{Mean: 10}, true, 1),
		Endpoint: ep, Client: client.New(client.Options{}),
	}
	src := servermetrics.NewReplicas(replicas)
	defer src.Close()
	f := Execute(context.Background(), run, Options{Server: src})
	sv := f.Summary.Server
	if f.Err != nil || sv == nil {
		t.Fatalf("%v", f.Err)
	}
	if sv.Err != "" || sv.Population != float64(f.Summary.Success) || sv.Breakdown == nil {
		t.Fatalf("pooled: err %q, population %v of the probe's %d answers, breakdown %v (%s)", sv.Err, sv.Population, f.Summary.Success, sv.Breakdown, sv.Note)
	}
	if len(sv.Replicas) != 2 {
		t.Fatalf("%d replicas' figures", len(sv.Replicas))
	}
	for i, r := range sv.Replicas {
		if r.Err != "" || r.Population != float64(f.Summary.Success)/2 || r.Breakdown == nil || r.Replica != urls[i] {
			t.Errorf("replica %d (%s): err %q, population %v of the probe's %d, breakdown %v (%s)", i+1, r.Replica, r.Err, r.Population, f.Summary.Success, r.Breakdown, r.Note)
		}
	}
	for _, st := range f.Summary.Stages {
		if st.Server == nil || st.Server.Err != "" || st.Server.Population != float64(st.Success) {
			t.Errorf("stage at %g: %+v", st.Level, st.Server)
		}
	}
}
