package probe

import "hash/fnv"

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

// Split returns replica index's share of the plan when count replicas
// share one profile's load: rates divide evenly; concurrency, request
// counts and warmup divide as integers, the remainder going to the lowest
// indexes, so the shares always add up to the whole. A share of zero
// concurrency runs nothing.
func (p Plan) Split(index, count int) Plan {
	if count <= 1 {
		return p
	}
	part := func(n int) int {
		q, r := n/count, n%count
		if index < r {
			q++
		}
		return q
	}
	out := p
	out.Warmup = part(p.Warmup)
	out.Seed = p.Seed + uint64(index)*7919
	out.Stages = make([]Stage, len(p.Stages))
	for i, st := range p.Stages {
		st.Concurrency = part(st.Concurrency)
		st.MaxConcurrency = part(st.MaxConcurrency)
		st.Requests = part(st.Requests)
		st.Rate /= float64(count)
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
