package probe

import (
	"fmt"
	"math"
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
