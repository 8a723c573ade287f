package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/steal"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// ReplayOptions say which trace the harness replays and how: issue 3's
// bar is the dispatch lag of `tokenprobe run` replaying the first minutes
// of a Mooncake trace against the simulator, at the trace's own pace and
// faster.
type ReplayOptions struct {
	// Trace is a Mooncake trace file; empty skips the replays.
	Trace string
	// Speedups to replay at; each replays the trace's first For x speed-up.
	Speedups []float64
	// For is how long each replay sends (wall time).
	For time.Duration
	// Runs of each speed-up, one after the other.
	Runs int
	// RetrySteal, when above 0, replays a run again (once) when the
	// machine's CPU steal during it was above this percentage, and keeps
	// the less disturbed one, as the harness does for its levels.
	RetrySteal float64
}

// Replay is one `tokenprobe run` of a trace window.
type Replay struct {
	Speedup  float64       `json:"speedup"`
	Window   time.Duration `json:"window_ns"`
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	// DispatchLag is the run's own summary of it (send time minus the
	// trace's time for the request, over every request).
	DispatchLag   Quantiles `json:"dispatch_lag"`
	CPUSeconds    float64   `json:"cpu_seconds"`
	SimCPUSeconds float64   `json:"sim_cpu_seconds"`
	// SleepBeside is how late a 1 ms sleep in the harness woke while the
	// replay ran, and Latest the replay's latest request beside what the
	// harness's sleep did in the same moment: where the two were late
	// together, the machine held the probe up.
	SleepBeside *Quantiles `json:"sleep_beside,omitempty"`
	Latest      *Latest    `json:"latest,omitempty"`
	Disturbance
}

// Latest is a replay's latest request: when it was due on the wall clock,
// how late it was sent, and the most a 1 ms sleep in the harness woke late
// while it waited (0: none a millisecond late).
type Latest struct {
	Due         time.Time     `json:"due"`
	Lag         time.Duration `json:"lag_ns"`
	HarnessLate time.Duration `json:"harness_late_ns"`
}

// replaySim is the simulator the replays run against: every request gets
// a slot at once (the bar is the probe's lateness, not the server's
// queue), short prefill and decode so thousands of streams stay cheap.
var replaySim = []string{"--slots", "1024", "--prefill-base", "1ms", "--prefill-per-token", "1us", "--decode-base", "2ms", "--tokens-per-chunk", "16"}

// RunReplays replays the trace at each speed-up, Runs times, each in a
// `tokenprobe run` process of its own against one simulator process.
func RunReplays(ctx context.Context, tokenprobe string, o ReplayOptions, slice time.Duration, progress func(format string, args ...any)) ([]Replay, error) {
	trace, err := filepath.Abs(o.Trace)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(trace); err != nil {
		return nil, fmt.Errorf("trace replay: %w", err)
	}
	sim, err := startSimulator(ctx, tokenprobe, nil, replaySim...)
	if err != nil {
		return nil, err
	}
	defer sim.stop()
	dir, err := os.MkdirTemp("", "tokenprobe-bench-replay")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	var out []Replay
	for _, speedup := range o.Speedups {
		window := time.Duration(float64(o.For) * speedup).Round(time.Second)
		cfg := filepath.Join(dir, "replay-"+strconv.FormatFloat(speedup, 'f', -1, 64)+".yaml")
		body := fmt.Sprintf(`endpoints:
  - name: sim
    base_url: %s/v1
    model: tokenprobe-sim
profiles:
  - name: replay
    endpoints: [sim]
    workload:
      trace: {file: %q, format: mooncake, speedup: %g, to: %s}
`, sim.base, trace, speedup, window)
		if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
			return out, err
		}
		for run := 1; run <= o.Runs; run++ {
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
			progress("bench: replaying the trace's first %g s at %gx (run %d of %d) ...", window.Seconds(), speedup, run, o.Runs)
			r, err := replayOnce(ctx, tokenprobe, cfg, filepath.Join(dir, fmt.Sprintf("run-%g-%d", speedup, run)), slice, sim.cmd.Process.Pid)
			if err != nil {
				return out, err
			}
			again := func() (Replay, error) {
				return replayOnce(ctx, tokenprobe, cfg, filepath.Join(dir, fmt.Sprintf("run-%g-%d-again", speedup, run)), slice, sim.cmd.Process.Pid)
			}
			r, err = lessDisturbed(o.RetrySteal, r, again, func(pct float64) { progress("bench:   %.1f%% steal: replaying again ...", pct) })
			if err != nil {
				return out, err
			}
			r.Speedup, r.Window = speedup, window
			progress("bench:   %d requests, dispatch lag p50 %s p99 %s max %s ms, %.1f%% steal",
				r.Requests, ms(r.DispatchLag.P50), ms(r.DispatchLag.P99), ms(r.DispatchLag.Max), r.StealPercent)
			out = append(out, r)
			time.Sleep(time.Second)
		}
	}
	return out, nil
}

