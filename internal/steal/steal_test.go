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
