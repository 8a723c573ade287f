package setup

import (
	"fmt"
	"math"

	"github.com/tokenprobe/tokenprobe/internal/config"
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
// the run than as thousands of connect errors in it. shares is how many
// processes divide each profile's load (a study's shards, or `tokenprobe
// run --processes`): this process holds its share. A stream to a
// `simulator:` endpoint costs two descriptors, as the simulator serves it
// in this process. limit 0 checks nothing.
func CheckOpenFiles(cfg *config.Config, profiles []*config.Profile, limit uint64, shares int) error {
	var errs config.Errors
	for _, p := range profiles {
		need, files := filesOf(cfg, p, shares)
		if limit == 0 || need == 0 || uint64(files) <= limit {
			continue
		}
		i := 0
		for j, q := range cfg.Profiles {
			if q == p {
				i = j
			}
		}
		what := fmt.Sprintf("%d streams at once", need)
		if shares > 1 {
			what = fmt.Sprintf("%d streams at once (this process's share of %d)", need, StreamsOf(p))
		}
		both := ""
		if files > need+fileHeadroom {
			both = " (two a stream: the simulator serves them in this process)"
		}
		how := fmt.Sprintf("raise the limit (ulimit -n %d in the shell, LimitNOFILE=%d in a systemd unit, or the container runtime's nofile ulimit) and run again",
			roundUp(files), roundUp(files))
		if shares == 1 && limit > 2*fileHeadroom {
			how += fmt.Sprintf(", or spread them over processes (tokenprobe run --processes %d)", ProcessesFor(cfg, []*config.Profile{p}, limit))
		}
		errs = append(errs, cfg.Errorf(fmt.Sprintf("profiles[%d].load", i), "%s need about %d open files%s, and this process may open %d: %s", what, files, both, limit, how))
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// filesOf is the streams one of shares processes holds open for p (its
// share of StreamsOf, rounded up) and the open files they need.
func filesOf(cfg *config.Config, p *config.Profile, shares int) (streams, files int) {
	streams = StreamsOf(p)
	if shares > 1 {
		streams = (streams + shares - 1) / shares
	}
	per := 1
	for _, name := range p.Endpoints {
		if e := cfg.Endpoint(name); e != nil && e.Simulator != nil {
			per = 2
		}
	}
	return streams, per*streams + fileHeadroom
}

// ProcessesFor is the fewest processes whose shares of every profile fit
// the open-file limit: what `tokenprobe run --processes auto` starts. 1
// where one process holds them, or where the limit is unknown (0).
func ProcessesFor(cfg *config.Config, profiles []*config.Profile, limit uint64) int {
	n := 1
	if limit <= 2*fileHeadroom {
		return n
	}
	for _, p := range profiles {
		for {
			_, files := filesOf(cfg, p, n)
			if uint64(files) <= limit {
				break
			}
			n++
		}
	}
	return n
}

// roundUp is n rounded up to a power of two, the usual ulimit values.
func roundUp(n int) int {
	p := 1024
	for p < n {
		p *= 2
	}
	return p
}
