//go:build !cgo || !linux

package gpu

import "fmt"

// Available reports whether this build can talk to DCGM at all.
const Available = false

// Open reports DCGM unavailable: go-dcgm needs cgo on Linux.
func Open(string, []Field) Source {
	return Down("dcgm", fmt.Errorf("%w: this tokenprobe was built without cgo", ErrUnavailable))
}
