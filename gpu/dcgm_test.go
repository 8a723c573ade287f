package gpu

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
