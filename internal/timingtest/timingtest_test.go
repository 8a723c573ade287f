package timingtest

import (
	"strings"
	"testing"
)

// recordingTB captures what Retry reports instead of failing this test.
type recordingTB struct {
	testing.TB
	failed  bool
	skipped bool
	errs    []string
	logs    []string
}

func (r *recordingTB) Skipf(string, ...any) { r.skipped = true }

func (r *recordingTB) Helper()      {}
func (r *recordingTB) Failed() bool { return r.failed }
func (r *recordingTB) Errorf(format string, _ ...any) {
	r.failed = true
	r.errs = append(r.errs, format)
}
func (r *recordingTB) Logf(format string, _ ...any) { r.logs = append(r.logs, format) }

func TestRetryPassesOnALaterAttempt(t *testing.T) {
	rec := &recordingTB{TB: t}
	var runs int
	Retry(rec, 3, func(a *Attempt) {
		runs++
		if a.N < 2 {
			a.Errorf("late by %d ms", 40)
		}
	})
	if rec.failed || runs != 2 || len(rec.logs) != 1 {
		t.Fatalf("failed %v after %d runs, logs %v", rec.failed, runs, rec.logs)
	}
}

func TestRetryFailsWhenEveryAttemptFails(t *testing.T) {
	rec := &recordingTB{TB: t}
	var runs int
	Retry(rec, 3, func(a *Attempt) {
		runs++
		a.Errorf("gap %d wrong", a.N)
	})
	if !rec.failed || runs != 3 {
		t.Fatalf("failed %v after %d runs", rec.failed, runs)
	}
}

// A failure reported on the test itself (not a timing one) is not retried.
func TestRetryStopsOnAPlainFailure(t *testing.T) {
	rec := &recordingTB{TB: t}
	var runs int
	Retry(rec, 3, func(a *Attempt) {
		runs++
		rec.Errorf("wrong outcome")
		a.Errorf("and late")
	})
	if runs != 1 || len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "wrong outcome") {
		t.Fatalf("%d runs, errors %v", runs, rec.errs)
	}
}

// When every attempt ran under heavy CPU steal, the timing could not be
// checked: the test is skipped, not failed. Under light steal it fails.
func TestRetrySkipsWhenTheHostTookTheCPU(t *testing.T) {
	defer func(orig func() func() float64) { measureSteal = orig }(measureSteal)
	for _, c := range []struct {
		steal float64
		skip  bool
	}{{50, true}, {5, false}} {
		measureSteal = func() func() float64 { return func() float64 { return c.steal } }
		rec := &recordingTB{TB: t}
		Retry(rec, 2, func(a *Attempt) { a.Errorf("late") })
		if rec.skipped != c.skip || rec.failed == c.skip {
			t.Errorf("steal %.0f%%: skipped %v failed %v", c.steal, rec.skipped, rec.failed)
		}
	}
}
