package servermetrics

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
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
	// ProbeRefused are when the probe's own requests to the server's
	// host and port were refused a connection (Sampler.Observe): the
	// same evidence, from the requests, which come far more often than
	// the readings of a long interval (bounded as Refused is).
	ProbeRefused []time.Time
	// Replicas are each replica's readings, for a source of replicas
	// (NewReplicas); Replica is a replica's base URL, and Probe the
	// probe's requests sent to it.
	Replicas []Readings
	Replica  string
	Probe    *stats.Summary
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

	// hostPort is the server's address, as the metrics URL names it:
	// the probe's requests refused there are evidence of a restart.
	hostPort string
	// children are the replicas' samplers of a source of replicas;
	// replica keeps a replica's share of the probe's requests.
	children []*Sampler
	replica  *replicaSampler

	mu sync.Mutex
	rd Readings
}

// Start takes a first reading before it returns, so that the run's first
// request finds the server's counters already read, then reads every
// interval until Stop.
func Start(src *Source) *Sampler {
	if len(src.replicas) > 0 {
		p := &Sampler{src: src, children: make([]*Sampler, len(src.replicas))}
		each(len(src.replicas), func(i int) { p.children[i] = Start(src.replicas[i]) })
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{src: src, cancel: cancel, done: make(chan struct{}), turn: make(chan struct{}, 1), hostPort: hostPort(src.o.URL)}
	if src.replicaURL != "" {
		s.hostPort, s.replica = src.replicaOf, &replicaSampler{}
	}
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

// Observe is a probe.Sink: a request of the run refused a connection by
// the server's own host and port (a connect error saying so) is a moment
// the server was down. The probe's requests come far more often than a
// long interval's readings: a restart between two readings after the old
// process answered two requests or fewer hid within the margin of the
// count of finished requests. Other requests cost a comparison.
func (s *Sampler) Observe(r *result.Request, v slo.Verdict) {
	for _, c := range s.children {
		c.Observe(r, v)
	}
	if s.replica != nil {
		if r.URL != s.src.replicaURL {
			return // another replica's
		}
		s.replica.observe(r, v)
	}
	if r.Outcome != result.Error || r.Reason != result.ReasonConnect || s.hostPort == "" ||
		!strings.Contains(r.Err, "refused") || hostPort(r.URL) != s.hostPort {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rd.ProbeRefused) < maxReadings {
		s.rd.ProbeRefused = append(s.rd.ProbeRefused, r.End)
	}
}

// hostPort is u's host and port (the scheme's default port where it names
// none), or "" where u does not parse.
func hostPort(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return ""
	}
	port := p.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.Scheme]
	}
	return net.JoinHostPort(p.Hostname(), port)
}

// Mark takes a reading now, between two stages of a run, so that each
// stage's window starts and ends on a reading of its own. It waits at most
// a second, for an interval's reading still on its way too: a slow server
// delays no stage by more.
func (s *Sampler) Mark() {
	if len(s.children) > 0 {
		each(len(s.children), func(i int) { s.children[i].Mark() })
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.read(ctx)
}

// settle is how long Stop waits before its last reading: a server records
// a request about when it sends the last chunk, and the last reading must
// come after the last request is recorded. Whatever the interval: a short
// one (50 ms) cut the wait to it, and under the race detector on a busy
// host a server had not yet recorded a run's last three answers.
const settle = 250 * time.Millisecond

// Stop ends the readings with a last one and returns them all.
func (s *Sampler) Stop() Readings {
	if len(s.children) > 0 {
		rd := Readings{Kind: s.src.Kind(), URL: s.src.replicas[0].URL(), Replicas: make([]Readings, len(s.children))}
		each(len(s.children), func(i int) { rd.Replicas[i] = s.children[i].Stop() })
		return rd
	}
	s.cancel()
	<-s.done
	time.Sleep(settle)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.read(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.rd
	rd.Kind, rd.URL = s.src.Kind(), s.src.URL()
	if s.replica != nil {
		rd.Replica, rd.Probe = s.src.replicaURL, s.replica.summary()
	}
	return rd
}

// each runs f(0) to f(n-1) side by side and waits for them: the replicas'
// readings are taken together, as one server's would be.
func each(n int, f func(int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}
