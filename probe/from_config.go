package probe

import (
	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// NewRun builds the run of profile p against one endpoint.
func NewRun(p *config.Profile, ep *client.Endpoint, c *client.Client, sinks ...Sink) *Run {
	w := p.Workload
	return &Run{
		Profile: p.Name,
		Plan:    PlanOf(&p.Load),
		Workload: workload.NewSynthetic(
			workload.Lengths{Mean: w.InputTokens.Mean, Stddev: w.InputTokens.Stddev},
			workload.Lengths{Mean: w.OutputTokens.Mean, Stddev: w.OutputTokens.Stddev},
			w.Streaming(), w.Seed),
		SLO:      SLOSet(&p.SLO),
		Endpoint: ep,
		Client:   c,
		Sinks:    sinks,
	}
}

// PlanOf converts a profile's load block.
func PlanOf(l *config.Load) Plan {
	plan := Plan{Warmup: l.WarmupRequests, Seed: l.Seed}
	for _, st := range l.Plan() {
		plan.Stages = append(plan.Stages, Stage{
			Concurrency: st.Concurrency, Rate: st.Rate, Arrival: st.Arrival, Smoothness: st.Smoothness, MaxConcurrency: st.MaxConcurrency,
			Duration: st.Duration.D(), Requests: st.Requests,
		})
	}
	return plan
}

// SLOSet converts a profile's SLO block to thresholds.
func SLOSet(s *config.SLO) slo.Set {
	var set slo.Set
	add := func(k slo.Kind, d config.Duration) {
		if d > 0 {
			set.Thresholds = append(set.Thresholds, slo.Threshold{Kind: k, Max: d.D()})
		}
	}
	add(slo.TTFT, s.TTFT)
	add(slo.TTST, s.TTST)
	add(slo.ITL, s.ITL)
	add(slo.RequestLatency, s.RequestLatency)
	if s.OutputTokensPerSecond > 0 {
		set.Thresholds = append(set.Thresholds, slo.Threshold{Kind: slo.OutputTokensPerSecond, Floor: s.OutputTokensPerSecond})
	}
	set.Objective = s.Objective
	return set
}
