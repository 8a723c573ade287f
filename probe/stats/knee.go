package stats

import "fmt"

// Knee is what a run over several load levels says about capacity.
type Knee struct {
	// CapacityAtSLO is the highest level shown to meet the objective
	// (its attainment's 95% interval wholly at or above it), with every
	// level below it shown too; 0 when the first level is not, or when
	// there is no objective.
	CapacityAtSLO float64 `json:"capacity_at_slo"`
	// StoppedAt is the first level not shown to meet the objective, and
	// StoppedBy why: missed, or not_enough_evidence (a level whose
	// interval holds the objective: the capacity may be higher, and its
	// Evidence says how many requests would tell).
	StoppedAt float64 `json:"stopped_at,omitempty"`
	StoppedBy Outcome `json:"stopped_by,omitempty"`
	// CliffLevel is the first level where TTFT p50 is shown to be at
	// least CliffTTFT times the first level's while ITL p50 stays under
	// CliffITL times: requests queue, the model is not slower. Shown
	// means the ratio holds at the conservative end of its interval: the
	// level's p50 at the low end of its 95% interval less the probe's own
	// delay p99 there, over the first level's at the high end of its
	// own. 0 when there is none.
	CliffLevel float64 `json:"cliff_level"`
	// TTFTRatio and ITLRatio are that level's p50s over the first level's;
	// TTFTRatioInterval the conservative and generous ends of TTFTRatio.
	TTFTRatio         float64  `json:"ttft_ratio,omitempty"`
	TTFTRatioInterval Interval `json:"ttft_ratio_interval,omitzero"`
	ITLRatio          float64  `json:"itl_ratio,omitempty"`
	// UnprovenCliff is the first level whose TTFT p50 ratio reached
	// CliffTTFT with ITL flat but not at the conservative end of its
	// interval: a cliff its samples cannot show (too few requests, or a
	// starved probe), 0 when none.
	UnprovenCliff float64 `json:"unproven_cliff_level,omitempty"`
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
			out := Undecided
			if s.Evidence != nil && s.Requests > 0 {
				out = s.Evidence.Outcome
			}
			if out != Met {
				k.StoppedAt, k.StoppedBy = s.Level, out
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
		if tr < CliffTTFT || ir >= CliffITL {
			continue
		}
		iv := ratioInterval(s, base)
		switch {
		case iv.Low >= CliffTTFT && k.CliffLevel == 0:
			k.CliffLevel, k.TTFTRatio, k.ITLRatio, k.TTFTRatioInterval = s.Level, tr, ir, iv
		case iv.Low < CliffTTFT && k.CliffLevel == 0 && k.UnprovenCliff == 0:
			k.UnprovenCliff = s.Level
		}
	}
	return k
}

// ratioInterval bounds s's TTFT p50 over base's: the low end takes s's
// p50 at the low end of its interval, less the probe's delay p99 during
// s (a stall of the probe's lengthens a TTFT by its length at most), over
// base's at the high end; the high end the other way round. A p50 too
// few values bound is its point on that side.
func ratioInterval(s, base Summary) Interval {
	lo, hi := s.TTFT.P50, s.TTFT.P50
	if iv := s.TTFT.P50Interval; iv != (Interval{}) {
		lo, hi = iv.Low, iv.High
	}
	if s.Probe != nil {
		lo -= s.Probe.DelayP99Ms
	}
	blo, bhi := base.TTFT.P50, base.TTFT.P50 // over 0: FindKnee checks
	if iv := base.TTFT.P50Interval; iv.Low > 0 {
		blo, bhi = iv.Low, iv.High
	}
	return Interval{Low: max(lo, 0) / bhi, High: hi / blo}
}
