// Package daemon is `tokenprobe serve`: it loads the configuration, keeps
// every profile x endpoint on its schedule, applies reloads by difference,
// exports every result, and remembers recent runs for the status page.
package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/tokenprobe/tokenprobe/exporter/otlp"
	"github.com/tokenprobe/tokenprobe/exporter/prom"
	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/internal/rundir"
	"github.com/tokenprobe/tokenprobe/internal/runner"
	"github.com/tokenprobe/tokenprobe/internal/scheduler"
	"github.com/tokenprobe/tokenprobe/internal/setup"
	"github.com/tokenprobe/tokenprobe/internal/sink"
	"github.com/tokenprobe/tokenprobe/probe"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/slo"
	"github.com/tokenprobe/tokenprobe/probe/stats"
)

// Options configure a Daemon.
type Options struct {
	ConfigFile string
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// MaxConcurrentRuns caps runs at once across all jobs (0: no cap).
	MaxConcurrentRuns int
	// History is how many recent runs the status page keeps (default 100).
	History int
	Clock   scheduler.Clock
	Version string
	// ShardIndex of ShardCount replicas: this daemon runs the jobs whose
	// key hashes to its index, and its share of profiles that split.
	ShardIndex, ShardCount int
	// ArtifactsDir, when set, receives a folder per run (records.jsonl,
	// summary.json, report.txt); the newest ArtifactsRetain are kept.
	ArtifactsDir    string
	ArtifactsRetain int
	// Location names where this daemon probes from (--probe.location):
	// the OTLP resource's tokenprobe.location, and every record's and
	// summary's location. The Prometheus label is the Registerer's to
	// add (cmd/tokenprobe wraps it).
	Location string
	// StoragePath, when set, is where the daemon keeps what it learns
	// across restarts: each model-identity profile's reference, under
	// model-identity/. Without it references live in memory only.
	StoragePath string
	// OnIdle, when set, is called as a run ends with no other run in
	// progress: what the runs allocated is garbage then (cmd/tokenprobe
	// gives the heap's free pages back to the system there). OnBusy, when
	// set, is called as a run starts with no other run in progress. The
	// two alternate, never concurrently, OnBusy first.
	OnIdle, OnBusy func()
}

// RequestIDsPerRun spaces the daemon's request ids: request n of run r is
// r x RequestIDsPerRun + n, unique across runs, as exemplars need.
const RequestIDsPerRun = 1_000_000_000

// Daemon runs the configured profiles on their schedules.
type Daemon struct {
	o       Options
	log     *slog.Logger
	prom    *prom.Exporter
	sched   *scheduler.Scheduler
	history *History
	otlp    *otlp.Exporter
	queue   *sink.Queue
	// tracing is the trace context of every request.
	tracing setup.Tracing
	// gpu is the GPU source (nil without a gpu block); gpuC exports it.
	gpu         gpu.Source
	gpuC        *gpu.Collector
	gpuInterval time.Duration
	ready       atomic.Bool
	runningMu   sync.Mutex // orders OnBusy and OnIdle
	running     int        // runs in progress, for OnBusy and OnIdle
	// secrets are every secret of every configuration loaded, taken out
	// of log lines, run records and request errors.
	secrets *redact.Set

	// mu serialises (re)loads and guards what they change.
	mu     sync.Mutex
	cfg    *config.Config
	loaded [32]byte // checksum of the running file
	// cfgYAML is the running configuration rendered for /config.
	cfgYAML    []byte
	cfgYAMLErr error
	failed     [32]byte // checksum of the last file refused
	jobs       map[string]*job
	targets    map[string]*target
	lastReload time.Time // the last reload tried
	lastLoaded time.Time // the last configuration applied: the one running
	lastErr    error

	// identities are the model-identity trackers, by setup.IdentityKey:
	// a reference outlives a reload that keeps its profile's prompts.
	identitiesMu sync.Mutex
	identities   map[string]*stats.IdentityTracker
}

type job struct {
	key, identity string
	profile       *config.Profile
	endpoint      string
	target        *setup.Target
}

type target struct {
	identity string
	t        *setup.Target
}

