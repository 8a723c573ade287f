package gpu

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fake is a Source with fixed readings.
type fake struct {
	samples []Sample
	err     error
}

func (f fake) Name() string                           { return "fake" }
func (f fake) Read(context.Context) ([]Sample, error) { return f.samples, f.err }
func (f fake) Close() error                           { return nil }

var h100 = []Sample{
	{GPU: GPU{0, "GPU-6d8e1a2b-0000-0000-0000-000000000000", "00000000:07:00.0", "nvidia0", "NVIDIA H100 80GB HBM3", "node1"},
		Values: map[string]float64{"DCGM_FI_DEV_GPU_UTIL": 87, "DCGM_FI_DEV_FB_USED": 71234, "DCGM_FI_DEV_POWER_USAGE": 612.5,
			"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 9.8765e9, "DCGM_FI_PROF_SM_ACTIVE": 0.93, "DCGM_FI_DEV_XID_ERRORS": 0}},
	{GPU: GPU{1, "GPU-7f9f2b3c-0000-0000-0000-000000000000", "00000000:0F:00.0", "nvidia1", "NVIDIA H100 80GB HBM3", "node1"},
		Values: map[string]float64{"DCGM_FI_DEV_GPU_UTIL": 12, "DCGM_FI_DEV_FB_USED": 1024, "DCGM_FI_DEV_POWER_USAGE": 98.25,
			"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 1.2345e9, "DCGM_FI_PROF_SM_ACTIVE": 0.05, "DCGM_FI_DEV_XID_ERRORS": 0}},
}

// The exposition matches dcgm-exporter's: names, help, types and labels.
func TestExpositionMatchesDCGMExporter(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(fake{samples: h100}, nil, nil))
	var b strings.Builder
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n != 13 {
		t.Fatalf("%d series (%v); want 12 GPU series and the up gauge", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", mf.GetName(), mf.GetHelp(), mf.GetName(), strings.ToLower(mf.GetType().String()))
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Fprintf(&b, "%s{%s} %g\n", mf.GetName(), strings.Join(ls, ","), v)
		}
	}
	golden := "testdata/dcgm-exporter.golden.txt"
	if *update {
		_ = os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	want, _ := os.ReadFile(golden)
	if b.String() != string(want) {
		t.Fatalf("exposition differs from %s:\n%s", golden, b.String())
	}
}

func TestSourceDownIsNotAScrapeError(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := NewCollector(Down("dcgm", fmt.Errorf("%w: libdcgm.so.4 not found", ErrUnavailable)), nil, nil)
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tokenprobe_gpu_source_up 1 when the GPU source (label source) read its GPUs at the last scrape, 0 when it is missing or failing; GPU series are absent then.
# TYPE tokenprobe_gpu_source_up gauge
tokenprobe_gpu_source_up{source="dcgm"} 0
`)); err != nil {
		t.Fatal(err)
	}
	if name, reason := c.Status(); name != "dcgm" || !strings.Contains(reason, "libdcgm") {
		t.Fatalf("status %q %q", name, reason)
	}
}

// Without DCGM on this machine, the real go-dcgm Init fails; the source is
// down with the reason and nothing else is called (which would kill the
// process).
func TestOpenWithoutDCGM(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libdcgm.so.4"); err == nil {
		t.Skip("DCGM is installed here")
	}
	src := Open("", nil)
	defer src.Close()
	_, err := src.Read(context.Background())
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read: %v", err)
	}
	t.Logf("DCGM (cgo build: %v): %v", Available, err)
	// Reading again is as harmless.
	if _, err := src.Read(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
}

// The dcgm-exporter-reading source finds the series of a running
// dcgm-exporter and re-exports them unchanged.
func TestScrapeADCGMExporter(t *testing.T) {
	golden, err := os.ReadFile("testdata/dcgm-exporter.golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 12")
		_, _ = w.Write(golden)
	}))
	defer exporter.Close()
	src := NewScrape(exporter.URL + "/metrics")
	samples, err := src.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 2 || samples[0].GPU.ModelName != "NVIDIA H100 80GB HBM3" || samples[0].Values["DCGM_FI_DEV_GPU_UTIL"] != 87 ||
		samples[1].Values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] != 1.2345e9 || samples[1].GPU.PCIBusID != "00000000:0F:00.0" {
		t.Fatalf("%+v", samples)
	}
	dead := NewScrape("http://127.0.0.1:1/metrics")
	if _, err := dead.Read(context.Background()); err == nil {
		t.Fatal("a dead dcgm-exporter read without error")
	}
}

// The report's arithmetic: averages and peaks over readings and GPUs, and
// energy from the counter's rise (mJ) per output token.
func TestReportArithmetic(t *testing.T) {
	reading := func(util0, util1, e0, e1 float64) []Sample {
		return []Sample{
			{GPU: GPU{UUID: "a"}, Values: map[string]float64{"DCGM_FI_DEV_GPU_UTIL": util0, "DCGM_FI_DEV_POWER_USAGE": 400, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": e0, "DCGM_FI_DEV_FB_USED": 1000}},
			{GPU: GPU{UUID: "b"}, Values: map[string]float64{"DCGM_FI_DEV_GPU_UTIL": util1, "DCGM_FI_DEV_POWER_USAGE": 200, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": e1, "DCGM_FI_DEV_FB_USED": 3000}},
		}
	}
	// Over the run GPU a uses 4000 J (4,000,000 mJ) and GPU b 2000 J.
	r := Summarise([][]Sample{reading(80, 20, 1e9, 5e8), reading(100, 0, 1e9+2e6, 5e8+1e6), reading(90, 10, 1e9+4e6, 5e8+2e6)}, 3000)
	if r.Samples != 3 || r.GPUs != 2 || r.UtilAvg != 50 || r.UtilPeak != 100 || r.PowerAvg != 300 || r.PowerPeak != 400 || r.MemUsedPeak != 3000 {
		t.Fatalf("%+v", r)
	}
	if r.EnergyJoules != 6000 || r.JoulesPerOutputToken != 2 || r.OutputTokensPerJoule != 0.5 {
		t.Fatalf("energy %v J, %v J/token, %v tokens/J", r.EnergyJoules, r.JoulesPerOutputToken, r.OutputTokensPerJoule)
	}
	if r := Summarise(nil, 100); r.JoulesPerOutputToken != 0 || r.Samples != 0 {
		t.Fatalf("no readings: %+v", r)
	}
}

func TestSamplerReportsWhyItHasNothing(t *testing.T) {
	s := Start(Down("dcgm", fmt.Errorf("%w: libdcgm.so.4 not found", ErrUnavailable)), 10*time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	r := s.Stop(100)
	if r.Samples != 0 || !strings.Contains(r.Err, "libdcgm") || r.Source != "dcgm" {
		t.Fatalf("%+v", r)
	}
	s = Start(fake{samples: h100}, 10*time.Millisecond)
	time.Sleep(35 * time.Millisecond)
	if r := s.Stop(100); r.Samples < 3 || r.GPUs != 2 || r.UtilPeak != 87 {
		t.Fatalf("%+v", r)
	}
}

// fakeNVML is a driver with two GPUs: the first supports everything, the
// second neither power nor its violation counters (as some boards).
type fakeNVML struct {
	initErr error
	closed  bool
}

func (f *fakeNVML) Init() error                      { return f.initErr }
func (f *fakeNVML) Shutdown() error                  { f.closed = true; return nil }
func (f *fakeNVML) Count() (int, error)              { return 2, nil }
func (f *fakeNVML) Device(i int) (nvmlDevice, error) { return fakeDevice(i), nil }

type fakeDevice int

func (d fakeDevice) UUID() (string, error) { return fmt.Sprintf("GPU-%d", d), nil }
func (d fakeDevice) Name() (string, error) { return "NVIDIA H100 80GB HBM3", nil }
func (d fakeDevice) PCIBusID() (string, error) {
	return fmt.Sprintf("00000000:%02X:00.0", 0x18+int(d)), nil
}
func (d fakeDevice) Minor() (int, error) { return int(d), nil }
func (d fakeDevice) Utilization() (uint32, uint32, error) {
	return 87, 41, nil
}
func (d fakeDevice) Memory() (uint64, uint64, error) { return 70 << 30, 10 << 30, nil }
func (d fakeDevice) PowerUsage() (uint32, error) {
	if d == 1 {
		return 0, errNVMLNotSupported
	}
	return 512_345, nil
}
func (d fakeDevice) TotalEnergy() (uint64, error) { return 9_000_000, nil }
func (d fakeDevice) Clock(memory bool) (uint32, error) {
	if memory {
		return 2619, nil
	}
	return 1980, nil
}
func (d fakeDevice) Temperature() (uint32, error) { return 61, nil }
func (d fakeDevice) Violation(thermal bool) (uint64, error) {
	if d == 1 {
		return 0, errNVMLNotSupported
	}
	if thermal {
		return 3_000, nil
	}
	return 5_000_000, nil
}

// NVML's readings come out under dcgm-exporter's names, labels and units
// (W, MiB, us); a reading a GPU does not support is absent, not 0, and the
// profiling fields only DCGM has are never there.
func TestNVMLMapping(t *testing.T) {
	lib := &fakeNVML{}
	src := newNVML(lib, nil)
	samples, err := src.Read(context.Background())
	if err != nil || len(samples) != 2 {
		t.Fatalf("%d samples, %v", len(samples), err)
	}
	g := samples[0]
	if g.GPU.UUID != "GPU-0" || g.GPU.Device != "nvidia0" || g.GPU.PCIBusID != "00000000:18:00.0" || g.GPU.ModelName != "NVIDIA H100 80GB HBM3" {
		t.Errorf("labels %+v", g.GPU)
	}
	want := map[string]float64{
		"DCGM_FI_DEV_GPU_UTIL": 87, "DCGM_FI_DEV_MEM_COPY_UTIL": 41, "DCGM_FI_DEV_FB_USED": 70 * 1024, "DCGM_FI_DEV_FB_FREE": 10 * 1024,
		"DCGM_FI_DEV_POWER_USAGE": 512.345, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 9_000_000, "DCGM_FI_DEV_SM_CLOCK": 1980,
		"DCGM_FI_DEV_MEM_CLOCK": 2619, "DCGM_FI_DEV_GPU_TEMP": 61, "DCGM_FI_DEV_POWER_VIOLATION": 5000, "DCGM_FI_DEV_THERMAL_VIOLATION": 3,
	}
	if len(g.Values) != len(want) {
		t.Errorf("%d fields, want %d: %v", len(g.Values), len(want), g.Values)
	}
	for name, v := range want {
		if got, ok := g.Values[name]; !ok || math.Abs(got-v) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", name, got, ok, v)
		}
		if !NVMLFields[name] {
			t.Errorf("%s is read but not in NVMLFields", name)
		}
	}
	for _, name := range []string{"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_PROF_SM_ACTIVE"} {
		if _, ok := samples[1].Values[name]; ok {
			t.Errorf("GPU 1 has %s, which it does not support", name)
		}
	}
	// Exported through the collector, as dcgm-exporter names them.
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src, nil, nil))
	n, err := testutil.GatherAndCount(reg, "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_SM_ACTIVE")
	if err != nil || n != 1 {
		t.Errorf("%d power and SM-active series, want the one GPU with power: %v", n, err)
	}
	if err := src.Close(); err != nil || !lib.closed {
		t.Errorf("close: %v, shut down %v", err, lib.closed)
	}
	// A driver that does not initialise: down, with the reason.
	down := newNVML(&fakeNVML{initErr: errors.New("Driver Not Loaded")}, nil)
	if _, err := down.Read(context.Background()); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Driver Not Loaded") || down.Name() != "nvml" {
		t.Errorf("no driver: %v", err)
	}
}

// Without a driver here, the real NVML source is down with the reason.
func TestOpenNVMLWithoutADriver(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("an NVIDIA driver is here")
	}
	src := OpenNVML(nil)
	defer src.Close()
	if _, err := src.Read(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read: %v", err)
	} else {
		t.Logf("NVML: %v", err)
	}
}

// An endpoint's GPUs, by UUID or index, are the only ones its run reports
// read; a selection the source does not see is an error that names it.
func TestOnlyTheEndpointsGPUs(t *testing.T) {
	src := newNVML(&fakeNVML{}, nil)
	for which, want := range map[string][]string{"GPU-1": {"GPU-1"}, "0": {"GPU-0"}, "0,GPU-1": {"GPU-0", "GPU-1"}} {
		samples, err := Only(src, strings.Split(which, ",")).Read(context.Background())
		var got []string
		for _, s := range samples {
			got = append(got, s.GPU.UUID)
		}
		if err != nil || strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: %v %v, want %v", which, got, err, want)
		}
	}
	if _, err := Only(src, []string{"GPU-9"}).Read(context.Background()); err == nil || !strings.Contains(err.Error(), "GPU-9") {
		t.Errorf("a GPU the source does not see: %v", err)
	}
	if Only(src, nil) != src {
		t.Error("no selection is not the source itself")
	}
}
