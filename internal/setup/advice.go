package setup

import (
	"fmt"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Advice is what cfg asks that it cannot do, though valid: a run, a
// sweep's level or a search's step that holds fewer requests than can
// ever show its profile's objective met. Every request good, its
// attainment's 95% interval would still hold the objective, and the
// verdict would be not enough evidence however good the server. A
// duration may end a level sooner; a request count is its most, so only
// counts are judged. `tokenprobe check` and `tokenprobe run` print it as
// notes, each at the field that sets the count.
func Advice(cfg *config.Config) config.Errors {
	var out config.Errors
	for i, p := range cfg.Profiles {
		need := stats.RequestsToShow(p.SLO.Objective)
		if p.SLO.Objective <= 0 || need < 0 {
			continue
		}
		few := func(field string, n int, what string) {
			if n > 0 && n < need {
				out = append(out, cfg.Errorf(fmt.Sprintf("profiles[%d].%s", i, field),
					"%s of %d requests can never show the %s objective met: it takes at least %d, every one good (95%% interval); with fewer it says not enough evidence (exit 4) however good the server",
					what, n, stats.Pct(p.SLO.Objective), need))
			}
		}
		switch l := p.Load; {
		case l.Sweep != nil:
			few("load.sweep.requests", l.Sweep.Requests, "a level")
		case l.Search != nil:
			few("load.requests", l.Requests, "a step")
		case len(l.Stages) == 0:
			few("load.requests", l.Requests, "a run")
		}
	}
	return out
}
