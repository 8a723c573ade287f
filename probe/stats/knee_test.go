package stats

import "testing"

// level is a stage of 100 counted requests (enough for an attainment of
// 95% or more to show it meets 90%) whose TTFT p50's interval is 10%
// about it.
func level(l, attainment, ttft, itl float64) Summary {
	good := int(attainment * 100)
	e := Judge(good, 100, 0, 0.9)
	return Summary{Level: l, Requests: 100, Attainment: attainment, Evidence: &e,
		TTFT: Dist{Count: 100, P50: ttft, P50Interval: Interval{0.95 * ttft, 1.05 * ttft}}, ITL: Dist{Count: 100, P50: itl}}
}

func TestFindKnee(t *testing.T) {
	queue := []Summary{level(1, 1, 20, 10), level(2, 1, 22, 10), level(4, 0.97, 25, 11), level(8, 0.5, 90, 11.5), level(16, 0.1, 400, 12)}
	if k := FindKnee(queue, 0.9); k.CapacityAtSLO != 4 || k.CliffLevel != 8 || k.TTFTRatio != 4.5 {
		t.Errorf("queueing: %+v", k)
	}
	// A slower model: TTFT and ITL rise together. Not a cliff.
	slow := []Summary{level(1, 1, 20, 10), level(2, 1, 40, 20), level(4, 0.5, 80, 40)}
	if k := FindKnee(slow, 0.9); k.CliffLevel != 0 || k.CapacityAtSLO != 2 {
		t.Errorf("slow model: %+v", k)
	}
	// Capacity stops at the first miss even if a later level recovers.
	dip := []Summary{level(1, 1, 20, 10), level(2, 0.5, 20, 10), level(4, 1, 20, 10)}
	if k := FindKnee(dip, 0.9); k.CapacityAtSLO != 1 {
		t.Errorf("dip: %+v", k)
	}
	if k := FindKnee(queue, 0); k.CapacityAtSLO != 0 || k.CliffLevel != 8 {
		t.Errorf("no objective: %+v", k)
	}
	if k := FindKnee(queue[:1], 0.9); k != (Knee{}) {
		t.Errorf("one level: %+v", k)
	}
}

// A level shows its cliff only at the conservative end of its ratio's
// interval: a p50 of few requests, or a probe stalled for as long as the
// rise, is an unproven cliff, not a cliff.
func TestKneeNeedsEvidence(t *testing.T) {
	wide := []Summary{level(1, 1, 20, 10), level(2, 1, 70, 10)} // x3.5 at its p50
	wide[1].TTFT.P50Interval = Interval{40, 120}                // 40 / 21 = x1.9 at the low end
	if k := FindKnee(wide, 0.9); k.CliffLevel != 0 || k.UnprovenCliff != 2 {
		t.Errorf("a wide interval: %+v", k)
	}
	starved := []Summary{level(1, 1, 20, 10), level(2, 1, 90, 10)}
	starved[1].Probe = &Probe{DelayP99Ms: 60} // (85.5 - 60) / 21 = x1.2
	if k := FindKnee(starved, 0.9); k.CliffLevel != 0 || k.UnprovenCliff != 2 {
		t.Errorf("a starved probe: %+v", k)
	}
	starved[1].Probe = &Probe{DelayP99Ms: 1}
	if k := FindKnee(starved, 0.9); k.CliffLevel != 2 || k.TTFTRatioInterval.Low < 3 {
		t.Errorf("a prompt probe: %+v", k)
	}
	// Capacity stops at a level without enough evidence, and says so.
	few := []Summary{level(1, 1, 20, 10), level(2, 1, 20, 10)}
	e := Judge(10, 10, 0, 0.9)
	few[1].Evidence = &e
	if k := FindKnee(few, 0.9); k.CapacityAtSLO != 1 || k.StoppedAt != 2 || k.StoppedBy != Undecided {
		t.Errorf("ten requests at level 2: %+v", k)
	}
}
