//go:build !cgo || !linux

package gpu

import "fmt"

// OpenNVML reports NVML unavailable: go-nvml needs cgo on Linux.
func OpenNVML([]Field) Source {
	return Down("nvml", fmt.Errorf("%w: this tokenprobe was built without cgo", ErrUnavailable))
}
