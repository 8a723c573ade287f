package probe

import (
	"context"
	"errors"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Sink receives every measured request of a run, warmup excluded, in the
// order requests finish. Observe is called from one goroutine and must not
// block for long: sinks that do I/O queue the work.
type Sink interface {
	Observe(r *result.Request, v slo.Verdict)
}

// RunSink is a Sink that also hears when a run starts and how it ended:
// live gauges read from the run while it goes, last-run series after.
// runner.Execute calls both, for every caller alike.
type RunSink interface {
	Sink
	RunStarted(run *Run)
	RunFinished(run *Run, f Finished)
}

// Finished is how a run ended.
type Finished struct {
	Summary *stats.Summary
	Verdict Verdict
	// Err is why the run could not be carried out, or nil.
	Err error
}

// Verdict is a run's one result, the same in every sink, log and exit code.
type Verdict string

const (
	// Passed: the run met its SLO objective with 95% confidence, or had
	// none.
	Passed Verdict = "passed"
	// Failed: its SLO attainment fell below the objective, shown by its
	// 95% interval, or its answers were wrong.
	Failed Verdict = "failed"
	// Undecided: not enough evidence to tell whether it met its objective
	// (the attainment's interval holds it, or the probe's own delay could
	// account for the misses): neither a pass nor a failure.
	Undecided Verdict = "not_enough_evidence"
	// Errored: the run could not be carried out.
	Errored Verdict = "error"
	// Cancelled: a reload or a shutdown stopped it.
	Cancelled Verdict = "cancelled"
)

// VerdictOf is the verdict of a run that ended with s and err.
func VerdictOf(s *stats.Summary, err error) Verdict {
	switch {
	case errors.Is(err, context.Canceled):
		return Cancelled
	case err != nil:
		return Errored
	case s != nil && s.Undecided:
		return Undecided
	case s == nil || !s.Passed:
		return Failed
	}
	return Passed
}
