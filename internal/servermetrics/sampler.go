package servermetrics

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"
)

// maxReadings bounds a run's readings: two hours at one a second. Past it
// every other reading is dropped, so a long run keeps its whole span at a
// coarser step instead of growing without bound.
const maxReadings = 7200

// Readings are the snapshots taken during one run.
type Readings struct {
	Kind  Kind
	URL   string
	Snaps []Snapshot
	// Failed counts the scrapes that failed; Err is the last failure.
	Failed int
	Err    error
	// Refused are when the metrics URL refused a connection: a server
	// down between two readings, whose restart a long interval and a
	// server without a process start time would otherwise hide (bounded
	// as the readings are).
	Refused []time.Time
	// gone is set once the URL answered 404: no reading is tried again.
	gone bool
}

// Sampler reads a source all through a run.
type Sampler struct {
	src    *Source
	cancel context.CancelFunc
	done   chan struct{}
	// turn lets one reading at a time ask the server: a stage's reading
	// (Mark) sent while the interval's is on its way could come back
	// first, and a page appended after a later one reads as a restart.
	turn chan struct{}

	mu sync.Mutex
	rd Readings
}

// Start takes a first reading before it returns, so that the run's first
// request finds the server's counters already read, then reads every
// interval until Stop.
func Start(src *Source) *Sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{src: src, cancel: cancel, done: make(chan struct{}), turn: make(chan struct{}, 1)}
	first, stop := context.WithTimeout(ctx, 2*time.Second) // a server that does not answer delays no run by more
	s.read(first)
	stop()
	go s.loop(ctx)
	return s
}

func (s *Sampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.src.Interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.read(ctx)
		}
	}
}

func (s *Sampler) read(ctx context.Context) {
	select {
	case s.turn <- struct{}{}:
		defer func() { <-s.turn }()
	case <-ctx.Done():
		return // a stage's reading that waited its second out: the interval's stands for it
	}
	s.mu.Lock()
	gone := s.rd.gone
	s.mu.Unlock()
	if gone {
		return // said once, in the run's summary; not asked every second
	}
	snap, err := s.src.Scrape(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.rd.Failed++
			s.rd.Err = err
			s.rd.gone = errors.Is(err, ErrNoMetrics)
			if errors.Is(err, syscall.ECONNREFUSED) && len(s.rd.Refused) < maxReadings {
				s.rd.Refused = append(s.rd.Refused, time.Now())
			}
		}
		return
	}
	if len(s.rd.Snaps) >= maxReadings {
		kept := s.rd.Snaps[:0]
		for i, r := range s.rd.Snaps {
			if i%2 == 0 {
				kept = append(kept, r)
			}
		}
		s.rd.Snaps = kept
	}
	s.rd.Snaps = append(s.rd.Snaps, snap)
}

// Mark takes a reading now, between two stages of a run, so that each
// stage's window starts and ends on a reading of its own. It waits at most
// a second, for an interval's reading still on its way too: a slow server
// delays no stage by more.
func (s *Sampler) Mark() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.read(ctx)
}

// settle is how long Stop waits before its last reading: a server records
// a request about when it sends the last chunk, and the last reading must
// come after the last request is recorded.
const settle = 250 * time.Millisecond

// Stop ends the readings with a last one and returns them all.
func (s *Sampler) Stop() Readings {
	s.cancel()
	<-s.done
	time.Sleep(min(settle, s.src.Interval()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.read(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.rd
	rd.Kind, rd.URL = s.src.Kind(), s.src.URL()
	return rd
}
