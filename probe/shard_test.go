package probe

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func TestOwnsSpreadsAndAgrees(t *testing.T) {
	for _, count := range []int{1, 2, 3, 5} {
		per := make([]int, count)
		for j := range 300 {
			key := fmt.Sprintf("profile-%d/endpoint", j)
			owners := 0
			for i := range count {
				if Owns(key, i, count) {
					owners++
					per[i]++
				}
			}
			if owners != 1 {
				t.Fatalf("%s has %d owners among %d shards", key, owners, count)
			}
		}
		for i, n := range per {
			if count > 1 && (n < 300/count/2 || n > 300/count*2) {
				t.Errorf("shard %d of %d owns %d of 300 jobs", i, count, n)
			}
		}
	}
}

func TestSplitAddsUp(t *testing.T) {
	p := Plan{Warmup: 7, Stages: []Stage{{Concurrency: 10, Requests: 101}, {Rate: 9, MaxConcurrency: 5, Duration: time.Minute},
		{Rate: 1, Offsets: []time.Duration{0, 1, 2, 3, 4, 5, 6}}}}
	for _, count := range []int{1, 2, 3, 4} {
		var conc, reqs, warm, maxc, offs int
		var rate float64
		for i := range count {
			s := p.Split(i, count)
			conc += s.Stages[0].Concurrency
			reqs += s.Stages[0].Requests
			warm += s.Warmup
			rate += s.Stages[1].Rate
			maxc += s.Stages[1].MaxConcurrency
			offs += len(s.Stages[2].Offsets)
		}
		if conc != 10 || reqs != 101 || warm != 7 || maxc != 5 || offs != 7 || math.Abs(rate-9) > 1e-9 {
			t.Errorf("%d shards: concurrency %d requests %d warmup %d max %d trace %d rate %v", count, conc, reqs, warm, maxc, offs, rate)
		}
	}
}

// A stage with less concurrency than replicas runs on as many replicas as
// it has slots: each share that holds requests can send them, and the
// shares add up. The demo's staircase over two replicas lost its
// concurrency-1 stage's second half before.
func TestSplitOfLowConcurrencyLosesNothing(t *testing.T) {
	p := Plan{Stages: []Stage{{Concurrency: 1, Requests: 8}, {Concurrency: 2, Requests: 5}, {Concurrency: 3, Requests: 7},
		{Rate: 3, MaxConcurrency: 1, Requests: 9}, {Rate: 4, MaxConcurrency: 2, Duration: time.Second}}}
	for _, count := range []int{2, 3, 4} {
		for i, whole := range p.Stages {
			reqs, conc, maxc := 0, 0, 0
			rate := 0.0
			for j := range count {
				st := p.Split(j, count).Stages[i]
				if st.Requests > 0 && st.Concurrency == 0 && st.Rate == 0 {
					t.Errorf("%d replicas, stage %d: replica %d holds %d requests and no slot to send them", count, i, j, st.Requests)
				}
				if st.Rate > 0 && whole.MaxConcurrency > 0 && st.MaxConcurrency == 0 {
					t.Errorf("%d replicas, stage %d: replica %d sends at %v/s with no cap", count, i, j, st.Rate)
				}
				reqs, conc, maxc, rate = reqs+st.Requests, conc+st.Concurrency, maxc+st.MaxConcurrency, rate+st.Rate
			}
			if reqs != whole.Requests || conc != whole.Concurrency || maxc != whole.MaxConcurrency || math.Abs(rate-whole.Rate) > 1e-9 {
				t.Errorf("%d replicas, stage %d: %d requests, concurrency %d, max %d, rate %v; want %+v", count, i, reqs, conc, maxc, rate, whole)
			}
		}
	}
}

// The levels a plan's results carry are known before it runs: every
// stage's and each step of a ramp, once each.
func TestPlanLevels(t *testing.T) {
	p := Plan{Stages: []Stage{{Concurrency: 1}, {Concurrency: 4}, {Concurrency: 1}, {Rate: 2, RampTo: 4, Duration: 10 * time.Second}}}
	want := []float64{1, 2, 2.2, 2.4, 2.6, 2.8, 3, 3.2, 3.4, 3.6, 3.8, 4}
	if got := p.Levels(); !slices.Equal(got, want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
	if got := (Plan{Search: &Search{}}).Levels(); got != nil {
		t.Fatalf("a search's levels %v before it runs", got)
	}
}
