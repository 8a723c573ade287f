package probe

import (
	"slices"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/probehealth"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// levelGroups summarises a run by load level: one group per stage, and
// for a ramp one per step of the ramp (the level its results carry), so
// that a ramp's report reads latency against load like a sweep's.
type levelGroups struct {
	r      *Run
	groups []*levelGroup
	// one is set for a plan of one fixed level: its group would be the
	// run's own summary, each result added and each quantile sorted
	// twice, so none is kept.
	one bool
	// probes are the probe's own delay over each stage, by stage.
	probes map[int]stats.Probe
}

// setProbe records the probe's delay over a stage.
func (g *levelGroups) setProbe(stage int, r probehealth.Reading) {
	if g.probes == nil {
		g.probes = map[int]stats.Probe{}
	}
	g.probes[stage] = probeOf(r)
}

// probeOf is a reading as a summary holds it.
func probeOf(r probehealth.Reading) stats.Probe {
	return stats.Probe{
		DelayP50Ms: ms(r.P50), DelayMeanMs: ms(r.Mean), DelayP99Ms: ms(r.P99), DelayMaxMs: ms(r.Max),
		Samples: r.Samples, StealPercent: r.StealPercent,
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type levelGroup struct {
	stage int
	level float64
	first time.Time // the earliest scheduled request, for the ramp's order
	agg   *stats.Aggregator
}

func newLevelGroups(r *Run) *levelGroups {
	g := &levelGroups{r: r}
	if r.Plan.Search != nil {
		return g // a search's steps get their groups as they run
	}
	if len(r.Plan.Stages) == 1 && r.Plan.Stages[0].RampTo == 0 {
		g.one = true
		return g
	}
	for i, st := range r.Plan.Stages {
		if st.RampTo == 0 { // a fixed level: its group exists even if no request finished
			g.groups = append(g.groups, &levelGroup{stage: i, level: st.Level(), agg: g.newAgg(st.Level())})
		}
	}
	return g
}

func (g *levelGroups) newAgg(level float64) *stats.Aggregator {
	return stats.NewAggregator(g.r.Profile, g.r.Endpoint.Name, g.r.Endpoint.Model, level, g.r.SLO.Objective)
}

func (g *levelGroups) add(res *result.Request, v slo.Verdict) {
	if g.one {
		return
	}
	var grp *levelGroup
	for _, c := range g.groups {
		if c.stage == res.Stage && (c.level == res.Level || g.r.Plan.Stages[res.Stage].RampTo == 0) {
			grp = c
			break
		}
	}
	if grp == nil {
		grp = &levelGroup{stage: res.Stage, level: res.Level, first: res.Scheduled, agg: g.newAgg(res.Level)}
		g.groups = append(g.groups, grp)
	}
	if res.Scheduled.Before(grp.first) || grp.first.IsZero() {
		grp.first = res.Scheduled
	}
	grp.agg.Add(res, v)
}

// evidence is the verdict on the objective of a stage's requests so
// far, with the probe's delay over the stage, and their attainment.
func (g *levelGroups) evidence(stage int) (stats.Evidence, float64) {
	good, counted, explained := 0, 0, 0
	for _, grp := range g.groups {
		if grp.stage == stage {
			gd, c, e := grp.agg.Counts(g.probes[stage].DelayP99Ms)
			good, counted, explained = good+gd, counted+c, explained+e
		}
	}
	att := 0.0
	if counted > 0 {
		att = float64(good) / float64(counted)
	}
	return stats.Judge(good, counted, explained, g.r.SLO.Objective), att
}

// summaries returns one summary per group, in the order of the plan and,
// within a ramp, of time; none for a plan of one fixed level, whose
// summary is the run's.
func (g *levelGroups) summaries() []stats.Summary {
	slices.SortStableFunc(g.groups, func(a, b *levelGroup) int {
		if a.stage != b.stage {
			return a.stage - b.stage
		}
		return a.first.Compare(b.first)
	})
	out := make([]stats.Summary, len(g.groups))
	for i, grp := range g.groups {
		if p, ok := g.probes[grp.stage]; ok {
			grp.agg.SetProbe(p)
		}
		out[i] = grp.agg.Summary()
	}
	return out
}
