package steal

import (
	"runtime"
	"testing"
	"time"
)

func TestMeter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/stat")
	}
	m := Start()
	if m.total <= 0 || m.steal < 0 || m.steal > m.total {
		t.Fatalf("steal %d of %d ticks", m.steal, m.total)
	}
	for range 50 { // let some ticks pass
		time.Sleep(time.Millisecond)
	}
	if p := m.Percent(); p < 0 || p > 100 {
		t.Errorf("steal %.1f%%, want a share between 0 and 100", p)
	}
}

// A core kept busy shows in the machine's busy share: at least a share
// of one core out of all of them.
func TestBusyPercent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/stat")
	}
	m := Start()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) { // spin: this core is busy
	}
	p := m.BusyPercent()
	// One core of NumCPU spun for the whole time; on a busy machine more.
	// Under 0.5 of a core's share the meter missed the spin: the scheduler
	// gives a spinning thread most of a core even beside others.
	if floor := 50 / float64(runtime.NumCPU()); p < floor || p > 100 {
		t.Errorf("busy %.1f%% while one of %d cores spun, want at least %.0f%%", p, runtime.NumCPU(), floor)
	}
}
