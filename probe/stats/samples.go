package stats

// samples holds one metric's per-request values in blocks that are never
// copied: a slice grown by append copies what it holds each time it grows
// (by about 1.25x past 256 values), so a run allocated about five times
// its values' size in copies. That was a quarter of all the bytes a run
// allocated at 5,000 requests/s, and so a quarter of what paced its
// garbage collections (docs/BENCHMARKS.md, how to read the figures).
// Blocks double from firstBlock to lastBlock values, so a run of a few
// requests holds a few hundred bytes per metric.
type samples struct {
	blocks [][]float64
	n      int
}

// The block sizes: lastBlock values are 32 KiB, Go's largest small
// allocation.
const (
	firstBlock = 32
	lastBlock  = 4096
)

func (s *samples) add(v float64) {
	k := len(s.blocks)
	if k == 0 || len(s.blocks[k-1]) == cap(s.blocks[k-1]) {
		size := firstBlock
		if k > 0 {
			size = min(2*cap(s.blocks[k-1]), lastBlock)
		}
		s.blocks = append(s.blocks, make([]float64, 0, size))
		k++
	}
	s.blocks[k-1] = append(s.blocks[k-1], v)
	s.n++
}

// flat returns the values in the order added, in one slice the caller
// may sort: the only block itself when there is one, else a copy.
func (s *samples) flat() []float64 {
	switch len(s.blocks) {
	case 0:
		return nil
	case 1:
		return s.blocks[0]
	}
	out := make([]float64, 0, s.n)
	for _, b := range s.blocks {
		out = append(out, b...)
	}
	return out
}
