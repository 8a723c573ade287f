package bench

import (
	"strings"
	"testing"
)

func TestQuietnessSentence(t *testing.T) {
	if (Quietness{}).String() != "" {
		t.Error("an unmeasured machine got a sentence")
	}
	q := Quietness{StealPercent: 12.34, SleepBefore: &Quantiles{P50: 80, P99: 350}, SleepAfter: &Quantiles{P50: 750, P99: 10030}}
	s := q.String()
	for _, want := range []string{"0.08 / 0.35 ms (p50 / p99) before", "0.75 / 10.03 ms after", "12.3% of the CPU time (steal)"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	q.StealPercent = -1
	if strings.Contains(q.String(), "(steal)") {
		t.Error("an unknown steal was reported")
	}
}

// A measurement under more steal than the threshold is taken again and
// the less disturbed kept, marked with the other's steal.
func TestLessDisturbed(t *testing.T) {
	never := func() (Replay, error) { t.Fatal("measured again under the threshold"); return Replay{}, nil }
	quiet := Replay{Requests: 1, Disturbance: Disturbance{StealPercent: 2}}
	if got, _ := lessDisturbed(5, quiet, never, func(float64) {}); got.Requests != 1 || got.Remeasured != 0 {
		t.Errorf("quiet: %+v", got)
	}
	busy := Replay{Requests: 1, Disturbance: Disturbance{StealPercent: 30}}
	better := func() (Replay, error) { return Replay{Requests: 2, Disturbance: Disturbance{StealPercent: 3}}, nil }
	if got, _ := lessDisturbed(5, busy, better, func(float64) {}); got.Requests != 2 || got.Remeasured != 30 {
		t.Errorf("busy, then quiet: %+v", got)
	}
	worse := func() (Replay, error) { return Replay{Requests: 2, Disturbance: Disturbance{StealPercent: 40}}, nil }
	if got, _ := lessDisturbed(5, busy, worse, func(float64) {}); got.Requests != 1 || got.Remeasured != 40 {
		t.Errorf("busy, then busier: %+v", got)
	}
}
