package setup

import (
	"fmt"
	"math"

	"github.com/tokenprobe/tokenprobe/config"
)

// fileHeadroom is the descriptors a run needs beside one per stream: the
// process's own, the simulator's listener, metrics readers, artifacts.
const fileHeadroom = 64

// StreamsOf is the most requests a profile can hold open at once: its
// largest concurrency (a ramp's end included) or open-loop cap; 0 where
// an open loop has no cap, which only its server bounds.
func StreamsOf(p *config.Profile) int {
	plan := PlanOf(&p.Load)
	most := 0
	for _, st := range plan.Stages {
		n := max(st.Concurrency, st.MaxConcurrency)
		if st.Concurrency > 0 && st.RampTo > 0 {
			n = max(n, int(math.Ceil(st.RampTo)))
		}
		most = max(most, n)
	}
	if s := plan.Search; s != nil && !s.Rate {
		most = max(most, int(math.Ceil(s.Max)))
	}
	return most
}

// CheckOpenFiles refuses profiles whose streams cannot all be open at
// once under this process's open-file limit (Go raises the soft limit to
// the hard one at start, so this is the hard limit): better said before
// the run than as thousands of connect errors in it. limit 0 checks
// nothing.
func CheckOpenFiles(cfg *config.Config, profiles []*config.Profile, limit uint64) error {
	var errs config.Errors
	for _, p := range profiles {
		need := StreamsOf(p)
		if need == 0 || uint64(need+fileHeadroom) <= limit {
			continue
		}
		i := 0
		for j, q := range cfg.Profiles {
			if q == p {
				i = j
			}
		}
		errs = append(errs, cfg.Errorf(fmt.Sprintf("profiles[%d].load", i),
			"%d streams at once need about %d open files, and this process may open %d: raise the limit (ulimit -n %d in the shell, LimitNOFILE=%d in a systemd unit, or the container runtime's nofile ulimit) and run again",
			need, need+fileHeadroom, limit, roundUp(need+fileHeadroom), roundUp(need+fileHeadroom)))
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// roundUp is n rounded up to a power of two, the usual ulimit values.
func roundUp(n int) int {
	p := 1024
	for p < n {
		p *= 2
	}
	return p
}
