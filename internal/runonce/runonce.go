// Package runonce runs profiles once from the command line, as
// `aiperf profile` does: it prints a report, writes artifacts, and exits
// with a code a CI job can gate on.
package runonce

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/version"

	"go.opentelemetry.io/otel/trace"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/internal/report"
	"github.com/tokenprobe/tokenprobe/internal/rundir"
	"github.com/tokenprobe/tokenprobe/internal/runner"
	"github.com/tokenprobe/tokenprobe/internal/setup"
	"github.com/tokenprobe/tokenprobe/internal/sink"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Exit codes of `tokenprobe run`.
const (
	ExitOK        = 0 // every run met its SLO objective (or had none)
	ExitSLOFailed = 1 // a run's SLO attainment fell below its objective
	ExitConfig    = 2 // the configuration is invalid or names nothing to run
	// ExitRuntime: a run could not be carried out, or was broken: aborted
	// by the failure policy, no request succeeded, more failed than the
	// policy allows, or it was interrupted. It outranks ExitSLOFailed.
	ExitRuntime = 3
	// ExitUndecided: no run failed, but one had not enough evidence to
	// tell whether it met its objective (too few requests for its
	// interval to leave the objective, or misses the probe's own delay
	// could account for). ExitSLOFailed and ExitRuntime outrank it;
	// --not-enough-evidence=pass or =fail maps it to 0 or 1.
	ExitUndecided = 4
)

// Undecided says what a run with not enough evidence exits with.
type Undecided string

const (
	UndecidedOwn  Undecided = ""     // ExitUndecided
	UndecidedPass Undecided = "pass" // ExitOK
	UndecidedFail Undecided = "fail" // ExitSLOFailed
)

// Code is the exit code of a run with not enough evidence.
func (u Undecided) Code() int {
	switch u {
	case UndecidedPass:
		return ExitOK
	case UndecidedFail:
		return ExitSLOFailed
	}
	return ExitUndecided
}

