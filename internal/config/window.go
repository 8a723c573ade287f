package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a time of day when runs may start, from Start to End since
// midnight in Loc; it may cross midnight.
type Window struct {
	Start, End time.Duration
	Loc        *time.Location
}

// ParseWindow reads "HH:MM-HH:MM" in the named time zone ("" is UTC).
func ParseWindow(s, tz string) (Window, error) {
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return Window{}, fmt.Errorf("unknown time zone %q", tz)
		}
	}
	from, to, ok := strings.Cut(s, "-")
	if !ok {
		return Window{}, fmt.Errorf("%q is not HH:MM-HH:MM", s)
	}
	a, err1 := clock(from)
	b, err2 := clock(to)
	switch {
	case err1 != nil || err2 != nil:
		return Window{}, fmt.Errorf("%q is not HH:MM-HH:MM", s)
	case a == b:
		return Window{}, fmt.Errorf("%q starts and ends at the same time", s)
	}
	return Window{Start: a, End: b, Loc: loc}, nil
}

func clock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(strings.TrimSpace(s), ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 24 || mm < 0 || mm > 59 || hh == 24 && mm > 0 {
		return 0, fmt.Errorf("bad time %q", s)
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}
