package probe

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/sim"
	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/load"
)

// The ramp's schedule solves integral(rate) = u: with constant arrivals a
// ramp from 10 to 30 requests/s over 10 s sends 200 requests, more of them
// late in the ramp than early.
func TestRampTimeFollowsTheRate(t *testing.T) {
	st := Stage{Rate: 10, RampTo: 30, Duration: 10 * time.Second}
	if at, ok := rampTime(st, 100); !ok || math.Abs(at.Seconds()-(-10+math.Sqrt(500))/2) > 1e-6 {
		t.Errorf("u=100 at %v, want 6.18 s (t^2 + 10t = 100)", at)
	}
	gaps, _ := load.NewArrivals("constant", 1, 0, 1)
	var u float64
	var firstHalf, secondHalf int
	for i := 0; ; i++ {
		if i > 0 {
			u += gaps.Next().Seconds()
		}
		at, ok := rampTime(st, u)
		if !ok {
			break
		}
		if at < 5*time.Second {
			firstHalf++
		} else {
			secondHalf++
		}
	}
	// Expected: 10*5 + 20*5/4 = 75 in the first half, 125 in the second.
	if total := firstHalf + secondHalf; total < 200 || total > 201 || math.Abs(float64(firstHalf-75)) > 1 {
		t.Errorf("%d then %d arrivals, want 75 then 125 (200 in all)", firstHalf, secondHalf)
	}
	// A flat "ramp" is the constant rate; a ramp down ends when it must.
	if at, _ := rampTime(Stage{Rate: 4, RampTo: 4, Duration: 10 * time.Second}, 8); at != 2*time.Second {
		t.Errorf("flat ramp: u=8 at %v, want 2s", at)
	}
	if _, ok := rampTime(Stage{Rate: 10, RampTo: 0.5, Duration: 10 * time.Second}, 200); ok {
		t.Error("a ramp from 10 to 0.5 over 10 s cannot reach 200 arrivals")
	}
}

func TestRampLevels(t *testing.T) {
	st := Stage{Concurrency: 1, RampTo: 11, Duration: 10 * time.Second}
	if got := st.LevelAt(5 * time.Second); got != 6 {
		t.Errorf("LevelAt(5s) = %v, want 6", got)
	}
	if got := st.LevelAt(time.Minute); got != 11 {
		t.Errorf("LevelAt past the end = %v, want 11", got)
	}
	var levels []float64
	for ms := 0; ms <= 10_000; ms += 50 {
		levels = append(levels, st.reportedLevel(time.Duration(ms)*time.Millisecond))
	}
	levels = slices.Compact(levels)
	if want := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(levels, want) {
		t.Errorf("reported levels %v, want %v: one per tenth of the ramp", levels, want)
	}
	rate := Stage{Rate: 2, RampTo: 30, Duration: time.Minute}
	if got := rate.reportedLevel(13 * time.Second); got != 7.6 {
		t.Errorf("rate ramp level at 13 s = %v, want 7.6 (2 + 28 x 0.2, to the hundredth)", got)
	}
	if s := st.String(); s != "concurrency 1 ramping to 11 for 10s" {
		t.Errorf("String() = %q", s)
	}
}

