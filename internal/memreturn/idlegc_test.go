package memreturn

import "testing"

// fakePercent stands in for debug.SetGCPercent.
type fakePercent struct{ p int }

func (f *fakePercent) set(p int) int { old := f.p; f.p = p; return old }

func TestIdleGC(t *testing.T) {
	for _, c := range []struct {
		name             string
		gogc             string // the environment's GOGC
		from, percent    int    // the process's percent, IdleGC.Percent
		wantIdle         int    // the percent while idle
		idleTwice, twice bool   // Idle, Busy called twice
	}{
		{name: "default", from: 100, wantIdle: DefaultIdlePercent},
		// Idle again must not save the lowered percent as the one to put back.
		{name: "idle twice", from: 100, wantIdle: DefaultIdlePercent, idleTwice: true, twice: true},
		{name: "a percent of its own", from: 100, percent: 10, wantIdle: 10},
		{name: "already lower", from: 20, wantIdle: 20},
		{name: "GOGC set", gogc: "200", from: 200, wantIdle: 200},
		{name: "GOGC off", gogc: "off", from: -1, wantIdle: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.gogc) // "" reads as unset
			f := &fakePercent{p: c.from}
			g := &IdleGC{Percent: c.percent, set: f.set}
			g.Idle()
			if c.idleTwice {
				g.Idle()
			}
			if f.p != c.wantIdle {
				t.Fatalf("idle: percent %d, want %d", f.p, c.wantIdle)
			}
			g.Busy()
			if c.twice {
				g.Busy()
			}
			if f.p != c.from {
				t.Fatalf("busy: percent %d, want the %d from before", f.p, c.from)
			}
		})
	}
}
