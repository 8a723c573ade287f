package gpu

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// h200 is the H200 of testdata/nvml-h200.golden.txt as its driver
// answered NVML, in NVML's own units (bytes, mW, mJ, ns): the readings
// behind the exposition tokenprobe exported there.
type h200 struct{}

func (h200) UUID() (string, error)                { return "GPU-a21e61c2-ef18-7d15-435f-1a7660d4990c", nil }
func (h200) Name() (string, error)                { return "NVIDIA H200", nil }
func (h200) PCIBusID() (string, error)            { return "00000000:00:06.0", nil }
func (h200) Minor() (int, error)                  { return 0, nil }
func (h200) Utilization() (uint32, uint32, error) { return 99, 24, nil }
func (h200) Memory() (uint64, uint64, error) {
	return 1625875 * (1 << 20) / 1000, 142145125 * (1 << 20) / 1000, nil
}
func (h200) PowerUsage() (uint32, error)  { return 692_147, nil }
func (h200) TotalEnergy() (uint64, error) { return 34_582_407, nil }
func (h200) Temperature() (uint32, error) { return 61, nil }
func (h200) Clock(mem bool) (uint32, error) {
	return map[bool]uint32{false: 1470, true: 3201}[mem], nil
}
func (h200) Violation(thermal bool) (uint64, error) {
	if thermal {
		return 0, nil
	}
	return 43_405_155_584, nil
}

type oneGPU struct{}

func (oneGPU) Init() error                    { return nil }
func (oneGPU) Shutdown() error                { return nil }
func (oneGPU) Count() (int, error)            { return 1, nil }
func (oneGPU) Device(int) (nvmlDevice, error) { return h200{}, nil }

// The exposition a real H200 gave through NVML (captured by
// tools/gpucheck/run.sh) is what the NVML mapping makes of that GPU's
// readings, byte for byte; its framebuffer adds up to the memory.total
// nvidia-smi gave at the same moment (the unit is MiB, not MB), its power
// is in W, and the profiling fields are absent, not 0.
func TestNVMLOnARealH200(t *testing.T) {
	golden, err := os.ReadFile("testdata/nvml-h200.golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(golden))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		f := families[name]
		if f == nil || len(f.Metric) != 1 {
			t.Fatalf("%s: want one series in the golden file", name)
		}
		if f.GetType() == dto.MetricType_COUNTER {
			return f.Metric[0].GetCounter().GetValue()
		}
		return f.Metric[0].GetGauge().GetValue()
	}
	if total := value("DCGM_FI_DEV_FB_USED") + value("DCGM_FI_DEV_FB_FREE"); total != 143771 {
		t.Errorf("framebuffer used + free = %g MiB, nvidia-smi's memory.total is 143771 MiB", total)
	}
	if w := value("DCGM_FI_DEV_POWER_USAGE"); w < 600 || w > 700 {
		t.Errorf("power %g, want W under full load below the 700 W limit", w)
	}
	for _, f := range Fields {
		got := families[f.Name]
		switch {
		case !NVMLFields[f.Name] && got != nil:
			t.Errorf("%s is DCGM's alone, yet NVML exported it", f.Name)
		case NVMLFields[f.Name] && f.Name != "DCGM_FI_DEV_XID_ERRORS" && got == nil:
			t.Errorf("%s missing from the real exposition", f.Name)
		case got != nil && (got.GetHelp() != f.Help || !strings.EqualFold(got.GetType().String(), f.Type)):
			t.Errorf("%s: help %q type %s, want dcgm-exporter's %q %s", f.Name, got.GetHelp(), got.GetType(), f.Help, f.Type)
		}
	}

	src := newNVML(oneGPU{}, nil).(*nvmlSource)
	src.hostname = "vm"
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src, nil, nil))
	if err := testutil.GatherAndCompare(reg, bytes.NewReader(golden)); err != nil {
		t.Error(err)
	}
	samples, err := src.Read(context.Background())
	if err != nil || math.Abs(samples[0].Values["DCGM_FI_DEV_POWER_VIOLATION"]-4.3405155584e7) > 1e-3 {
		t.Errorf("power violation %v (%v), want the driver's ns in us", samples, err)
	}
}

// auto says why it passed over DCGM, for the log line an operator reads
// when the profiling fields are missing.
func TestAutoSaysWhyItChoseNVML(t *testing.T) {
	src := chosen{newNVML(oneGPU{}, nil), "auto chose nvml: DCGM init: libdcgm.so.4 not found"}
	if Why(src) == "" || src.Name() != "nvml" || Why(newNVML(oneGPU{}, nil)) != "" {
		t.Errorf("why %q, name %q", Why(src), src.Name())
	}
}

// A run report over NVML readings has no SM activity at all (the H200's
// first report printed "SM active avg 0.00 peak 0.00"); over DCGM's an idle
// SM reads 0, and that 0 is kept.
func TestSMActiveIsAbsentWhereItWasNotRead(t *testing.T) {
	src := newNVML(oneGPU{}, nil)
	samples, err := src.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := Summarise([][]Sample{samples, samples}, 100); r.SMActiveAvg != nil || r.SMActivePeak != nil || r.UtilAvg != 99 {
		t.Errorf("NVML: SM active %v/%v, util %g; want none, 99", r.SMActiveAvg, r.SMActivePeak, r.UtilAvg)
	}
	samples[0].Values["DCGM_FI_PROF_SM_ACTIVE"] = 0
	if r := Summarise([][]Sample{samples}, 100); r.SMActiveAvg == nil || *r.SMActiveAvg != 0 {
		t.Errorf("DCGM idle: SM active %v, want a 0 that was read", r.SMActiveAvg)
	}
}
