package scheduler

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
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
	// Window limits runs to a time of day; nil means always.
	Window *Window
	// Exclusive runs never share their endpoint with another run.
	Exclusive bool
	// Budgets pause the job while the last hour's runs used this much (0: none).
	RequestsPerHour, TokensPerHour int
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

// JitterFor draws a delay in [0, max) from rng.
func JitterFor(rng *rand.Rand, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(max)))
}

// Window is a daily time-of-day window, possibly across midnight.
type Window struct {
	Start, End time.Duration // since midnight
	Loc        *time.Location
}

// ParseWindow reads "HH:MM-HH:MM" in the named time zone ("" is UTC).
func ParseWindow(s, tz string) (*Window, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("unknown time zone %q", tz)
		}
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return nil, fmt.Errorf("%q is not HH:MM-HH:MM", s)
	}
	a, err1 := clock(from)
	b, err2 := clock(to)
	switch {
	case err1 != nil || err2 != nil:
		return nil, fmt.Errorf("%q is not HH:MM-HH:MM", s)
	case a == b:
		return nil, fmt.Errorf("%q starts and ends at the same time", s)
	}
	return &Window{Start: a, End: b, Loc: loc}, nil
}

func clock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || hh == 24 && mm > 0 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
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