// Worse is the exit code of two runs' codes together: runtime errors,
// then failures, then not enough evidence, then success.
func Worse(a, b int) int {
	rank := func(c int) int {
		switch c {
		case ExitConfig:
			return 5
		case ExitRuntime:
			return 4
		case ExitSLOFailed:
			return 3
		case ExitUndecided:
			return 2
		case ExitOK:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// DefaultGrace is how long an interrupted run lets its requests in flight
// finish before it cancels them.
const DefaultGrace = 5 * time.Second

// Options are the command line of `tokenprobe run`.
type Options struct {
	ConfigFile string
	// Config, when set, is the configuration itself (a run from flags:
	// AdHoc.YAML), and ConfigFile only names it; its errors name flags.
	Config []byte
	// Profiles and Endpoint narrow what runs; empty means everything.
	Profiles []string
	Endpoint string
	// ArtifactsDir receives one folder per run; "" writes none.
	ArtifactsDir string
	// AIPerf also writes each run in AIPerf's export layout.
	AIPerf bool
	// ProgressEvery is the interval of progress lines on Progress (0: none).
	ProgressEvery time.Duration
	// Grace is how long requests in flight may finish once ctx ends (an
	// interrupt) before they are cancelled; 0 is DefaultGrace.
	Grace         time.Duration
	Out, Progress io.Writer
	// ShardIndex of ShardCount (> 1): this process runs its share of
	// every profile's load (probe.Plan.Split), one of a study's shards;
	// `tokenprobe merge` joins their artifacts.
	ShardIndex, ShardCount int
	// StartAt, when set, is when the first profile starts sending: the
	// same instant in every shard.
	StartAt time.Time
	// Undecided is what a run with not enough evidence exits with.
	Undecided Undecided
	// StartWhen, when set, is asked for StartAt once the run is ready to
	// send (configuration read, endpoints open): a child of run
	// --processes learns it from its parent when every child is ready.
	StartWhen func(context.Context) (time.Time, error)
}

// Run executes the selected profiles one after another and returns the exit
// code. Errors are written to Progress. When ctx ends (SIGINT, SIGTERM),
// the run going stops sending, its requests in flight have o.Grace to
// finish, every artifact is written marked interrupted, and no further
// run starts.
func Run(ctx context.Context, o Options) int {
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	cfg, profiles, err := load(o)
	if err == nil {
		err = checkOpenFiles(o, cfg, profiles, max(o.ShardCount, 1))
	}
	if err != nil {
		fmt.Fprintln(o.Progress, err)
		return ExitConfig
	}
	if o.ShardCount <= 1 { // a shard's share is not the study's verdict
		for _, a := range advice(o, cfg, profiles) {
			fmt.Fprintf(o.Progress, "note: %v\n", a)
		}
	}
	secrets := redact.New(append(cfg.Secrets(), otlp.EnvHeaderValues()...)...)
	// The push first: the simulators export their server spans through it.
	var push *pusher
	if cfg.OTLP != nil || otlp.EnvEnabled() {
		otlp.LogErrors(slog.New(redact.Handler(slog.NewTextHandler(o.Progress, nil), secrets)))
		if push, err = startPush(ctx, cfg); err != nil {
			fmt.Fprintf(o.Progress, "%s: otlp: %v\n", o.ConfigFile, err)
			return ExitConfig
		}
		defer func() {
			if err := push.stop(); err != nil {
				fmt.Fprintf(o.Progress, "otlp: pushing the last metrics: %v\n", secrets.Error(err))
			}
		}()
	}
	var server trace.Tracer
	if push != nil {
		server = push.exp.SimTracer()
	}
	ts, err := setup.Open(cfg, secrets, server)
	if err != nil {
		fmt.Fprintln(o.Progress, err)
		return ExitRuntime
	}
	defer ts.Close()
	for _, e := range cfg.Endpoints {
		if e.TLS != nil && e.TLS.InsecureSkipVerify {
			fmt.Fprintf(o.Progress, "warning: endpoint %s: tls.insecure_skip_verify is set: its certificate is not checked, so anyone in between can read its API key\n", e.Name)
		}
	}

	var gpus *gpuSource
	if cfg.GPU != nil {
		src, _ := setup.OpenGPU(cfg.GPU)
		defer src.Close()
		if why := gpu.Why(src); why != "" {
			fmt.Fprintf(o.Progress, "GPU source: %s\n", why)
		}
		gpus = &gpuSource{src: src, interval: cfg.GPU.Interval.D()}
	}

	var dir string
	if o.ArtifactsDir != "" {
		if dir, err = newRunDir(o.ArtifactsDir, time.Now()); err != nil {
			fmt.Fprintln(o.Progress, err)
			return ExitRuntime
		}
	}
	if o.StartWhen != nil {
		if o.StartAt, err = o.StartWhen(ctx); err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(o.Progress, "Interrupted before the start.")
			} else {
				fmt.Fprintln(o.Progress, "the start time:", err)
			}
			return ExitRuntime
		}
	}
	if wait := time.Until(o.StartAt); !o.StartAt.IsZero() {
		if wait < -time.Second {
			fmt.Fprintf(o.Progress, "--start-at %s was %s ago: every shard must start at once; give a later time\n", o.StartAt.Format(time.RFC3339), (-wait).Round(time.Second))
			return ExitConfig
		}
		fmt.Fprintf(o.Progress, "Starting at %s, in %s...\n", o.StartAt.Format(time.RFC3339Nano), wait.Round(time.Millisecond))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			fmt.Fprintln(o.Progress, "Interrupted before the start.")
			return ExitRuntime
		}
	}
	code := ExitOK
	var all []stats.Summary
	var levelNames []string
	ran, interrupted := 0, false
	for _, p := range profiles {
		for _, name := range p.Endpoints {
			if o.Endpoint != "" && name != o.Endpoint {
				continue
			}
			if ctx.Err() != nil {
				interrupted = true
				break
			}
			ran++
			s, levelName, err := runOne(ctx, o, p, ts.Get(name), dir, push, gpus)
			if s != nil {
				all = append(all, *s)
				levelNames = append(levelNames, levelName)
			}
			switch {
			case s != nil && s.Interrupted:
				interrupted = true
				code = ExitRuntime
			case err != nil:
				fmt.Fprintf(o.Progress, "profile %s on %s: %v\n", p.Name, name, secrets.Error(err))
				code = ExitRuntime
			case s.Undecided:
				code = Worse(code, o.Undecided.Code())
			case !s.Passed:
				code = Worse(code, ExitSLOFailed)
			}
		}
	}
	if ran == 0 {
		if dir != "" {
			_ = os.Remove(dir) // made for runs that did not happen
		}
		if interrupted {
			fmt.Fprintln(o.Progress, "tokenprobe: interrupted before any run started")
			return ExitRuntime
		}
		fmt.Fprintf(o.Progress, "%s: no profile runs on endpoint %q\n", o.ConfigFile, o.Endpoint)
		return ExitConfig
	}
	acrossProfiles(o.Out, all, levelNames)
	if dir != "" && len(all) > 0 {
		if err := rundir.WriteJSON(filepath.Join(dir, "summary.json"), all); err != nil {
			fmt.Fprintln(o.Progress, err)
			return ExitRuntime
		}
		if err := writeHTML(filepath.Join(dir, "report.html"), o.ConfigFile, all, levelNames); err != nil {
			fmt.Fprintln(o.Progress, err)
			return ExitRuntime
		}
		fmt.Fprintf(o.Out, "Artifacts: %s\n", dir)
	}
	if interrupted {
		where := ""
		if dir != "" && len(all) > 0 {
			where = "; what it measured is in " + dir
		}
		fmt.Fprintf(o.Progress, "tokenprobe: interrupted%s (exit %d)\n", where, ExitRuntime)
	}
	return code
}

