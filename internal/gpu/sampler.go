package gpu

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Sampler reads a source every interval during a run.
type Sampler struct {
	src      Source
	interval time.Duration

	mu      sync.Mutex
	samples [][]Sample
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
}

// Start begins sampling src every interval (default 1s).
func Start(src Source, interval time.Duration) *Sampler {
	if interval <= 0 {
		interval = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{src: src, interval: interval, cancel: cancel, done: make(chan struct{})}
	go s.loop(ctx)
	return s
}

func (s *Sampler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.read(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Sampler) read(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	samples, err := s.src.Read(rctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.err = err
		return
	}
	s.samples = append(s.samples, samples)
}

// Stop ends sampling, takes a last reading, and reports the run's figures
// for outputTokens generated.
func (s *Sampler) Stop(outputTokens int) stats.GPU {
	s.cancel()
	<-s.done
	s.read(context.Background())
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Summarise(s.samples, outputTokens)
	r.Source = s.src.Name()
	if r.Samples == 0 && s.err != nil {
		r.Err = s.err.Error()
	}
	return r
}

// Summarise computes a report from readings taken over a run.
func Summarise(readings [][]Sample, outputTokens int) stats.GPU {
	var r stats.GPU
	type agg struct {
		sum, peak float64
		n         int
	}
	var util, sm, power agg
	add := func(a *agg, v float64) { a.sum += v; a.n++; a.peak = math.Max(a.peak, v) }
	first, last := map[string]float64{}, map[string]float64{}
	for _, reading := range readings {
		r.Samples++
		r.GPUs = max(r.GPUs, len(reading))
		for _, g := range reading {
			v := g.Values
			if x, ok := v["DCGM_FI_DEV_GPU_UTIL"]; ok {
				add(&util, x)
			}
			if x, ok := v["DCGM_FI_PROF_SM_ACTIVE"]; ok {
				add(&sm, x)
			}
			if x, ok := v["DCGM_FI_DEV_POWER_USAGE"]; ok {
				add(&power, x)
			}
			r.MemUsedPeak = math.Max(r.MemUsedPeak, v["DCGM_FI_DEV_FB_USED"])
			if e, ok := v["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]; ok {
				if _, seen := first[g.GPU.UUID]; !seen {
					first[g.GPU.UUID] = e
				}
				last[g.GPU.UUID] = e
			}
		}
	}
	mean := func(a agg) float64 {
		if a.n == 0 {
			return 0
		}
		return a.sum / float64(a.n)
	}
	r.UtilAvg, r.UtilPeak = mean(util), util.peak
	if sm.n > 0 {
		avg, peak := mean(sm), sm.peak
		r.SMActiveAvg, r.SMActivePeak = &avg, &peak
	}
	r.PowerAvg, r.PowerPeak = mean(power), power.peak
	for uuid, e := range last {
		r.EnergyJoules += (e - first[uuid]) / 1000 // the counter is in mJ
	}
	if r.EnergyJoules > 0 && outputTokens > 0 {
		r.JoulesPerOutputToken = r.EnergyJoules / float64(outputTokens)
		r.OutputTokensPerJoule = float64(outputTokens) / r.EnergyJoules
	}
	return r
}
