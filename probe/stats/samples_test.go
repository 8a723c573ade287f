package stats

import (
	"runtime"
	"slices"
	"testing"
)

func TestSamplesKeepTheOrderAdded(t *testing.T) {
	for _, n := range []int{0, 1, firstBlock - 1, firstBlock, firstBlock + 1, 3*firstBlock + 5, lastBlock, 3*lastBlock + 7} {
		var s samples
		want := make([]float64, n)
		for i := range n {
			want[i] = float64(n - i) // descending, so that a sorted block would show
			s.add(want[i])
		}
		if got := s.flat(); !slices.Equal(got, want) {
			t.Errorf("%d values: flat() differs from the values added (%d back)", n, len(got))
		}
		for _, b := range s.blocks {
			if cap(b) > lastBlock {
				t.Errorf("%d values: a block of %d, over %d", n, cap(b), lastBlock)
			}
		}
	}
}

// TestSamplesAllocateTheirSizeOnce holds adding to the bytes the values
// take: an appended slice allocated about five times that in copies
// (issue 48's seventh round).
func TestSamplesAllocateTheirSizeOnce(t *testing.T) {
	const n = 200_000
	var s samples
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		s.add(float64(i))
	}
	runtime.ReadMemStats(&after)
	size := uint64(8 * n)
	if got := after.TotalAlloc - before.TotalAlloc; got > size+size/10 {
		t.Errorf("adding %d values allocated %d bytes, over 1.1x their %d", n, got, size)
	}
	if s.n != n || len(s.flat()) != n {
		t.Errorf("kept %d values (flat: %d), want %d", s.n, len(s.flat()), n)
	}
}

func TestAggregatorSummaryOverManyBlocks(t *testing.T) {
	// Compute's figures over values spread across blocks are those of
	// the same values in one slice.
	var s samples
	var plain []float64
	for i := range 3*lastBlock + 11 {
		v := float64((i * 7919) % 10007)
		s.add(v)
		plain = append(plain, v)
	}
	if got, want := Compute(s.flat()), Compute(plain); got != want {
		t.Errorf("Compute over blocks = %+v, want %+v", got, want)
	}
}
