package bench

import (
	"sync"
	"time"
)

// canary sleeps 1 ms over and over in the harness while a replay runs, and
// keeps the wake-ups that came a millisecond or more late: a replay whose
// latest request was late in the same moment as the harness's own sleep
// was held up by the machine (the host's scheduling, another process), not
// by the probe. Its cost is a wake-up a millisecond, about 1% of a core.
type canary struct {
	h    *Histogram
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	late []lateWake // at most maxLateWakes, the first ones
}

// lateWake is one sleep that woke at least a millisecond late: it should
// have woken at due and woke at woke.
type lateWake struct{ due, woke time.Time }

const maxLateWakes = 10000

func startCanary() *canary {
	c := &canary{h: NewHistogram(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			due, woke := sleepOnce()
			over := woke.Sub(due)
			c.h.Observe(over)
			if over >= time.Millisecond {
				c.mu.Lock()
				if len(c.late) < maxLateWakes {
					c.late = append(c.late, lateWake{due: due, woke: woke})
				}
				c.mu.Unlock()
			}
		}
	}()
	return c
}

// end stops the canary and returns its lateness.
func (c *canary) end() *Quantiles {
	close(c.stop)
	<-c.done
	return quantilesOf(c.h)
}

// lateDuring is the longest lateness of the canary's wake-ups that were
// due inside [from, to], the window in which a request waited past its
// schedule; 0 when none was a millisecond late.
func (c *canary) lateDuring(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var worst time.Duration
	for _, l := range c.late {
		// The sleep overlapped the window: it was due before the window
		// ended and woke after it began.
		if l.due.Before(to) && l.woke.After(from) {
			worst = max(worst, l.woke.Sub(l.due))
		}
	}
	return worst
}
