package servermetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
)

// A restart between two readings of a long interval, after the old
// process answered two requests: the server counted two fewer finished
// requests than the probe's answers, within the count's margin, and
// exports no start time. The probe's own requests refused by the server's
// host and port between the readings show it; refused elsewhere, or
// before the window, they do not.
func TestTheProbesRefusedConnectsShowARestart(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{Queue: hist(0, 0), E2E: hist(0, 0)}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(10 * time.Second), Kind: VLLM, Hist: map[Role]Hist{Queue: hist(20, 2), E2E: hist(20, 20)}, Value: map[Role]float64{}}
	explain := func(refused ...time.Time) string {
		sum := summary(start, 22, 100, 100)
		Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}, ProbeRefused: refused})
		return sum.Server.Err
	}
	if why := explain(); why != "" {
		t.Fatalf("without the refused connects, two answers short is within the margin; got %q", why)
	}
	if why := explain(start.Add(-time.Second)); why != "" {
		t.Fatalf("a refused connect before the window: %q", why)
	}
	if why := explain(start.Add(4 * time.Second)); !strings.Contains(why, "restarted") || !strings.Contains(why, "refused the probe's own requests") {
		t.Fatalf("a refused connect between the readings: %q", why)
	}
}

// The sampler takes only what says the server's own host and port refused
// a connection: another host's refusal, a reset, a timeout and an answer
// are not evidence of its restart.
func TestTheSamplerKeepsOnlyTheServersRefusals(t *testing.T) {
	s := &Sampler{hostPort: hostPort("http://127.0.0.1:8000/metrics")}
	at := time.Now()
	refused := "dial tcp 127.0.0.1:8000: connect: connection refused"
	for _, r := range []result.Request{
		{Outcome: result.Error, Reason: result.ReasonConnect, URL: "http://127.0.0.1:8000/v1", Err: refused, End: at},
		{Outcome: result.Error, Reason: result.ReasonConnect, URL: "http://127.0.0.1:8001/v1", Err: refused, End: at.Add(1)},
		{Outcome: result.Error, Reason: result.ReasonConnect, URL: "http://127.0.0.1:8000/v1", Err: "read: connection reset by peer", End: at.Add(2)},
		{Outcome: result.Error, Reason: result.ReasonTimeout, URL: "http://127.0.0.1:8000/v1", Err: "timeout", End: at.Add(3)},
		{Outcome: result.Success, URL: "http://127.0.0.1:8000/v1", End: at.Add(4)},
	} {
		s.Observe(&r, slo.Verdict{})
	}
	if got := s.rd.ProbeRefused; len(got) != 1 || !got[0].Equal(at) {
		t.Fatalf("kept %v, want the one refusal at the server's address", got)
	}
	if hostPort("https://api.example.com/v1") != "api.example.com:443" || hostPort("http://[::1]/x") != "[::1]:80" || hostPort("::bad") != "" {
		t.Fatal("hostPort")
	}
}

// Wrong answers were sent and served: a run whose every answer failed a
// check is not "the probe sent 0" beside the server's count, and its
// answers count against the server's finished requests.
func TestWrongAnswersWereSent(t *testing.T) {
	start := time.Now()
	zero := Snapshot{At: start, Kind: VLLM, Hist: map[Role]Hist{Queue: hist(0, 0), E2E: hist(0, 0)}, Value: map[Role]float64{}}
	after := Snapshot{At: start.Add(10 * time.Second), Kind: VLLM, Hist: map[Role]Hist{Queue: hist(40, 4), Prefill: hist(40, 2), E2E: hist(40, 40)}, Value: map[Role]float64{}}
	sum := summary(start, 40, 200, 200)
	sum.Success, sum.WrongAnswers = 0, 40
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if sv := sum.Server; sv.Err != "" || strings.Contains(sv.Note, "sent 0") || sv.Breakdown == nil {
		t.Fatalf("40 wrong answers: err %q, note %q", sv.Err, sv.Note)
	}
	sum = summary(start, 60, 200, 200)
	sum.Success, sum.WrongAnswers = 0, 60
	Explain(sum, Readings{Kind: VLLM, Snaps: []Snapshot{zero, after}})
	if !strings.Contains(sum.Server.Err, "the probe had 60 answers") {
		t.Fatalf("60 wrong answers, 40 finished: %q", sum.Server.Err)
	}
}
