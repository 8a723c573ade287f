package memreturn

import "testing"

// fakePercent stands in for debug.SetGCPercent.
type fakePercent struct{ p int }

func (f *fakePercent) set(p int) int { old := f.p; f.p = p; return old }

func TestIdleGC(t *testing.T) {
	t.Setenv("GOGC", "") // as if unset: Getenv reads ""
	f := &fakePercent{p: 100}
	g := &IdleGC{set: f.set}
	g.Idle()
	if f.p != DefaultIdlePercent {
		t.Fatalf("idle: percent %d, want %d", f.p, DefaultIdlePercent)
	}
	g.Idle() // again: must not save the lowered percent as the one to put back
	g.Busy()
	if f.p != 100 {
		t.Fatalf("busy: percent %d, want the 100 from before", f.p)
	}
	g.Busy()
	if f.p != 100 {
		t.Fatalf("busy twice: percent %d", f.p)
	}

	// A percent already at or under the idle one is left as it is.
	f.p = 20
	g.Idle()
	g.Busy()
	if f.p != 20 {
		t.Fatalf("from 20: percent %d after idle and busy", f.p)
	}
	f.p = 100
	g = &IdleGC{Percent: 10, set: f.set}
	g.Idle()
	if f.p != 10 {
		t.Fatalf("Percent 10: percent %d while idle", f.p)
	}
	g.Busy()

	// GOGC set by the operator: never touched.
	t.Setenv("GOGC", "200")
	f.p = 200
	g = &IdleGC{set: f.set}
	g.Idle()
	if f.p != 200 {
		t.Fatalf("GOGC=200: percent %d while idle", f.p)
	}
	g.Busy()
	if f.p != 200 {
		t.Fatalf("GOGC=200: percent %d after busy", f.p)
	}
}