// load reads o's configuration and the profiles it selects.
func load(o Options) (*config.Config, []*config.Profile, error) {
	var cfg *config.Config
	var err error
	if o.Config != nil {
		if cfg, err = setup.Parse(o.ConfigFile, o.Config); err != nil {
			err = FlagErrors(err)
		}
	} else {
		cfg, err = setup.LoadFile(o.ConfigFile)
	}
	if err != nil {
		return nil, nil, err
	}
	profiles, err := selectProfiles(cfg, o.Profiles)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", o.ConfigFile, err)
	}
	return cfg, profiles, nil
}

// advice is the configuration's advice on the selected profiles, naming
// the flags of a run from flags.
func advice(o Options, cfg *config.Config, profiles []*config.Profile) []error {
	var out []error
	for _, a := range setup.Advice(cfg) {
		for i, p := range cfg.Profiles {
			if slices.Contains(profiles, p) && strings.HasPrefix(a.Field, fmt.Sprintf("profiles[%d].", i)) {
				if o.Config != nil {
					out = append(out, FlagErrors(config.Errors{a}))
				} else {
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// checkOpenFiles is setup.CheckOpenFiles under this process's limit, its
// errors naming the flags of a run from flags.
func checkOpenFiles(o Options, cfg *config.Config, profiles []*config.Profile, shares int) error {
	err := setup.CheckOpenFiles(cfg, profiles, setup.OpenFileLimit(), shares)
	if err != nil && o.Config != nil {
		err = FlagErrors(err)
	}
	return err
}

// Processes checks o as Run would before it sends anything, for a run
// divided over n processes of this host (`tokenprobe run --processes`),
// each under this process's open-file limit; n 0 asks for the fewest that
// hold every selected profile's streams (--processes auto). It returns
// the number of processes; an error is what Run would refuse o with.
func Processes(o Options, n int) (int, error) {
	cfg, profiles, err := load(o)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		n = setup.ProcessesFor(cfg, profiles, setup.OpenFileLimit())
	}
	return n, checkOpenFiles(o, cfg, profiles, n)
}

// newRunDir makes an invocation's own folder under parent, named for its
// start time (rundir.NewDir adds -2, -3, ... within one second).
func newRunDir(parent string, start time.Time) (string, error) {
	return rundir.NewDir(parent, start.Format("20060102-150405"))
}

func selectProfiles(cfg *config.Config, names []string) ([]*config.Profile, error) {
	if len(names) == 0 {
		return cfg.Profiles, nil
	}
	var out []*config.Profile
	for _, n := range names {
		p := cfg.Profile(n)
		if p == nil {
			return nil, fmt.Errorf("no profile is named %q (profiles: %s)", n, cfg.ProfileNames())
		}
		out = append(out, p)
	}
	return out, nil
}

// gpuSource is the GPU source sampled over each run.
type gpuSource struct {
	src      gpu.Source
	interval time.Duration
}

// runOne runs one profile against one endpoint and returns its summary
// (nil when the run could not start) and what its load level counts
// (concurrency or rate). An interrupt (ctx ending) stops the run
// gracefully: the summary comes back marked interrupted.
func runOne(ctx context.Context, o Options, p *config.Profile, t *setup.Target, dir string, push *pusher, gpus *gpuSource) (*stats.Summary, string, error) {
	var sinks []probe.Sink
	var view *live
	if o.ProgressEvery > 0 && isTerminal(o.Progress) {
		view = newLive()
		sinks = append(sinks, view)
	}
	if push != nil {
		sinks = append(sinks, push.queue)
	}
	var art *rundir.Run
	if dir != "" {
		runDir, err := rundir.NewDir(dir, p.Name+"-"+t.Endpoint.Name)
		if err != nil {
			return nil, "", err
		}
		art, err = rundir.Open(runDir, func() {
			fmt.Fprintln(o.Progress, "warning: records.jsonl is incomplete: results came faster than it was written, and are counted, not written")
		})
		if err != nil {
			return nil, "", err
		}
		art.AIPerf = o.AIPerf
		defer art.Abandon() // on every return; after Finish it is no harm
		sinks = append(sinks, art.Sink())
	}
	run, err := setup.NewRun(p, t.Endpoint, t.Client, sinks...)
	if err != nil {
		return nil, "", err
	}
	if o.ShardCount > 1 {
		run.Plan = run.Plan.Share(o.ShardIndex, o.ShardCount)
	}
	if p.ModelIdentity != nil {
		// One run holds its answers to a pinned reference, or learns the
		// first of a reference it keeps for no later run.
		t, err := setup.NewIdentityTracker(p, t.Endpoint, "")
		if err != nil {
			return nil, "", err
		}
		run.Identity = t.Begin()
	}
	levelName := run.Plan.LevelName()
	fmt.Fprintf(o.Progress, "Running profile %s against %s (%s)...\n", p.Name, t.Endpoint.Name, run.Plan)
	var stop func()
	if view != nil {
		stop = liveView(o.Progress, min(o.ProgressEvery, 500*time.Millisecond), run, view)
	} else {
		stop = progress(o, run)
	}
	ro := runner.Options{Server: t.Server}
	if gpus != nil {
		ro.GPU, ro.GPUInterval = gpu.Only(gpus.src, t.GPUs), gpus.interval
	}
	// An interrupt stops sending at once; the requests in flight get the
	// grace period, then the run's own context cancels them.
	run.Stop = ctx
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		fmt.Fprintf(o.Progress, "Interrupted: no new requests; the %d in flight have %s to finish (interrupt again to quit at once)...\n", run.Progress().InFlight, o.Grace)
		time.AfterFunc(o.Grace, cancel)
	})()
	f := runner.Execute(reqCtx, run, ro)
	s, err := *f.Summary, f.Err
	stop()
	if o.ShardCount > 1 {
		s.Shard = &stats.Shard{Index: o.ShardIndex, Count: o.ShardCount}
	}
	if art != nil {
		err = errors.Join(err, art.Finish(&s, levelName))
	}
	report.Text(o.Out, &s, levelName)
	fmt.Fprintln(o.Out)
	return &s, levelName, err
}

// pusher is OTLP export behind a queue, so a slow collector never holds up
// a run.
type pusher struct {
	exp   *otlp.Exporter
	queue *sink.Queue
}

func startPush(ctx context.Context, cfg *config.Config) (*pusher, error) {
	exp, err := otlp.New(ctx, setup.OTLP(cfg.OTLP, cfg.Tracing, version.Version))
	if err != nil {
		return nil, err
	}
	return &pusher{exp: exp, queue: sink.NewQueue(exp, 1<<16, nil)}, nil
}

// pushWithin bounds stop: the queued results' delivery gets half of it,
// the last push the rest.
const pushWithin = 10 * time.Second

// stop delivers every queued result and pushes them, within pushWithin:
// a collector that never answers holds the run no longer. What could not
// be pushed is counted in the error.
func (p *pusher) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), pushWithin)
	defer cancel()
	qctx, qcancel := context.WithTimeout(ctx, pushWithin/2)
	defer qcancel()
	abandoned := p.queue.CloseWithin(qctx)
	err := p.exp.Shutdown(ctx)
	spans, points := p.exp.Dropped()
	if lost := p.queue.Dropped(); lost > 0 || spans > 0 || points > 0 {
		err = errors.Join(err, fmt.Errorf("not everything reached the collector: %d results not pushed (%d left in the queue at the end), %d spans and %d metric points dropped", lost, abandoned, spans, points))
	}
	return err
}

