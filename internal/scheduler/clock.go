package scheduler

import "time"

// Clock is the scheduler's time source; tests use a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Real is the wall clock.
var Real Clock = realClock{}