// New loads the configuration and starts scheduling. An invalid file is an
// error here; later, a reload that fails keeps the running configuration.
func New(o Options) (*Daemon, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.History <= 0 {
		o.History = 100
	}
	if o.Clock == nil {
		o.Clock = scheduler.Real
	}
	p, err := prom.New(o.Registerer)
	if err != nil {
		return nil, err
	}
	secrets := redact.New(otlp.EnvHeaderValues()...)
	d := &Daemon{o: o, log: slog.New(redact.Handler(o.Logger.Handler(), secrets)), secrets: secrets, prom: p,
		history: NewHistory(o.History, 20), jobs: map[string]*job{}, targets: map[string]*target{}}
	d.sched = scheduler.New(o.Clock, o.MaxConcurrentRuns, d.hooks())
	// The OTLP block must be known before the first job starts: runs read
	// the queue without a lock.
	first, err := setup.LoadFile(o.ConfigFile)
	if err != nil {
		p.ConfigReloaded(false)
		return nil, err
	}
	// Like the OTLP block, tracing is read once, at start.
	d.tracing = setup.TraceContext(first)
	if first.OTLP != nil || otlp.EnvEnabled() {
		otlp.LogErrors(d.log)
		oc := setup.OTLP(first.OTLP, first.Tracing, o.Version)
		oc.Location = o.Location
		oc.Dropped = p.OTLPDropped
		exp, err := otlp.New(context.Background(), oc)
		if err != nil {
			return nil, fmt.Errorf("otlp: %w", err)
		}
		d.otlp = exp
		d.queue = sink.NewQueue(exp, 1<<16, p.DroppedCounter("otlp"))
		d.tracing.Server = exp.SimTracer()
	}
	if g := first.GPU; g != nil {
		var fields []gpu.Field
		d.gpu, fields = setup.OpenGPU(g)
		d.gpuC, d.gpuInterval = gpu.NewCollector(d.gpu, fields, d.log), g.Interval.D()
		if why := gpu.Why(d.gpu); why != "" {
			d.log.Info("GPU source", "source", d.gpu.Name(), "why", why)
		}
		if err := o.Registerer.Register(d.gpuC); err != nil {
			return nil, err
		}
	}
	if err := d.Reload(); err != nil {
		d.sched.Stop()
		if d.queue != nil {
			d.queue.Close()
			_ = d.otlp.Shutdown(context.Background())
		}
		return nil, err
	}
	d.ready.Store(true)
	return d, nil
}

func (d *Daemon) hooks() scheduler.Hooks {
	return scheduler.Hooks{
		Skipped: func(key, reason string) {
			profile, endpoint, _ := strings.Cut(key, "/")
			d.prom.RunSkipped(profile, endpoint, reason)
			d.log.Debug("scheduled run skipped", "profile", profile, "endpoint", endpoint, "reason", reason)
		},
		Next: func(key string, at time.Time) {
			profile, endpoint, _ := strings.Cut(key, "/")
			d.prom.NextRun(profile, endpoint, at)
		},
		Backoff: func(key string, aborts int) {
			profile, endpoint, _ := strings.Cut(key, "/")
			d.prom.AbortedInARow(profile, endpoint, aborts)
			if aborts > 0 {
				d.log.Warn("job backs off after aborted runs", "profile", profile, "endpoint", endpoint, "aborted_in_a_row", aborts)
			}
		},
	}
}

// Ready reports whether the configuration is loaded and scheduling runs.
func (d *Daemon) Ready() bool { return d.ready.Load() }

// Reload reads the configuration file again and applies what changed. On
// any error the running configuration stays as it was.
func (d *Daemon) Reload() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	data, err := os.ReadFile(d.o.ConfigFile)
	var cfg *config.Config
	if err == nil {
		cfg, err = setup.Parse(d.o.ConfigFile, data)
	}
	if err == nil {
		// Before any target opens: its client redacts with this set.
		d.secrets.Add(cfg.Secrets()...)
		err = d.apply(cfg)
	}
	d.prom.ConfigReloaded(err == nil)
	d.lastReload, d.lastErr = time.Now(), err
	if err == nil {
		d.lastLoaded = d.lastReload
	}
	if err != nil {
		d.failed = sha256.Sum256(data)
		d.log.Error("configuration not loaded; the running configuration stays", "file", d.o.ConfigFile, "err", err)
		return err
	}
	if d.cfg != nil && !sameOTLP(d.cfg.OTLP, cfg.OTLP) {
		d.log.Warn("the otlp block changed; it takes effect at the next restart")
	}
	d.cfg, d.loaded = cfg, sha256.Sum256(data)
	// /config is rendered once a load, not per request: at thousands of
	// profiles a rendering costs seconds of CPU, and anyone may ask.
	d.cfgYAML, d.cfgYAMLErr = setup.RenderEffective(cfg, data)
	return nil
}

