package stats

import "fmt"

// Knee is what a run over several load levels says about capacity.
type Knee struct {
	// CapacityAtSLO is the highest level whose SLO attainment still meets
	// the objective, with every level below it meeting it too; 0 when the
	// first level already misses, or when there is no objective.
	CapacityAtSLO float64 `json:"capacity_at_slo"`
	// CliffLevel is the first level where TTFT p50 is at least CliffTTFT
	// times the first level's while ITL p50 stays under CliffITL times:
	// requests queue, the model is not slower. 0 when there is none.
	CliffLevel float64 `json:"cliff_level"`
	// TTFTRatio and ITLRatio are that level's p50s over the first level's.
	TTFTRatio float64 `json:"ttft_ratio,omitempty"`
	ITLRatio  float64 `json:"itl_ratio,omitempty"`
	// PeakLevel is the level where TTFT p50 rose most over the first
	// level's, PeakTTFTRatio and PeakITLRatio its ratios: what did
	// happen where there is no cliff.
	PeakLevel     float64 `json:"peak_level,omitempty"`
	PeakTTFTRatio float64 `json:"peak_ttft_ratio,omitempty"`
	PeakITLRatio  float64 `json:"peak_itl_ratio,omitempty"`
}

// Reading says in words what a knee without a cliff shows at its peak:
// TTFT barely moved, or it rose with ITL (a queue and a slower decode
// together, or a slower model alone).
func (k *Knee) Reading() string {
	switch {
	case k.PeakLevel == 0:
		return "no level to compare with the first"
	case k.PeakTTFTRatio < CliffTTFT:
		return fmt.Sprintf("TTFT p50 at most x%.1f of the first level's (at %g)", k.PeakTTFTRatio, k.PeakLevel)
	case k.PeakITLRatio >= CliffITL:
		return fmt.Sprintf("at %g TTFT p50 x%.1f with ITL p50 x%.1f: a queue and a slower decode together", k.PeakLevel, k.PeakTTFTRatio, k.PeakITLRatio)
	}
	return fmt.Sprintf("at %g TTFT p50 x%.1f, ITL p50 x%.2f", k.PeakLevel, k.PeakTTFTRatio, k.PeakITLRatio)
}

// The cliff's thresholds: TTFT up threefold, ITL up by less than half.
const (
	CliffTTFT = 3.0
	CliffITL  = 1.5
)

// FindKnee reads capacity and the cliff off stage summaries in load order.
func FindKnee(stages []Summary, objective float64) Knee {
	var k Knee
	if len(stages) < 2 {
		return k
	}
	if objective > 0 {
		for _, s := range stages {
			if s.Requests == 0 || s.Attainment < objective {
				break
			}
			k.CapacityAtSLO = s.Level
		}
	}
	base := stages[0]
	if base.TTFT.Count == 0 || base.ITL.Count == 0 || base.TTFT.P50 <= 0 || base.ITL.P50 <= 0 {
		return k
	}
	for _, s := range stages[1:] {
		if s.TTFT.Count == 0 || s.ITL.Count == 0 {
			continue
		}
		tr, ir := s.TTFT.P50/base.TTFT.P50, s.ITL.P50/base.ITL.P50
		if tr > k.PeakTTFTRatio {
			k.PeakLevel, k.PeakTTFTRatio, k.PeakITLRatio = s.Level, tr, ir
		}
		if tr >= CliffTTFT && ir < CliffITL && k.CliffLevel == 0 {
			k.CliffLevel, k.TTFTRatio, k.ITLRatio = s.Level, tr, ir
		}
	}
	return k
}
