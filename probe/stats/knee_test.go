package stats

import "testing"

func level(l, attainment, ttft, itl float64) Summary {
	return Summary{Level: l, Requests: 10, Attainment: attainment, TTFT: Dist{Count: 10, P50: ttft}, ITL: Dist{Count: 10, P50: itl}}
}

func TestFindKnee(t *testing.T) {
	queue := []Summary{level(1, 1, 20, 10), level(2, 1, 22, 10), level(4, 0.95, 25, 11), level(8, 0.5, 90, 11.5), level(16, 0.1, 400, 12)}
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
