package probe

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tokenprobe/tokenprobe/internal/hostile"
	"github.com/tokenprobe/tokenprobe/probe/check"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/sse"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// A 20 MB JSON answer under json_schema, json and a regex, at concurrency
// 4: each is a wrong answer "too large to check", with its timing kept,
// and the heap stays far under what holding the answers as values took
// (40 to 70 times their size: 5 MB of JSON took the process to 362 MB).
func TestAnswerChecksReadWithinTheirBudget(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("a.json", map[string]any{"type": "array"}); err != nil {
		t.Fatal(err)
	}
	schema, err := compiler.Compile("a.json")
	if err != nil {
		t.Fatal(err)
	}
	run := runAgainst(t, h.URL(hostile.BigAnswer), Plan{Stages: []Stage{{Concurrency: 4, Requests: 8}}}, DefaultFailure())
	run.Endpoint.Timeout = 2 * time.Minute
	run.Checks = check.Set{Model: check.ModelOff, JSON: true, Schema: schema, MaxAnswerBytes: check.DefaultMaxAnswerBytes}
	rec := &recorder{}
	run.Sinks = []Sink{rec}

	var sum stats.Summary
	grew := heapGrowth(func() { sum, err = run.Execute(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.WrongAnswers != 8 {
		t.Fatalf("%d wrong answers of 8 (%d successes, errors %v)", sum.WrongAnswers, sum.Success, sum.ByReason)
	}
	for _, r := range rec.seen {
		if r.Outcome != result.WrongAnswer || !strings.Contains(r.Err, "too large to check") || !r.HasTTFT() || r.E2E == 0 {
			t.Fatalf("outcome %v, %q, TTFT %v, latency %v; want a wrong answer too large to check, its timing kept", r.Outcome, r.Err, r.TTFT, r.E2E)
		}
	}
	// Four answers kept to their budget are 4 MiB; the client's buffers
	// and the run's own take some more. Holding them as values took GBs.
	t.Logf("heap grew by %.1f MB at its peak", float64(grew)/1e6)
	if grew > 64<<20 {
		t.Errorf("the heap grew by %.1f MB for four answers checked within %d bytes each", float64(grew)/1e6, check.DefaultMaxAnswerBytes)
	}
}

// heapGrowth runs f and returns how far the heap grew over what it was
// before, at its peak, sampled every 5 ms.
func heapGrowth(f func()) int64 {
	runtime.GC()
	base := heapBytes()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			peak.Store(max(peak.Load(), heapBytes()))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	return int64(peak.Load()) - int64(base)
}

// heapBytes is the heap's live and not-yet-swept objects, from
// runtime/metrics.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A tool call whose arguments are 50 MB, at concurrency 4, under a tool
// check with a parameters schema: each is a wrong answer "too large to
// check", its timing kept, and the heap grows by far less than one
// request's arguments: the client keeps no more of an answer than the
// checks' bound.
func TestToolArgumentsReadWithinTheirBudget(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	compiler := jsonschema.NewCompiler()
	if err := compiler.AddResource("p.json", map[string]any{"type": "object"}); err != nil {
		t.Fatal(err)
	}
	schema, err := compiler.Compile("p.json")
	if err != nil {
		t.Fatal(err)
	}
	run := runAgainst(t, h.URL(hostile.BigToolArgs), Plan{Stages: []Stage{{Concurrency: 4, Requests: 4}}}, DefaultFailure())
	run.Workload = workload.NewSynthetic(workload.Lengths{Mean: 10}, workload.Lengths{Mean: 100}, true, 1) // room for 200 argument deltas
	run.Endpoint.Timeout = 2 * time.Minute
	run.Checks = check.Set{Model: check.ModelOff, Tools: map[string]*jsonschema.Schema{"lookup": schema}, MaxAnswerBytes: check.DefaultMaxAnswerBytes}
	rec := &recorder{}
	run.Sinks = []Sink{rec}

	var sum stats.Summary
	grew := heapGrowth(func() { sum, err = run.Execute(context.Background()) })
	if err != nil {
		t.Fatalf("%v: %+v", err, sum.Failures)
	}
	if sum.WrongAnswers != 4 {
		t.Fatalf("%d wrong answers of 4 (%d successes, errors %v, %+v)", sum.WrongAnswers, sum.Success, sum.ByReason, sum.Failures)
	}
	for _, r := range rec.seen {
		if r.Outcome != result.WrongAnswer || !strings.Contains(r.Err, "too large to check") || !r.HasTTFT() || r.E2E == 0 {
			t.Fatalf("outcome %v, %q; want a wrong answer too large to check, its timing kept", r.Outcome, r.Err)
		}
	}
	t.Logf("heap grew by %.1f MB at its peak for 4 x %d MB of arguments", float64(grew)/1e6, hostile.BigToolArgsBytes>>20)
	if grew > 64<<20 {
		t.Errorf("the heap grew by %.1f MB for four tool calls checked within %d bytes each", float64(grew)/1e6, check.DefaultMaxAnswerBytes)
	}
}

// An embeddings answer of one 60 MB vector, at concurrency 4: each is
// measured and its vector counted, and the heap grows by far less than
// one answer: the vector is counted as it streams, not read whole (which
// holds up to twice the body, 657 MB at this concurrency).
func TestBigVectorsReadAsTheyStream(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	run := runAgainst(t, h.URL(hostile.BigVector), Plan{Stages: []Stage{{Concurrency: 4, Requests: 4}}}, DefaultFailure())
	run.Endpoint.API = openai.Embeddings
	run.Endpoint.Timeout = 2 * time.Minute
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	var sum stats.Summary
	grew := heapGrowth(func() { sum, err = run.Execute(context.Background()) })
	if err != nil || sum.Success != 4 {
		t.Fatalf("%v: %d successes of 4, %+v", err, sum.Success, sum.Failures)
	}
	for _, r := range rec.seen {
		if r.Vectors != 1 || r.Dimensions != hostile.BigVectorDimensions || r.E2E == 0 {
			t.Fatalf("%d vectors of %d dimensions in %v; want 1 of %d", r.Vectors, r.Dimensions, r.E2E, hostile.BigVectorDimensions)
		}
	}
	t.Logf("heap grew by %.1f MB at its peak for 4 x %d MB of vectors", float64(grew)/1e6, hostile.BigVectorBytes>>20)
	if grew > 16<<20 {
		t.Errorf("the heap grew by %.1f MB for four vectors counted as they stream", float64(grew)/1e6)
	}
}

// An SSE line that never ends, at concurrency 4: each request is a
// stream error at the line limit (1 MiB), and the heap grows by the
// lines held to it, not by what the server goes on sending. The reader
// gathers such a line from the connection's buffer, one view at a time.
func TestAnEndlessLineIsCutAtTheLimit(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	run := runAgainst(t, h.URL(hostile.EndlessLine), Plan{Stages: []Stage{{Concurrency: 4, Requests: 4}}}, Failure{})
	run.Endpoint.Timeout = 2 * time.Minute
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	var sum stats.Summary
	grew := heapGrowth(func() { sum, _ = run.Execute(context.Background()) })
	if sum.ByReason["stream"] != 4 {
		t.Fatalf("errors %v, want 4 stream errors", sum.ByReason)
	}
	for _, r := range rec.seen {
		if !strings.Contains(r.Err, sse.ErrLineTooLong.Error()) {
			t.Fatalf("error %q, want the line over its limit", r.Err)
		}
	}
	t.Logf("heap grew by %.1f MB at its peak", float64(grew)/1e6)
	// The peak counts garbage not yet swept (each line's buffer doubles
	// its way to the limit), so it follows the collector's timing: 3.4 to
	// 15.1 MB in 16 runs beside four busy loops, 19.9 MB once in .ci/run's
	// busy pass. Without the line limit each request holds the 64 MiB
	// body limit: 256 MiB.
	if grew > 32<<20 {
		t.Errorf("the heap grew by %.1f MB for four lines cut at %d bytes", float64(grew)/1e6, sse.DefaultMaxLineBytes)
	}
}

// A 60 MB SSE stream in answer to an embeddings request (which is not
// streamed) ends at its first byte, not "{": a stream error, nothing
// held. Read whole first, it took the process to 938 MB.
func TestAStreamAnsweringEmbeddingsIsNotHeld(t *testing.T) {
	h, err := hostile.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	run := runAgainst(t, h.URL(hostile.ManyChunks), Plan{Stages: []Stage{{Concurrency: 4, Requests: 4}}}, Failure{})
	run.Endpoint.API = openai.Embeddings
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	var sum stats.Summary
	grew := heapGrowth(func() { sum, _ = run.Execute(context.Background()) })
	if sum.ByReason["stream"] != 4 {
		t.Fatalf("errors %v, want 4 stream errors", sum.ByReason)
	}
	for _, r := range rec.seen {
		if !strings.Contains(r.Err, "malformed") {
			t.Fatalf("error %q, want the answer called malformed", r.Err)
		}
	}
	t.Logf("heap grew by %.1f MB at its peak", float64(grew)/1e6)
	if grew > 16<<20 {
		t.Errorf("the heap grew by %.1f MB for four streams refused at their first byte", float64(grew)/1e6)
	}
}
