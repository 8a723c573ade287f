package probe

import (
	"hash/fnv"
	"math"
)

// Owns reports whether shard index of count runs the job key: jobs spread
// over replicas by a stable hash of their key, so every replica agrees
// without talking to the others.
func Owns(key string, index, count int) bool {
	if count <= 1 {
		return true
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32()%uint32(count)) == index
}

// Share is Split for one shard of a study run by several processes
// (`tokenprobe run --shard.index`): each stage also carries the whole
// study's level, which its results report, so that the shards' records
// join by level when they are merged.
func (p Plan) Share(index, count int) Plan {
	out := p.Split(index, count)
	if count > 1 {
		for i := range out.Stages {
			out.Stages[i].Whole, out.Stages[i].WholeRampTo = p.Stages[i].Level(), p.Stages[i].RampTo
		}
	}
	return out
}

// Split returns replica index's share of the plan when count replicas
// share one profile's load: rates divide evenly; concurrency, request
// counts and warmup divide as integers, the remainder going to the lowest
// indexes, so the shares always add up to the whole. A stage whose
// concurrency (or an open loop's max_concurrency) is below count runs on
// that many replicas only, with its requests and rate divided among them:
// a replica with no slot to send from gets no requests to lose.
func (p Plan) Split(index, count int) Plan {
	if count <= 1 {
		return p
	}
	part := func(n, among int) int {
		if index >= among {
			return 0
		}
		q, r := n/among, n%among
		if index < r {
			q++
		}
		return q
	}
	out := p
	out.Warmup = part(p.Warmup, count)
	out.Seed = p.Seed + uint64(index)*7919
	out.Stages = make([]Stage, len(p.Stages))
	for i, st := range p.Stages {
		among := count
		switch {
		case st.Offsets != nil:
		case st.Rate == 0 && st.Concurrency > 0:
			among = min(count, st.Concurrency)
		case st.Rate > 0 && st.MaxConcurrency > 0:
			among = min(count, st.MaxConcurrency)
		}
		if st.RampTo > 0 && st.Rate == 0 {
			// A ramp's end divides as its start does: the shares of a
			// ramp to 30 end at 30 together, not each at 30.
			st.RampTo = float64(part(int(math.Round(st.RampTo)), among))
		}
		st.Concurrency = part(st.Concurrency, among)
		st.MaxConcurrency = part(st.MaxConcurrency, among)
		st.Requests = part(st.Requests, among)
		if index < among {
			st.Rate /= float64(among)
			if st.Rate > 0 {
				st.RampTo /= float64(among)
			}
		} else {
			st.Rate, st.RampTo = 0, 0
		}
		if st.Offsets != nil { // a trace: every count-th request
			kept := st.Offsets[:0:0]
			for j := index; j < len(st.Offsets); j += count {
				kept = append(kept, st.Offsets[j])
			}
			st.Offsets = kept
			st.Requests = len(kept)
		}
		out.Stages[i] = st
	}
	return out
}
