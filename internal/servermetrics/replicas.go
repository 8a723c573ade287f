package servermetrics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Replica is one server of an endpoint's replicas (base_urls): its metrics
// page and the base URL the probe sends its share of the requests to.
type Replica struct {
	Options
	BaseURL string
}

// NewReplicas returns a source that reads each replica's page: a run's
// figures are the replicas' pooled as one server, with each replica's
// beside them, its own share of the probe's requests set against its own
// page. One page under several replicas counts only the requests its
// server served: every run would read as a restart ("96 against 192").
func NewReplicas(rs []Replica) *Source {
	src := &Source{o: Options{Interval: time.Second}}
	for _, r := range rs {
		child := New(r.Options)
		child.replicaOf = hostPort(r.BaseURL)
		child.replicaURL = redact.URL(r.BaseURL)
		src.replicas = append(src.replicas, child)
		src.o.Interval = child.o.Interval
	}
	if len(rs) > 0 {
		src.o.URL, src.o.Kind = rs[0].URL, rs[0].Kind
	}
	return src
}

// replicaSampler keeps, beside a replica's readings, the probe's requests
// that went to it: the client's side of the replica's split.
type replicaSampler struct {
	mu  sync.Mutex
	agg *stats.Aggregator
}

func (r *replicaSampler) observe(req *result.Request, v slo.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.agg == nil {
		r.agg = stats.NewAggregator(req.Profile, req.Endpoint, req.Model, req.Level, 0)
	}
	r.agg.Add(req, v)
}

func (r *replicaSampler) summary() *stats.Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.agg == nil {
		return &stats.Summary{}
	}
	s := r.agg.Summary()
	return &s
}

// explainReplicas sets the run's server figures from its replicas' readings:
// each replica against the requests the probe sent it, and the replicas
// pooled as one server against the whole run (and each of its stages). A
// restart of any replica withholds the pooled figures: the pool's
// counters can rise while one replica's fell.
func explainReplicas(sum *stats.Summary, rd Readings) {
	var replicas []stats.Server
	why := ""
	for i, r := range rd.Replicas {
		own := r.Probe
		if own == nil {
			own = &stats.Summary{}
		}
		own.Start, own.End = sum.Start, sum.End
		Explain(own, r)
		sv := *own.Server
		sv.Replica = r.Replica
		replicas = append(replicas, sv)
		if why == "" && strings.Contains(sv.Err, "restarted") {
			why = fmt.Sprintf("replica %d (%s): %s", i+1, r.Replica, sv.Err)
		}
	}
	pooled := pool(rd.Replicas)
	Explain(sum, pooled)
	if why != "" {
		withhold := func(s *stats.Server) {
			*s = stats.Server{Kind: s.Kind, URL: s.URL, Scrapes: s.Scrapes, Err: "one of the replicas restarted during the run, so none of the pooled figures is given: " + why}
		}
		withhold(sum.Server)
		for i := range sum.Stages {
			withhold(sum.Stages[i].Server)
		}
	}
	sum.Server.Replicas = replicas
}

// pool adds the replicas' readings into one server's: each reading of the
// first replica with, from every other, the reading nearest it in time
// (they are taken on the same ticks and marks). Histograms and counters
// add; running and waiting requests add; KV cache usage and a hit rate
// average. The process start time is left out: each replica's restart is
// judged on its own readings.
func pool(rds []Readings) Readings {
	out := Readings{Kind: rds[0].Kind, URL: rds[0].URL}
	for _, rd := range rds {
		out.Failed += rd.Failed
		if rd.Err != nil {
			out.Err = rd.Err
		}
	}
	at := make([]int, len(rds)) // each replica's reading nearest the last: both lists are in time order
	for _, s0 := range rds[0].Snaps {
		p := Snapshot{At: s0.At, Kind: s0.Kind, Hist: map[Role]Hist{}, Value: map[Role]float64{}, Families: map[Role]bool{}}
		averaged := map[Role]int{}
		for i, rd := range rds {
			if len(rd.Snaps) == 0 {
				continue
			}
			at[i] = nearest(rd.Snaps, at[i], s0.At)
			s := rd.Snaps[at[i]]
			if s.At.After(p.At) {
				p.At = s.At
			}
			for r, h := range s.Hist {
				p.Hist[r] = addHist(p.Hist[r], h)
			}
			for r, v := range s.Value {
				p.Value[r] += v
				if r == KVCache || r == PrefixHitRate {
					averaged[r]++
				}
			}
			for r, ok := range s.Families {
				p.Families[r] = p.Families[r] || ok
			}
		}
		for r, n := range averaged {
			p.Value[r] /= float64(n)
		}
		out.Snaps = append(out.Snaps, p)
	}
	return out
}

// nearest is the index of the reading of snaps (in time order) taken
// nearest to at, from the one at from on: a run's readings are walked
// once, not once a reading.
func nearest(snaps []Snapshot, from int, at time.Time) int {
	for from+1 < len(snaps) && abs(snaps[from+1].At.Sub(at)) <= abs(snaps[from].At.Sub(at)) {
		from++
	}
	return from
}

func abs(d time.Duration) time.Duration { return max(d, -d) }

// addHist adds b to a; buckets add where the bounds agree, and are
// dropped where they do not (count and sum still add).
func addHist(a, b Hist) Hist {
	if a.Count == 0 && a.Bounds == nil && a.Sum == 0 {
		return Hist{Count: b.Count, Sum: b.Sum, Bounds: b.Bounds, Cumulative: slices.Clone(b.Cumulative)}
	}
	out := Hist{Count: a.Count + b.Count, Sum: a.Sum + b.Sum}
	if slices.Equal(a.Bounds, b.Bounds) {
		out.Bounds, out.Cumulative = a.Bounds, slices.Clone(a.Cumulative)
		for i := range out.Cumulative {
			out.Cumulative[i] += b.Cumulative[i]
		}
	}
	return out
}