func sameOTLP(a, b *config.OTLP) bool {
	ya, _ := yaml.Marshal(a)
	yb, _ := yaml.Marshal(b)
	return bytes.Equal(ya, yb)
}

// identity is what makes two versions of a thing the same for a reload:
// its YAML, and what it read from files and variables (secrets, TLS
// certificates), which never marshals.
func identity(v any, secrets ...string) string {
	b, _ := yaml.Marshal(v)
	h := sha256.New()
	for _, s := range secrets {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return string(b) + fmt.Sprintf("%x", h.Sum(nil)[:8])
}

// apply moves from the running configuration to cfg by difference:
// unchanged jobs keep running untouched, changed ones restart, removed ones
// stop and lose their series, new ones start. Callers hold d.mu.
func (d *Daemon) apply(cfg *config.Config) error {
	newTargets := map[string]*target{}
	var opened []*setup.Target
	for _, e := range cfg.Endpoints {
		material := e.Secrets()
		if e.TLS != nil {
			material = append(material, e.TLS.Material()...) // a rotated certificate reopens the endpoint
		}
		id := identity(e, material...)
		if old := d.targets[e.Name]; old != nil && old.identity == id {
			newTargets[e.Name] = old
			continue
		}
		t, err := setup.OpenEndpoint(e, d.secrets, d.tracing)
		if err != nil {
			for _, o := range opened {
				_ = o.Close()
			}
			return fmt.Errorf("endpoint %q: %w", e.Name, err)
		}
		opened = append(opened, t)
		newTargets[e.Name] = &target{identity: id, t: t}
		if e.TLS != nil && e.TLS.InsecureSkipVerify {
			d.log.Warn("tls.insecure_skip_verify is set: the endpoint's certificate is not checked, so anyone in between can read its API key", "endpoint", e.Name)
		}
	}
	newJobs := map[string]*job{}
	for _, p := range cfg.Profiles {
		pid := identity(p)
		for _, name := range p.Endpoints {
			tg := newTargets[name]
			j := &job{key: p.Name + "/" + name, identity: pid + tg.identity, profile: p, endpoint: name, target: tg.t}
			if !p.Shard.Split && !probe.Owns(j.key, d.o.ShardIndex, d.o.ShardCount) {
				continue // another replica's job
			}
			newJobs[j.key] = j
		}
	}
	var added, changed, removed int
	for key, old := range d.jobs {
		nj := newJobs[key]
		switch {
		case nj == nil:
			d.sched.Remove(key)
			d.history.dropQueued(old.profile.Name, old.endpoint, "its profile was removed from the configuration before its turn")
			d.prom.Forget(old.profile.Name, old.endpoint)
			removed++
		case nj.identity != old.identity:
			d.sched.Remove(key)
			d.history.dropQueued(old.profile.Name, old.endpoint, "its profile changed in the configuration before its turn: ask again")
			changed++
		}
	}
	for name, old := range d.targets {
		if newTargets[name] != old {
			_ = old.t.Close()
		}
	}
	for key, nj := range newJobs {
		if old := d.jobs[key]; old == nil || old.identity != nj.identity {
			if old == nil {
				added++
			}
			d.sched.Add(d.schedulerJob(nj))
		}
		ep := nj.target.Endpoint
		url := redact.URL(ep.BaseURL)
		e := cfg.Endpoint(nj.endpoint)
		if e != nil && e.Simulator != nil {
			url = "simulator" // its port changes at every start; the label must not
		}
		plan := setup.PlanOf(&nj.profile.Load)
		if nj.profile.Shard.Split && d.o.ShardCount > 1 {
			plan = plan.Split(d.o.ShardIndex, d.o.ShardCount)
		}
		checks, _, _ := setup.ChecksOf(nj.profile, ep.API) // checked at load
		var slos []slo.Kind
		for _, t := range setup.SLOSet(&nj.profile.SLO).Thresholds {
			slos = append(slos, t.Kind)
		}
		d.prom.Describe(prom.Description{
			Profile: nj.profile.Name, Endpoint: nj.endpoint, Model: ep.Model, URL: url, API: string(ep.API),
			Objective: nj.profile.SLO.Objective, ServerInstance: setup.ServerInstance(e, ep.BaseURL),
			Levels: plan.Levels(), SLOs: slos, Checks: checks.Names(),
		})
	}
	d.jobs, d.targets = newJobs, newTargets
	d.log.Info("configuration loaded", "file", d.o.ConfigFile, "jobs", len(newJobs),
		"added", added, "changed", changed, "removed", removed, "unchanged", len(newJobs)-added-changed)
	return nil
}

func (d *Daemon) schedulerJob(j *job) scheduler.Job {
	s := j.profile.Schedule
	spec := scheduler.Spec{
		Every: s.Every.D(), Jitter: s.Jitter.D(), Continuous: s.Continuous, Manual: s.Manual, Exclusive: s.Exclusive,
		RequestsPerHour: s.Budget.RequestsPerHour, TokensPerHour: s.Budget.TokensPerHour, MaxCostPerDay: s.Budget.MaxCostPerDay,
		BackoffMax: setup.ScheduleBackoffMax(&j.profile.Failure),
	}
	if s.Window != "" {
		w, _ := config.ParseWindow(s.Window, s.Timezone) // validated at load
		spec.Window = &scheduler.Window{Start: w.Start, End: w.End, Loc: w.Loc}
	}
	return scheduler.Job{Key: j.key, Endpoint: j.endpoint, Spec: spec, Run: func(ctx context.Context, t scheduler.Trigger) scheduler.Ran {
		return d.execute(ctx, j, t)
	}}
}

// began and ended count the runs in progress, and call OnBusy as the
// first starts and OnIdle as the last ends. The count and the call are
// under one lock: a run that ends as another starts cannot call OnIdle
// after the other's OnBusy.
func (d *Daemon) began() {
	d.runningMu.Lock()
	defer d.runningMu.Unlock()
	if d.running++; d.running == 1 && d.o.OnBusy != nil {
		d.o.OnBusy()
	}
}

func (d *Daemon) ended() {
	d.runningMu.Lock()
	defer d.runningMu.Unlock()
	if d.running--; d.running == 0 && d.o.OnIdle != nil {
		d.o.OnIdle()
	}
}

// execute carries out one run of a job and records it everywhere.
func (d *Daemon) execute(ctx context.Context, j *job, t scheduler.Trigger) scheduler.Ran {
	trigger := "schedule"
	if t.Manual {
		trigger = "manual"
	}
	d.began()
	defer d.ended()
	rec := d.history.start(t.Ref, j.profile.Name, j.endpoint, trigger)
	log := slog.New(redact.Handler(&runLog{next: d.log.Handler(), h: d.history, r: rec}, d.secrets)).With("profile", j.profile.Name, "endpoint", j.endpoint, "run", rec.ID)
	sinks := []probe.Sink{d.prom, &failureLog{log: log, limit: 10}}
	if d.queue != nil {
		sinks = append(sinks, d.queue)
	}
	art := d.openArtifacts(rec, j, log)
	if art != nil {
		art.SetLocation(d.o.Location)
		defer art.Abandon() // closes what Finish did not
		sinks = append(sinks, art.Sink())
	}
	run, err := setup.NewRun(j.profile, j.target.Endpoint, j.target.Client, sinks...)
	if err != nil {
		log.Error("run not started", "err", err)
		d.history.finish(rec, nil, ResultError, d.secrets.Error(err))
		return scheduler.Ran{}
	}
	if j.profile.ModelIdentity != nil {
		t, err := d.identityTracker(j.profile, j.target.Endpoint)
		if err != nil {
			log.Error("run not started", "err", err)
			d.history.finish(rec, nil, ResultError, d.secrets.Error(err))
			return scheduler.Ran{}
		}
		run.Identity = t.Begin()
	}
	run.IDBase = uint64(rec.ID) * RequestIDsPerRun
	if j.profile.Shard.Split && d.o.ShardCount > 1 {
		run.Plan = run.Plan.Split(d.o.ShardIndex, d.o.ShardCount)
	}
	log.Info("run started", "trigger", trigger, "load", run.Plan.String())
	f := runner.Execute(ctx, run, runner.Options{GPU: gpu.Only(d.gpu, j.target.GPUs), GPUInterval: d.gpuInterval, Server: j.target.Server})
	s := f.Summary
	s.Location = d.o.Location
	log.Info("run finished", "result", f.Verdict, "requests", s.Requests, "errors", s.Errors,
		"goodput", fmt.Sprintf("%.3f/s", s.Goodput), "slo_attainment", fmt.Sprintf("%.1f%%", 100*s.Attainment),
		"ttft_p50_ms", fmt.Sprintf("%.1f", s.TTFT.P50), "itl_p50_ms", fmt.Sprintf("%.2f", s.ITL.P50))
	d.history.finish(rec, s, string(f.Verdict), d.secrets.Error(f.Err))
	if art != nil {
		if err := art.Finish(s, run.Plan.LevelName()); err != nil {
			// What was half written is removed: a full disk gets its space
			// back, and no reader takes a cut file for the run.
			_ = os.RemoveAll(art.Dir)
			d.artifactsFailed(rec, j, fmt.Errorf("writing %s: %w (what was written is removed)", art.Dir, err), log)
		}
		if err := rundir.Prune(d.o.ArtifactsDir, d.o.ArtifactsRetain); err != nil {
			log.Error("removing old artifacts", "dir", d.o.ArtifactsDir, "err", err)
		}
	}
	return scheduler.Ran{Usage: scheduler.Usage{Requests: s.Requests, Tokens: s.InputTokens + s.OutputTokens, Cost: s.Cost}, Aborted: s.Aborted}
}

// openArtifacts makes the run's folder under --artifacts-dir and starts
// its records; nil when there is no such folder or it cannot be made
// (logged: the run goes on without them).
func (d *Daemon) openArtifacts(rec *RunRecord, j *job, log *slog.Logger) *rundir.Run {
	if d.o.ArtifactsDir == "" {
		return nil
	}
	name := fmt.Sprintf("%s-run%d-%s-%s", rec.Start.UTC().Format("20060102-150405"), rec.ID, rec.Profile, rec.Endpoint)
	dir, err := rundir.NewDir(d.o.ArtifactsDir, name)
	if err == nil {
		var art *rundir.Run
		if art, err = rundir.Open(dir, func() { log.Warn("records.jsonl is incomplete: results came faster than it was written") }); err == nil {
			return art
		}
	}
	d.artifactsFailed(rec, j, err, log)
	return nil
}

// artifactsFailed says on the run's page, in the log and in a counter
// that the run's artifacts were not written; probing goes on.
func (d *Daemon) artifactsFailed(rec *RunRecord, j *job, err error, log *slog.Logger) {
	err = d.secrets.Error(err)
	log.Error("the run's artifacts are not written", "err", err)
	d.history.artifactsFailed(rec, err)
	d.prom.ArtifactWriteFailed(j.profile.Name, j.endpoint)
}

// failureLog writes the first few failed requests of a run, and the first
// few server anomalies, to its log, so the run's page says what went wrong
// without a log line per request.
type failureLog struct {
	log          *slog.Logger
	limit        int
	n, anomalies int
}

func (f *failureLog) Observe(r *result.Request, _ slo.Verdict) {
	if r.Anomaly != result.AnomalyNone {
		f.anomalies++
		switch {
		case f.anomalies <= f.limit:
			f.log.Warn("server anomaly", "request", r.ID, "anomaly", r.Anomaly.String(), "outcome", r.Outcome.String(),
				"detail", "the response body did not end within 100ms of the stream's end; the connection was closed, the request's measurements stand")
		case f.anomalies == f.limit+1:
			f.log.Warn("further server anomalies of this run are counted, not logged")
		}
	}
	if r.Outcome != result.Error {
		return
	}
	f.n++
	switch {
	case f.n <= f.limit:
		f.log.Warn("request failed", "request", r.ID, "reason", r.Reason.String(), "http_status", r.HTTPStatus, "err", r.Err)
	case f.n == f.limit+1:
		f.log.Warn("further failed requests of this run are counted, not logged")
	}
}

// Started is a run RunNow started: its job and the id of its page.
type Started struct {
	Profile  string `json:"profile"`
	Endpoint string `json:"endpoint"`
	ID       int64  `json:"id"`
	// Queued is true for a run that waits for its endpoint, held by the
	// runs Behind names; it starts under ID once they end.
	Queued   bool   `json:"queued,omitempty"`
	Position int    `json:"position,omitempty"`
	Behind   string `json:"behind,omitempty"`
}

// RunNow starts profile's runs at once, against endpoint or all of its
// endpoints, or queues those whose endpoint an exclusive run holds. It
// returns the runs started or queued, and why the others did not start
// (each job's *scheduler.SkipError, joined, naming the run in progress),
// which it also logs. A refused run takes no id.
func (d *Daemon) RunNow(profile, endpoint string) ([]Started, error) {
	d.mu.Lock()
	var keys []string
	for key, j := range d.jobs {
		if j.profile.Name == profile && (endpoint == "" || j.endpoint == endpoint) {
			keys = append(keys, key)
		}
	}
	d.mu.Unlock()
	if len(keys) == 0 {
		return nil, fmt.Errorf("no profile %q runs on endpoint %q: %w", profile, endpoint, scheduler.ErrUnknown)
	}
	sort.Strings(keys)
	var started []Started
	var errs []error
	for _, k := range keys {
		p, e, _ := strings.Cut(k, "/")
		id := d.history.reserve()
		err := d.sched.RunNow(k, id)
		switch {
		case errors.Is(err, scheduler.ErrQueued):
			d.history.queue(id, p, e, "manual")
			rec, _ := d.history.Get(id)
			d.log.Info("run asked for is queued until its endpoint is free", "profile", p, "endpoint", e, "id", id, "position", rec.Position, "behind", rec.Behind)
			started = append(started, Started{Profile: p, Endpoint: e, ID: id, Queued: true, Position: rec.Position, Behind: rec.Behind})
		case err != nil:
			d.history.release(id)
			if errors.Is(err, scheduler.ErrBusy) {
				// Busy is this job's own run, in progress or queued: name
				// it, not another job's run on the endpoint.
				if h := d.history.ofJob(p, e, time.Now()); h != "" {
					err = fmt.Errorf("%w: %s", err, h)
				}
			}
			d.log.Warn("run asked for was not started", "profile", p, "endpoint", e, "reason", err)
			errs = append(errs, fmt.Errorf("%s on %s: %w", p, e, err))
		default:
			started = append(started, Started{Profile: p, Endpoint: e, ID: id})
		}
	}
	return started, errors.Join(errs...)
}

// Watch reloads the configuration when the file's checksum changes,
// checking every interval until ctx ends. A change is applied only once
// the file reads the same at two checks in a row, so that a file caught
// mid-write (still valid YAML, cut at a line) is never applied. A file
// refused once is not tried again until it changes.
func (d *Daemon) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	w := watch{quiet: max(QuietPeriod, every)}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d.check(&w, now)
		}
	}
}