func replayOnce(ctx context.Context, tokenprobe, cfg, artifacts string, slice time.Duration, simPid int) (Replay, error) {
	simBefore, _ := cpuOf(simPid)
	runSteal := steal.Start()
	cmd := exec.CommandContext(ctx, tokenprobe, "run", "-c", cfg, "--artifacts-dir", artifacts, "--progress-interval", "0", "--sched.slice", slice.String())
	beside := startCanary()
	out, err := cmd.CombinedOutput()
	sleep := beside.end()
	if err != nil {
		return Replay{}, fmt.Errorf("tokenprobe run: %w\n%s", err, out)
	}
	r := Replay{Disturbance: Disturbance{StealPercent: runSteal.Percent()}, SleepBeside: sleep}
	simAfter, _ := cpuOf(simPid)
	r.SimCPUSeconds = (simAfter - simBefore).Seconds()
	r.CPUSeconds = rusageCPU(cmd.ProcessState.SysUsage().(*syscall.Rusage)).Seconds()
	files, _ := filepath.Glob(filepath.Join(artifacts, "*", "summary.json"))
	if len(files) != 1 {
		return r, fmt.Errorf("tokenprobe run left %d summaries in %s", len(files), artifacts)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return r, err
	}
	var all []stats.Summary
	if err := json.Unmarshal(data, &all); err != nil {
		return r, fmt.Errorf("%s: %w", files[0], err)
	}
	if len(all) != 1 {
		return r, fmt.Errorf("%s: %d summaries, want 1", files[0], len(all))
	}
	s := all[0]
	us := func(msec float64) float64 { return msec * 1000 }
	r.Requests, r.Errors = s.Requests, s.Errors
	r.DispatchLag = Quantiles{P50: us(s.DispatchLag.P50), P99: us(s.DispatchLag.P99), Max: us(s.DispatchLag.Max)}
	if r.Requests == 0 {
		return r, fmt.Errorf("the trace window held no request")
	}
	records := filepath.Join(filepath.Dir(files[0]), "replay-sim", "records.jsonl")
	latest, err := latestRequest(records)
	if err != nil {
		return r, err
	}
	latest.HarnessLate = beside.lateDuring(latest.Due, latest.Due.Add(latest.Lag))
	r.Latest = &latest
	return r, nil
}

// latestRequest reads a run's records for its latest request.
func latestRequest(path string) (Latest, error) {
	f, err := os.Open(path)
	if err != nil {
		return Latest{}, err
	}
	defer f.Close()
	var worst Latest
	dec := json.NewDecoder(f)
	for {
		var rec struct {
			Start time.Time `json:"start"`
			Lag   float64   `json:"dispatch_lag_ms"`
		}
		if err := dec.Decode(&rec); err == io.EOF {
			break
		} else if err != nil {
			return worst, fmt.Errorf("%s: %w", path, err)
		}
		if lag := time.Duration(rec.Lag * float64(time.Millisecond)); lag > worst.Lag {
			worst = Latest{Due: rec.Start.Add(-lag), Lag: lag}
		}
	}
	return worst, nil
}