// A concurrency ramp against the simulator: requests in flight climb with
// the ramp and every result carries the level in force when it was sent.
func TestClosedRampClimbs(t *testing.T) {
	// Steps and levels hold on a busy machine too; how many are in flight
	// when is real time, checked over up to two runs.
	timingtest.Retry(t, 2, func(a *timingtest.Attempt) {
		plan := Plan{Stages: []Stage{{Concurrency: 1, RampTo: 8, Duration: 1500 * time.Millisecond}}, Seed: 1}
		run, _ := newRun(t, sim.Config{Slots: 16, DecodeBase: 2 * time.Millisecond, PrefillBase: time.Millisecond}, plan, 8, 10)
		rec := &recorder{}
		run.Sinks = []Sink{rec}
		var peakEarly, peakLate int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			start := time.Now()
			for time.Since(start) < 1400*time.Millisecond {
				n := run.Progress().InFlight
				if time.Since(start) < 300*time.Millisecond {
					peakEarly = max(peakEarly, n)
				} else if time.Since(start) > time.Second {
					peakLate = max(peakLate, n)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
		sum, err := run.Execute(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		<-done
		// The report reads the ramp like a sweep: one summary per step, in
		// the order the ramp climbed.
		var stepLevels []float64
		for _, st := range sum.Stages {
			stepLevels = append(stepLevels, st.Level)
		}
		if len(stepLevels) < 6 || !slices.IsSorted(stepLevels) || sum.Knee == nil {
			a.Errorf("per-step summaries at levels %v (knee %v): want most of 1..8, ascending, with a knee", stepLevels, sum.Knee)
		}
		if peakEarly > 3 || peakLate < 6 {
			a.Errorf("in flight: at most %d in the first 300 ms, %d after 1 s; want about 1-2 then 6-8", peakEarly, peakLate)
		}
		var levels []float64
		for _, r := range rec.seen {
			levels = append(levels, r.Level)
		}
		slices.Sort(levels)
		levels = slices.Compact(levels)
		if len(levels) < 6 || levels[0] != 1 || levels[len(levels)-1] > 8 {
			a.Errorf("levels carried by results: %v, want most of 1..8", levels)
		}
	})
}

// A rate ramp's requests arrive faster as it climbs.
func TestOpenRampAccelerates(t *testing.T) {
	plan := Plan{Stages: []Stage{{Rate: 20, RampTo: 100, Arrival: "constant", Duration: time.Second}}, Seed: 1}
	run, _ := newRun(t, sim.Config{Slots: 64, DecodeBase: time.Millisecond, PrefillBase: time.Millisecond}, plan, 4, 2)
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	if _, err := run.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 20*1 + 80/2 = 60 arrivals: 30 - 10 = 20 in the first half second, 40 in the second.
	var first, second int
	start := rec.seen[0].Scheduled
	for _, r := range rec.seen {
		if r.Scheduled.Before(start) {
			start = r.Scheduled
		}
	}
	for _, r := range rec.seen {
		if r.Scheduled.Sub(start) < 500*time.Millisecond {
			first++
		} else {
			second++
		}
	}
	if n := first + second; n < 58 || n > 61 || first > 22 || second < 38 {
		t.Errorf("%d then %d requests, want about 20 then 40", first, second)
	}
}

// The waker ends every wait on time: woken by the timerfd when the
// process is idle (the runtime timer alone can be a millisecond late).
func TestWakerWaitsTheTime(t *testing.T) {
	w := newWaker()
	if w == nil {
		t.Skip("no timerfd here")
	}
	defer w.close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		start := time.Now()
		w.wait(timer, d)
		if got := time.Since(start); got < d {
			t.Errorf("wait(%v) returned after %v: early", d, got)
		}
	}
}

// A shard's share of a study reports the study's levels, whatever its
// own share of each: its records join the other shards' by level.
func TestShareReportsTheWholeLevel(t *testing.T) {
	p := Plan{Stages: []Stage{{Concurrency: 8, Requests: 40}, {Rate: 9, Duration: time.Second}, {Concurrency: 10, RampTo: 30, Duration: 10 * time.Second}}}
	for i := range 3 {
		share := p.Share(i, 3)
		if c := share.Stages[0].Concurrency; c == 8 || c == 0 {
			t.Fatalf("shard %d runs concurrency %d of 8", i, c)
		}
		for j, want := range []float64{8, 9, 10} {
			if got := share.Stages[j].reportedLevel(0); got != want {
				t.Errorf("shard %d, stage %d: reports %g, want the study's %g", i, j, got, want)
			}
		}
		if got := share.Stages[2].reportedLevel(10 * time.Second); got < 29 || got > 31 {
			t.Errorf("shard %d: the ramp's end reported as %g, want about 30", i, got)
		}
	}
	// The shares of a ramp end at its end together, not each at it.
	end := 0.0
	for i := range 3 {
		end += p.Split(i, 3).Stages[2].RampTo
	}
	if end != 30 {
		t.Errorf("the shares of a ramp to 30 end at %g together", end)
	}
	if got := p.Split(1, 3).Stages[0].reportedLevel(0); got != 3 {
		t.Errorf("a daemon replica's split reports %g, its own share (3)", got)
	}
}
