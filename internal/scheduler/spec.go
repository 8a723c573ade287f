package scheduler

import (
	"hash/fnv"
	"math/rand/v2"
	"time"
)

// Spec is when a job runs.
type Spec struct {
	// Every is the interval between runs.
	Every time.Duration
	// Jitter delays each run by a random amount in [0, Jitter).
	Jitter time.Duration
	// Continuous runs back to back instead of every interval.
	Continuous bool
	// Manual runs only through RunNow.
	Manual bool
	// Window limits runs to a time of day; nil means always.
	Window *Window
	// Exclusive runs never share their endpoint with another run.
	Exclusive bool
	// Budgets pause the job while the last hour's runs used this much (0: none).
	RequestsPerHour, TokensPerHour int
	// MaxCostPerDay pauses the job while the last 24 hours' runs cost
	// this much (0: none).
	MaxCostPerDay float64
	// BackoffMax caps the job's backoff after aborted runs in a row. An
	// interval job skips 2^n - 1 ticks after its n-th, at most as many as
	// fit in BackoffMax; a continuous one waits 10s x 2^(n-1), at most
	// BackoffMax. 0: no backoff.
	BackoffMax time.Duration
}

// continuousBackoffUnit is a continuous job's first wait after an aborted run.
const continuousBackoffUnit = 10 * time.Second

// ticksToSkip is how many ticks an interval job skips after its n-th
// aborted run in a row: its interval doubles with each.
func (sp Spec) ticksToSkip(n int) int {
	if n <= 0 || sp.BackoffMax <= 0 || sp.Every <= 0 {
		return 0
	}
	limit := int(sp.BackoffMax / sp.Every)
	if limit == 0 {
		return 0
	}
	skip := 1
	for i := 1; i < n && skip < limit; i++ {
		skip = 2*skip + 1
	}
	return min(skip, limit)
}

// pauseAfter is how long a continuous job waits after its n-th aborted
// run in a row.
func (sp Spec) pauseAfter(n int) time.Duration {
	if n <= 0 || sp.BackoffMax <= 0 {
		return 0
	}
	d := continuousBackoffUnit
	for i := 1; i < n && d < sp.BackoffMax; i++ {
		d *= 2
	}
	return min(d, sp.BackoffMax)
}

// Offset is the job's deterministic place within its interval, from its
// key: jobs spread over the interval, and a restart keeps every job's
// place, so restarts do not fire everything at once.
func Offset(key string, every time.Duration) time.Duration {
	if every <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum64() % uint64(every))
}

// NextTick is the first tick strictly after now: ticks fall at
// offset + k x every from the Unix epoch.
func NextTick(now time.Time, every, offset time.Duration) time.Time {
	since := now.Sub(time.Unix(0, 0)) - offset
	k := since / every
	if since < 0 {
		k--
	}
	return time.Unix(0, 0).Add(offset + (k+1)*every)
}

// JitterFor draws a delay in [0, limit) from rng.
func JitterFor(rng *rand.Rand, limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(limit)))
}

// Window is a daily time-of-day window, possibly across midnight
// (config.ParseWindow reads it from a profile's schedule).
type Window struct {
	Start, End time.Duration // since midnight
	Loc        *time.Location
}

// Contains reports whether t falls in the window.
func (w *Window) Contains(t time.Time) bool {
	if w == nil {
		return true
	}
	t = t.In(w.Loc)
	d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
	if w.Start < w.End {
		return d >= w.Start && d < w.End
	}
	return d >= w.Start || d < w.End // across midnight
}
