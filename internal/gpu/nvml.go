package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
)

// The NVML source reads what every NVIDIA driver's libnvidia-ml can give,
// for GPU nodes that run no DCGM, under dcgm-exporter's names so that the
// dashboards, alerts and run reports work unchanged. The profiling fields
// (SM, tensor and DRAM activity) are DCGM's own: under NVML they are
// absent, never zero.

// nvmlLib is what the NVML source needs of the library: the cgo build
// adapts github.com/NVIDIA/go-nvml to it, tests fake it.
type nvmlLib interface {
	Init() error
	Shutdown() error
	Count() (int, error)
	Device(i int) (nvmlDevice, error)
}

// nvmlDevice is one GPU. A reading the GPU does not support returns
// errNVMLNotSupported, and the field is left out.
type nvmlDevice interface {
	UUID() (string, error)
	Name() (string, error)
	PCIBusID() (string, error)
	Minor() (int, error)
	Utilization() (gpu, memory uint32, err error)
	Memory() (used, free uint64, err error) // bytes
	PowerUsage() (milliwatts uint32, err error)
	TotalEnergy() (millijoules uint64, err error)
	Clock(memory bool) (mhz uint32, err error)
	Temperature() (celsius uint32, err error)
	Violation(thermal bool) (nanoseconds uint64, err error)
}

// errNVMLNotSupported is a device's answer for a reading it lacks.
var errNVMLNotSupported = errors.New("not supported")

// NVMLFields are the fields the NVML source provides.
var NVMLFields = map[string]bool{
	"DCGM_FI_DEV_SM_CLOCK": true, "DCGM_FI_DEV_MEM_CLOCK": true, "DCGM_FI_DEV_GPU_TEMP": true, "DCGM_FI_DEV_POWER_USAGE": true,
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": true, "DCGM_FI_DEV_GPU_UTIL": true, "DCGM_FI_DEV_MEM_COPY_UTIL": true,
	"DCGM_FI_DEV_FB_FREE": true, "DCGM_FI_DEV_FB_USED": true, "DCGM_FI_DEV_POWER_VIOLATION": true, "DCGM_FI_DEV_THERMAL_VIOLATION": true,
}

type nvmlSource struct {
	mu       sync.Mutex
	lib      nvmlLib
	want     map[string]bool
	hostname string
}

// newNVML reads fields (all NVML can give when empty) through lib, or is
// down with the reason when the library does not initialise.
func newNVML(lib nvmlLib, fields []Field) Source {
	if err := lib.Init(); err != nil {
		return Down("nvml", fmt.Errorf("%w: NVML init: %w", ErrUnavailable, err))
	}
	want := map[string]bool{}
	for _, f := range fields {
		want[f.Name] = true
	}
	if len(want) == 0 {
		want = NVMLFields
	}
	host, _ := os.Hostname()
	return &nvmlSource{lib: lib, want: want, hostname: host}
}

func (s *nvmlSource) Name() string { return "nvml" }

func (s *nvmlSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lib.Shutdown()
}

func (s *nvmlSource) Read(ctx context.Context) ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.lib.Count()
	if err != nil {
		return nil, fmt.Errorf("counting GPUs: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: NVML sees no GPU", ErrUnavailable)
	}
	out := make([]Sample, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, err := s.lib.Device(i)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		out = append(out, s.sample(uint(i), d))
	}
	return out, nil
}

// sample reads one device: each field it supports, in dcgm-exporter's
// units (W, MiB, MHz, us).
func (s *nvmlSource) sample(index uint, d nvmlDevice) Sample {
	g := GPU{Index: index, Hostname: s.hostname}
	g.UUID, _ = d.UUID()
	g.ModelName, _ = d.Name()
	g.PCIBusID, _ = d.PCIBusID()
	if minor, err := d.Minor(); err == nil {
		g.Device = fmt.Sprintf("nvidia%d", minor)
	}
	v := map[string]float64{}
	set := func(name string, value float64, err error) {
		if err == nil && s.want[name] {
			v[name] = value
		}
	}
	gpuUtil, memUtil, err := d.Utilization()
	set("DCGM_FI_DEV_GPU_UTIL", float64(gpuUtil), err)
	set("DCGM_FI_DEV_MEM_COPY_UTIL", float64(memUtil), err)
	used, free, err := d.Memory()
	set("DCGM_FI_DEV_FB_USED", float64(used)/(1<<20), err)
	set("DCGM_FI_DEV_FB_FREE", float64(free)/(1<<20), err)
	mw, err := d.PowerUsage()
	set("DCGM_FI_DEV_POWER_USAGE", float64(mw)/1000, err)
	mj, err := d.TotalEnergy()
	set("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", float64(mj), err)
	sm, err := d.Clock(false)
	set("DCGM_FI_DEV_SM_CLOCK", float64(sm), err)
	mem, err := d.Clock(true)
	set("DCGM_FI_DEV_MEM_CLOCK", float64(mem), err)
	temp, err := d.Temperature()
	set("DCGM_FI_DEV_GPU_TEMP", float64(temp), err)
	power, err := d.Violation(false)
	set("DCGM_FI_DEV_POWER_VIOLATION", float64(power)/1000, err)
	thermal, err := d.Violation(true)
	set("DCGM_FI_DEV_THERMAL_VIOLATION", float64(thermal)/1000, err)
	return Sample{GPU: g, Values: v}
}

// OpenAuto opens DCGM (in-process, or the nv-hostengine at address) if it
// initialises, else NVML, else a source that is down with both reasons.
func OpenAuto(address string, fields []Field) Source {
	dcgm := Open(address, fields)
	if _, isDown := dcgm.(down); !isDown {
		return dcgm
	}
	_, dcgmErr := dcgm.Read(context.Background())
	nvml := OpenNVML(fields)
	if _, isDown := nvml.(down); !isDown {
		return chosen{nvml, fmt.Sprintf("auto chose nvml: %v", dcgmErr)}
	}
	_, nvmlErr := nvml.Read(context.Background())
	return Down("auto", fmt.Errorf("neither DCGM nor NVML: %w; %w", dcgmErr, nvmlErr))
}

// chosen is the source auto picked, with why it passed over DCGM: on a GPU
// node the operator's first question is why the profiling fields are absent.
type chosen struct {
	Source
	why string
}

// Why says why auto chose src over DCGM ("" where auto was not asked, or
// chose DCGM: nothing was passed over).
func Why(src Source) string {
	if c, ok := src.(chosen); ok {
		return c.why
	}
	return ""
}
