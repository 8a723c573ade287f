//go:build cgo && linux

package gpu

import (
	"context"
	"fmt"
	"os"
	"sync"

	godcgm "github.com/NVIDIA/go-dcgm/pkg/dcgm"
)

// Available reports whether this build can talk to DCGM at all.
const Available = true

// blank is DCGM's marker for a value it does not have (DCGM_INT64_BLANK
// and above; DCGM_FP64_BLANK is 140737488355328.0).
const blankInt = 0x7ffffff0

type dcgmSource struct {
	mu      sync.Mutex
	cleanup func()
	gpus    []GPU
	ids     []godcgm.Short
	names   map[godcgm.Short]string
}

// Open starts DCGM in-process (address "") or connects to an
// nv-hostengine at address, and watches fields (all known when empty).
// When DCGM is missing or Init fails, it returns a source that is down with
// the reason: no other go-dcgm function is ever called after a failed Init,
// which would kill the process.
func Open(address string, fields []Field) Source {
	var cleanup func()
	var err error
	if address == "" {
		cleanup, err = godcgm.Init(godcgm.Embedded)
	} else {
		cleanup, err = godcgm.Init(godcgm.Standalone, address, "0")
	}
	if err != nil {
		return Down("dcgm", fmt.Errorf("%w: DCGM init: %w", ErrUnavailable, err))
	}
	src, err := watch(fields)
	if err != nil {
		cleanup()
		return Down("dcgm", fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	src.cleanup = cleanup
	return src
}

func watch(fields []Field) (*dcgmSource, error) {
	if len(fields) == 0 {
		fields = Fields
	}
	ids, err := godcgm.GetSupportedDevices()
	if err != nil {
		return nil, fmt.Errorf("listing GPUs: %w", err)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("DCGM sees no supported GPU")
	}
	host, _ := os.Hostname()
	s := &dcgmSource{names: map[godcgm.Short]string{}}
	for _, id := range ids {
		info, err := godcgm.GetDeviceInfo(id)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", id, err)
		}
		s.gpus = append(s.gpus, GPU{Index: id, UUID: info.UUID, PCIBusID: info.PCI.BusID, Device: fmt.Sprintf("nvidia%d", id),
			ModelName: info.Identifiers.Model, Hostname: host})
	}
	for _, f := range fields {
		s.ids = append(s.ids, godcgm.Short(f.ID))
		s.names[godcgm.Short(f.ID)] = f.Name
	}
	group, err := godcgm.NewDefaultGroup("tokenprobe")
	if err != nil {
		return nil, fmt.Errorf("GPU group: %w", err)
	}
	fg, err := godcgm.FieldGroupCreate("tokenprobe", s.ids)
	if err != nil {
		return nil, fmt.Errorf("field group: %w", err)
	}
	if err := godcgm.WatchFieldsWithGroup(fg, group); err != nil {
		return nil, fmt.Errorf("watching fields: %w", err)
	}
	return s, nil
}

func (s *dcgmSource) Name() string { return "dcgm" }

func (s *dcgmSource) Read(context.Context) ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Sample, 0, len(s.gpus))
	for _, g := range s.gpus {
		vals, err := godcgm.GetLatestValuesForFields(g.Index, s.ids)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", g.Index, err)
		}
		smp := Sample{GPU: g, Values: map[string]float64{}}
		for _, v := range vals {
			if v.Status != 0 {
				continue // not supported on this GPU (profiling fields on consumer parts)
			}
			var x float64
			switch v.FieldType {
			case 'd':
				x = v.Float64()
				if x >= 140737488355328.0 {
					continue
				}
			case 'i':
				n := v.Int64()
				if n >= blankInt {
					continue
				}
				x = float64(n)
			default:
				continue
			}
			// Profiling fields are ratios in DCGM; dcgm-exporter exports them
			// as they come, so do we.
			smp.Values[s.names[v.FieldID]] = x
		}
		out = append(out, smp)
	}
	return out, nil
}

func (s *dcgmSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cleanup != nil {
		s.cleanup()
		s.cleanup = nil
	}
	return nil
}
