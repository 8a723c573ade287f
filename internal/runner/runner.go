// Package runner carries out one run of one job, the same way for the
// daemon, `tokenprobe run` and the benchmark harness: it tells the run's
// sinks that it starts, samples the GPUs and reads the server's own
// metrics while it goes, executes the plan, and gives the one verdict to
// every sink and to its caller.
package runner

import (
	"context"
	"slices"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/servermetrics"
	"github.com/tokenprobe/tokenprobe/probe"
)

// Options are what a run needs beyond itself.
type Options struct {
	// GPU, when set, is sampled every GPUInterval while the run goes, and
	// the summary gets what the GPUs did.
	GPU         gpu.Source
	GPUInterval time.Duration
	// Server, when set, is the endpoint's server's own metrics, read all
	// through the run; the summary gets what the server said beside what
	// the client measured.
	Server *servermetrics.Source
}

// Execute carries out run and returns how it ended. Every sink of the run
// that is a probe.RunSink hears the start and the end, the end with the
// same verdict the caller gets.
func Execute(ctx context.Context, run *probe.Run, o Options) probe.Finished {
	var lifecycle []probe.RunSink
	for _, s := range run.Sinks {
		if rs, ok := s.(probe.RunSink); ok {
			lifecycle = append(lifecycle, rs)
		}
	}
	for _, s := range lifecycle {
		s.RunStarted(run)
	}
	var sampler *gpu.Sampler
	if o.GPU != nil {
		sampler = gpu.Start(o.GPU, o.GPUInterval)
	}
	var server *servermetrics.Sampler
	if o.Server != nil {
		server = servermetrics.Start(o.Server)
		run.OnPhase = server.Mark
		// The run's refused connects are evidence of a restart the
		// readings can miss. For this run only: a caller may run it again.
		sinks := run.Sinks
		run.Sinks = append(slices.Clip(sinks), server)
		defer func() { run.Sinks = sinks }()
	}
	s, err := run.Execute(ctx)
	s.LevelName = run.Plan.LevelName()
	if sampler != nil {
		g := sampler.Stop(s.OutputTokens)
		s.GPU = &g
	}
	if server != nil {
		servermetrics.Explain(&s, server.Stop())
	}
	f := probe.Finished{Summary: &s, Verdict: probe.VerdictOf(&s, err), Err: err}
	for _, s := range lifecycle {
		s.RunFinished(run, f)
	}
	return f
}
