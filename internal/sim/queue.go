package sim

import (
	"context"
	"sync"
)

// slots models an inference server's batch: a fixed number of requests run
// at once and the rest wait in a FIFO queue, which is where a TTFT cliff
// comes from.
type slots struct {
	mu      sync.Mutex
	free    int
	running int
	waiters []chan struct{}
}

func newSlots(n int) *slots { return &slots{free: n} }

// acquire waits for a slot in arrival order, or until ctx ends; waited
// says whether the request found every slot taken.
func (s *slots) acquire(ctx context.Context) (waited bool, err error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiters) == 0 {
		s.free--
		s.running++
		s.mu.Unlock()
		return false, nil
	}
	ch := make(chan struct{})
	s.waiters = append(s.waiters, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		s.mu.Lock()
		for i, w := range s.waiters {
			if w == ch {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				s.mu.Unlock()
				return true, ctx.Err()
			}
		}
		s.mu.Unlock()
		// The slot was handed to us as we gave up: pass it on.
		s.release()
		return true, ctx.Err()
	}
}

func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if len(s.waiters) > 0 {
		ch := s.waiters[0]
		s.waiters = s.waiters[1:]
		s.running++
		close(ch)
		return
	}
	s.free++
}

// load returns the running and waiting counts.
func (s *slots) load() (running, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, len(s.waiters)
}