// QuietPeriod is how long a changed file must read the same before the
// watcher applies it (or the poll interval, when longer): a writer that
// pauses between the halves of a file is not applied half-way. Writers
// should still write a new file and rename it into place.
const QuietPeriod = 2 * time.Second

// watch is what the file watcher remembers between checks.
type watch struct {
	pending [32]byte  // the checksum of a change seen, not yet applied
	seen    bool      // pending is set
	since   time.Time // when pending was first read
	quiet   time.Duration
}

// check is one check of the file watcher, at now.
func (d *Daemon) check(w *watch, now time.Time) {
	data, err := os.ReadFile(d.o.ConfigFile)
	if err != nil {
		return
	}
	sum := sha256.Sum256(data)
	d.mu.Lock()
	stale := sum != d.loaded && sum != d.failed
	d.mu.Unlock()
	switch {
	case !stale:
		w.seen = false
	case !w.seen || w.pending != sum:
		// Changed since the last check: it may still be being written.
		w.pending, w.seen, w.since = sum, true, now
		d.log.Debug("configuration file changed; applying it once it has read the same for the quiet period", "file", d.o.ConfigFile, "quiet", w.quiet)
	case now.Sub(w.since) < w.quiet:
		// The same, but not yet for long enough.
	default:
		w.seen = false
		d.log.Info("configuration file changed; reloading", "file", d.o.ConfigFile)
		_ = d.Reload()
	}
}

