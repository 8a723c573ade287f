package bench

import (
	"fmt"
	"strconv"
	"time"
)

// Quietness is how undisturbed the machine was during a run. On a shared
// VM the tail figures (timing error and dispatch lag p99) follow the host
// more than the client: the same binary's dispatch lag p99 at 2,000 req/s
// was 1.1 ms in one hour and 5 ms in the next. Each report says which kind
// of hour it was measured in.
type Quietness struct {
	// StealPercent is the share of CPU time the hypervisor gave to others
	// over the whole run, from /proc/stat (-1 where unknown).
	StealPercent float64 `json:"steal_percent"`
	// SleepBefore and SleepAfter are how late a 1 ms sleep woke in the
	// idle harness before the first level and after the last.
	SleepBefore *Quantiles `json:"sleep_overshoot_before,omitempty"`
	SleepAfter  *Quantiles `json:"sleep_overshoot_after,omitempty"`
}

// Disturbance is how much of the machine's CPU the hypervisor gave to
// others while something was measured.
type Disturbance struct {
	// StealPercent is the steal during the measurement (-1 where unknown).
	StealPercent float64 `json:"steal_percent"`
	// Remeasured, when not 0, is the steal of the other measurement of the
	// same thing (RetrySteal): the one kept had the lesser.
	Remeasured float64 `json:"remeasured_steal_percent,omitempty"`
}

func (d *Disturbance) disturbance() *Disturbance { return d }

// String is the steal, and the other measurement's when there were two.
func (d Disturbance) String() string {
	if d.Remeasured != 0 {
		return fmt.Sprintf("%s (again: %s)", stealText(d.StealPercent), stealText(d.Remeasured))
	}
	return stealText(d.StealPercent)
}

// lessDisturbed measures again, once, when first was taken under more
// than retry percent of steal (retry 0: never), and keeps the less
// disturbed of the two, marked with the other's steal. When the second
// measurement fails, first is returned with its error.
func lessDisturbed[T any, P interface {
	*T
	disturbance() *Disturbance
}](retry float64, first T, again func() (T, error), announce func(steal float64)) (T, error) {
	d := P(&first).disturbance()
	if retry <= 0 || d.StealPercent <= retry {
		return first, nil
	}
	announce(d.StealPercent)
	time.Sleep(time.Second)
	second, err := again()
	if err != nil {
		return first, err
	}
	if d2 := P(&second).disturbance(); d2.StealPercent >= 0 && d2.StealPercent < d.StealPercent {
		d2.Remeasured = d.StealPercent
		return second, nil
	}
	d.Remeasured = P(&second).disturbance().StealPercent
	return first, nil
}

// sleepOvershoot sleeps 1 ms n times and returns how late each woke.
func sleepOvershoot(n int) *Quantiles {
	h := NewHistogram()
	for range n {
		due, woke := sleepOnce()
		h.Observe(woke.Sub(due))
	}
	return quantilesOf(h)
}

// sleepOnce sleeps 1 ms: when it was due to wake, and when it woke.
func sleepOnce() (due, woke time.Time) {
	start := time.Now()
	time.Sleep(time.Millisecond)
	return start.Add(time.Millisecond), time.Now()
}

// String says how quiet the machine was, in a sentence, or nothing if
// nothing was measured.
func (q Quietness) String() string {
	if q.SleepBefore == nil {
		return ""
	}
	ms := func(us float64) string { return strconv.FormatFloat(us/1000, 'f', 2, 64) }
	s := fmt.Sprintf("The machine during this run: a 1 ms sleep in the idle harness woke late by %s / %s ms (p50 / p99) before the levels",
		ms(q.SleepBefore.P50), ms(q.SleepBefore.P99))
	if q.SleepAfter != nil {
		s += fmt.Sprintf(" and %s / %s ms after them", ms(q.SleepAfter.P50), ms(q.SleepAfter.P99))
	}
	if q.StealPercent >= 0 {
		s += fmt.Sprintf("; the hypervisor took %.1f%% of the CPU time (steal)", q.StealPercent)
	}
	return s + ". On a quiet machine the sleep is under 0.4 ms late at p99 and the steal near 0; tail figures measured in a disturbed hour say more of the host than of the client."
}
