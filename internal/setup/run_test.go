package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/tokenizer"
)

// workload.tokenizer makes every synthetic prompt exactly its drawn
// length in the tokenizer's tokens.
func TestTokenizerSizesPromptsExactly(t *testing.T) {
	dir := t.TempDir()
	tk, err := os.ReadFile("../../probe/tokenizer/testdata/tiny-bpe.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tk, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
endpoints: [{name: sim, simulator: {}}]
profiles:
  - name: p
    endpoints: [sim]
    workload:
      tokenizer: tokenizer.json
      input_tokens: {mean: 300, stddev: 40}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewRun(cfg.Profiles[0], &client.Endpoint{Name: "sim"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := tokenizer.Shared(filepath.Join(dir, "tokenizer.json"))
	differs := false
	for range 20 {
		p := run.Workload.Next()
		n, err := h.Count(p.Text)
		if err != nil || n != p.InputTokens {
			t.Fatalf("prompt says %d tokens, the tokenizer counts %d (%v)", p.InputTokens, n, err)
		}
		differs = differs || n != 300
	}
	if !differs {
		t.Error("every prompt was 300 tokens: the lengths' spread was lost")
	}
}

// A profile without a failure block gets the default policy; fields it
// sets replace only themselves, and 0 turns a part off.
func TestFailurePolicyFromTheProfile(t *testing.T) {
	cfg, err := Parse("failure.yaml", []byte(`
endpoints: [{name: e, base_url: "http://127.0.0.1:1/v1", model: m}]
profiles:
  - {name: plain, endpoints: [e]}
  - name: tuned
    endpoints: [e]
    failure:
      backoff: {base: 0s}
      retry_after_max: 2m
      abort: {error_ratio: 0.9}
      schedule_backoff_max: 10m
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := FailureOf(&cfg.Profile("plain").Failure, false); got != probe.DefaultFailure() {
		t.Errorf("no failure block: %+v, want the default", got)
	}
	if got := ScheduleBackoffMax(&cfg.Profile("plain").Failure); got != DefaultScheduleBackoffMax {
		t.Errorf("schedule backoff cap %s", got)
	}
	want := probe.DefaultFailure()
	want.BackoffBase, want.RetryAfterMax, want.AbortErrorRatio = 0, 2*time.Minute, 0.9
	tuned := &cfg.Profile("tuned").Failure
	if got := FailureOf(tuned, false); got != want {
		t.Errorf("tuned: %+v, want %+v", got, want)
	}
	if got := ScheduleBackoffMax(tuned); got != 10*time.Minute {
		t.Errorf("tuned schedule backoff cap %s", got)
	}
}

// A search becomes a plan that searches: its bounds, its budget of stage
// slots, and each step's length and arrival process from the load.
func TestSearchPlan(t *testing.T) {
	cfg, err := Parse("search.yaml", []byte(`
endpoints: [{name: e, base_url: "http://127.0.0.1:1/v1", model: m}]
profiles:
  - name: rate
    endpoints: [e]
    load: {search: {rate: [0.5, 20], steps: 6}, duration: 30s, max_concurrency: 64}
    slo: {ttft: 1s, objective: 0.95}
`))
	if err != nil {
		t.Fatal(err)
	}
	plan := PlanOf(&cfg.Profile("rate").Load)
	s := plan.Search
	if s == nil || !s.Rate || s.Min != 0.5 || s.Max != 20 || s.Steps != 6 || s.Precision != 0.1 || len(plan.Stages) != 6 {
		t.Fatalf("plan %+v, search %+v", plan, s)
	}
	if st := s.Step; st.Duration != 30*time.Second || st.Arrival != "poisson" || st.MaxConcurrency != 64 || st.Concurrency != 0 {
		t.Fatalf("step %+v", st)
	}
	if got := plan.String(); !strings.Contains(got, "search of request rate from 0.5 to 20") {
		t.Fatalf("plan reads %q", got)
	}
}

// checks.abort reaches the failure policy; without it a wrong answer is
// not a failure for it.
func TestChecksAbortMakesWrongAnswersFailures(t *testing.T) {
	for _, abort := range []bool{false, true} {
		p := &config.Profile{Name: "p", Checks: config.Checks{Abort: abort}}
		run, err := NewRun(p, &client.Endpoint{Name: "e", Model: "m"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if run.Failure.WrongAnswersFail != abort {
			t.Errorf("checks.abort %v: the policy's WrongAnswersFail is %v", abort, run.Failure.WrongAnswersFail)
		}
	}
}