// Shutdown stops scheduling, cancels runs in progress (their requests count
// as cancelled), and flushes every sink, within ctx's deadline.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.ready.Store(false)
	stopped := make(chan struct{})
	go func() { d.sched.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		return fmt.Errorf("runs did not stop in time: %w", ctx.Err())
	}
	d.mu.Lock()
	d.closeTargets()
	d.mu.Unlock()
	if d.gpu != nil {
		_ = d.gpu.Close()
	}
	if d.queue != nil {
		return d.closeOTLP(ctx)
	}
	return nil
}

// closeOTLP hands the queued results to the exporter and flushes it, both
// within ctx: the queue gets half the time left, the flush the rest, so a
// collector that never answers holds neither past the deadline. What is
// given up is counted and said.
func (d *Daemon) closeOTLP(ctx context.Context) error {
	qctx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		qctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/2))
		defer cancel()
	}
	abandoned := d.queue.CloseWithin(qctx)
	err := d.otlp.Shutdown(ctx)
	spans, points := d.otlp.Dropped()
	if abandoned > 0 || spans > 0 || points > 0 {
		d.log.Warn("OTLP: not everything reached the collector", "results_left_in_queue", abandoned, "spans_dropped", spans, "metric_points_dropped", points)
	}
	if err != nil {
		return fmt.Errorf("otlp flush: %w", err)
	}
	return nil
}

