//go:build !linux

package schedslice

import "time"

// Apply does nothing outside Linux.
func Apply(d time.Duration) (int, error) {
	if err := Validate(d); err != nil || d == 0 {
		return 0, err
	}
	return 0, ErrUnsupported
}

// Current is 0 outside Linux.
func Current() (time.Duration, error) { return 0, nil }