// progress prints a line every interval until the returned func is called.
func progress(o Options, run *probe.Run) (stop func()) {
	if o.ProgressEvery <= 0 || o.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(o.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p := run.Progress()
				phase := fmt.Sprintf("%s %g", p.Stage.LevelName(), p.Level)
				switch {
				case run.Plan.Search != nil: // its stages are a budget, not a plan
					phase = fmt.Sprintf("step %d of at most %d, %s", p.StageIndex+1, len(run.Plan.Stages), phase)
				case len(run.Plan.Stages) > 1:
					phase = fmt.Sprintf("stage %d/%d, %s", p.StageIndex+1, len(run.Plan.Stages), phase)
				}
				if p.Warmup {
					phase = fmt.Sprintf("warmup, %d of %d", p.Done, run.Plan.Warmup)
				}
				fmt.Fprintf(o.Progress, "  [%5.1fs %s] %d done · %d in flight · %d errors\n", p.Elapsed.Seconds(), phase, p.Done, p.InFlight, p.Errors)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func writeHTML(path, configFile string, runs []stats.Summary, levelNames []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.HTML(f, "tokenprobe run: "+filepath.Base(configFile), runs, levelNames, time.Now()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// acrossProfiles compares the profiles one invocation ran against the
// same endpoint at different loads of one kind (a baseline of one user,
// then fifty: the seeds' own workflow), as a staircase's stages are: the
// same cliff verdict, TTFT and ITL against the lowest load's.
func acrossProfiles(w io.Writer, all []stats.Summary, levelNames []string) {
	byEndpoint := map[string][]stats.Summary{}
	kind := map[string]string{}
	var order []string
	for i, s := range all {
		if len(s.Stages) > 1 || s.Level <= 0 || s.Interrupted {
			continue // a staged run has its own verdict
		}
		if k, seen := kind[s.Endpoint]; seen && k != levelNames[i] {
			kind[s.Endpoint] = "" // concurrency beside rate: not one axis
		} else if !seen {
			kind[s.Endpoint] = levelNames[i]
			order = append(order, s.Endpoint)
		}
		byEndpoint[s.Endpoint] = append(byEndpoint[s.Endpoint], s)
	}
	for _, ep := range order {
		runs := byEndpoint[ep]
		if len(runs) < 2 || kind[ep] == "" {
			continue
		}
		sort.SliceStable(runs, func(i, j int) bool { return runs[i].Level < runs[j].Level })
		if runs[0].Level == runs[len(runs)-1].Level {
			continue
		}
		k := stats.FindKnee(runs, 0)
		names := make([]string, len(runs))
		for i, r := range runs {
			names[i] = fmt.Sprintf("%s (%s %g)", r.Profile, kind[ep], r.Level)
		}
		fmt.Fprintf(w, "Across profiles on %s: %s\n", ep, strings.Join(names, ", "))
		if k.CliffLevel > 0 {
			fmt.Fprintf(w, "  %-27s at %s %g: TTFT p50 x%.1f, ITL p50 x%.2f (a queue, not a slower model)\n", "TTFT cliff", kind[ep], k.CliffLevel, k.TTFTRatio, k.ITLRatio)
		} else {
			fmt.Fprintf(w, "  %-27s none: %s\n", "TTFT cliff", k.Reading())
		}
		fmt.Fprintln(w)
	}
}