func (d *Daemon) closeTargets() {
	for _, t := range d.targets {
		_ = t.t.Close()
	}
}

// identityTracker is the model-identity tracker of profile p against ep,
// made at its first run; a reload that changes only its bar or learning
// runs keeps its reference.
func (d *Daemon) identityTracker(p *config.Profile, ep *client.Endpoint) (*stats.IdentityTracker, error) {
	key := setup.IdentityKey(p, ep)
	d.identitiesMu.Lock()
	defer d.identitiesMu.Unlock()
	if t := d.identities[key]; t != nil {
		t.Configure(p.ModelIdentity.LearnRuns, p.ModelIdentity.MinAgreement, p.ModelIdentity.MaxLogprobDistance)
		return t, nil
	}
	t, err := setup.NewIdentityTracker(p, ep, d.o.StoragePath)
	if err != nil {
		return nil, err
	}
	if d.identities == nil {
		d.identities = map[string]*stats.IdentityTracker{}
	}
	d.identities[key] = t
	return t, nil
}

// ErrNoIdentity: no model-identity profile runs against that endpoint.
var ErrNoIdentity = errors.New("no model_identity profile of that name runs against that endpoint")

// identityOf is the tracker of the running model-identity profile
// against endpoint.
func (d *Daemon) identityOf(profile, endpoint string) (*stats.IdentityTracker, error) {
	d.mu.Lock()
	var p *config.Profile
	var ep *client.Endpoint
	for _, j := range d.jobs {
		if j.profile.Name == profile && j.endpoint == endpoint && j.profile.ModelIdentity != nil {
			p, ep = j.profile, j.target.Endpoint
		}
	}
	d.mu.Unlock()
	if p == nil {
		return nil, ErrNoIdentity
	}
	return d.identityTracker(p, ep)
}

// IdentityReference is the model-identity reference the profile's runs
// against endpoint are held to (nil while none is learned): written to a
// file, it pins them (model_identity.reference).
func (d *Daemon) IdentityReference(profile, endpoint string) (*stats.IdentityReference, error) {
	t, err := d.identityOf(profile, endpoint)
	if err != nil {
		return nil, err
	}
	return t.Reference(), nil
}

// ForgetIdentity drops the reference of the profile against endpoint,
// kept or not: its next complete runs learn it anew.
func (d *Daemon) ForgetIdentity(profile, endpoint string) error {
	t, err := d.identityOf(profile, endpoint)
	if err != nil {
		return err
	}
	return t.Forget()
}
