//go:build cgo && linux

package gpu

import (
	"errors"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// OpenNVML reads fields (all NVML can give when empty) through the
// driver's libnvidia-ml, loaded at run time; without a driver the source
// is down with the reason.
func OpenNVML(fields []Field) Source { return newNVML(goNVML{}, fields) }

// goNVML adapts github.com/NVIDIA/go-nvml to nvmlLib.
type goNVML struct{}

func nvmlErr(r nvml.Return) error {
	switch r {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_NOT_SUPPORTED:
		return errNVMLNotSupported
	}
	return errors.New(nvml.ErrorString(r))
}

func (goNVML) Init() error     { return nvmlErr(nvml.Init()) }
func (goNVML) Shutdown() error { return nvmlErr(nvml.Shutdown()) }
func (goNVML) Count() (int, error) {
	n, r := nvml.DeviceGetCount()
	return n, nvmlErr(r)
}

func (goNVML) Device(i int) (nvmlDevice, error) {
	d, r := nvml.DeviceGetHandleByIndex(i)
	return goDevice{d}, nvmlErr(r)
}

type goDevice struct{ d nvml.Device }

func (g goDevice) UUID() (string, error) {
	s, r := g.d.GetUUID()
	return s, nvmlErr(r)
}

func (g goDevice) Name() (string, error) {
	s, r := g.d.GetName()
	return s, nvmlErr(r)
}

func (g goDevice) PCIBusID() (string, error) {
	p, r := g.d.GetPciInfo()
	if err := nvmlErr(r); err != nil {
		return "", err
	}
	b := make([]byte, 0, len(p.BusId))
	for _, c := range p.BusId {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b), nil
}

func (g goDevice) Minor() (int, error) {
	n, r := g.d.GetMinorNumber()
	return n, nvmlErr(r)
}

func (g goDevice) Utilization() (uint32, uint32, error) {
	u, r := g.d.GetUtilizationRates()
	return u.Gpu, u.Memory, nvmlErr(r)
}

func (g goDevice) Memory() (uint64, uint64, error) {
	m, r := g.d.GetMemoryInfo()
	return m.Used, m.Free, nvmlErr(r)
}

func (g goDevice) PowerUsage() (uint32, error) {
	p, r := g.d.GetPowerUsage()
	return p, nvmlErr(r)
}

func (g goDevice) TotalEnergy() (uint64, error) {
	e, r := g.d.GetTotalEnergyConsumption()
	return e, nvmlErr(r)
}

func (g goDevice) Clock(memory bool) (uint32, error) {
	kind := nvml.CLOCK_SM
	if memory {
		kind = nvml.CLOCK_MEM
	}
	c, r := g.d.GetClockInfo(kind)
	return c, nvmlErr(r)
}

func (g goDevice) Temperature() (uint32, error) {
	t, r := g.d.GetTemperature(nvml.TEMPERATURE_GPU)
	return t, nvmlErr(r)
}

func (g goDevice) Violation(thermal bool) (uint64, error) {
	policy := nvml.PERF_POLICY_POWER
	if thermal {
		policy = nvml.PERF_POLICY_THERMAL
	}
	v, r := g.d.GetViolationStatus(policy)
	return v.ViolationTime, nvmlErr(r)
}
