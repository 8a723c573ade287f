package stats

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
		if tr >= CliffTTFT && ir < CliffITL {
			k.CliffLevel, k.TTFTRatio, k.ITLRatio = s.Level, tr, ir
			break
		}
	}
	return k
}
