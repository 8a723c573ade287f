// Package steal measures the share of the machine's CPU time that the
// hypervisor gave to other tenants (the steal column of /proc/stat). On a
// shared VM it says whether a timing figure, or a timing test's failure,
// tells of the code or of the host.
package steal

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Read returns the machine's steal and total CPU time, in ticks, from
// /proc/stat's first line.
func Read() (steal, total int64, err error) {
	steal, _, total, err = read()
	return steal, total, err
}

// read is Read with the idle time (idle and iowait) too.
func read() (steal, idle, total int64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 9 || string(f[0]) != "cpu" {
		return 0, 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	// cpu user nice system idle iowait irq softirq steal [guest guest_nice]:
	// guest time is already counted in user.
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += n
		switch i {
		case 3, 4:
			idle += n
		case 7:
			steal = n
		}
	}
	return steal, idle, total, nil
}

// Meter measures the steal share between Start and Percent.
type Meter struct{ steal, idle, total int64 }

// Start starts a Meter; one that could not read /proc/stat reports -1.
func Start() Meter {
	s, i, t, err := read()
	if err != nil {
		return Meter{-1, -1, -1}
	}
	return Meter{s, i, t}
}

// BusyPercent is the share of the machine's CPU time since the meter
// started that its own processes used (neither idle nor stolen): how
// loaded the machine was, 100 when every core was kept busy. -1 where
// not known.
func (m Meter) BusyPercent() float64 {
	s, i, t, err := read()
	if err != nil || m.total < 0 || t <= m.total {
		return -1
	}
	return 100 * float64((t-m.total)-(i-m.idle)-(s-m.steal)) / float64(t-m.total)
}

// Percent is the steal share since the meter started, or -1 where it is
// not known.
func (m Meter) Percent() float64 {
	s, t, err := Read()
	if err != nil || m.total < 0 || t <= m.total {
		return -1
	}
	return 100 * float64(s-m.steal) / float64(t-m.total)
}
