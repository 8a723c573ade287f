package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/schedslice"
	"github.com/tokenprobe/tokenprobe/internal/steal"
)

// Options say what the harness measures and with which programs.
type Options struct {
	// Tokenprobe is the tokenprobe binary: the simulator (`tokenprobe sim
	// --bench`) and the idle daemon.
	Tokenprobe string
	// Self is the harness binary, started as `Self client ...` for each
	// level so that every client is measured in a process of its own.
	Self string
	// K6 is the k6 binary; empty leaves k6 out (and the report says so).
	K6 string
	// K6MaxStreams leaves k6 out of closed-loop levels above it: each k6
	// VU is a JavaScript runtime of its own, megabytes where a stream of
	// ours is kilobytes.
	K6MaxStreams int
	// K6WideMaxStreams leaves k6 out of wide levels above it (0: none).
	K6WideMaxStreams int
	// Clients to measure at each level, in order.
	Clients []string
	// Streams are the closed-loop levels, Rates the open-loop ones.
	Streams []int
	Rates   []float64
	// Duration of each level's load; Interval between a stream's chunks;
	// Tokens per answer.
	Duration time.Duration
	Interval time.Duration
	Tokens   int
	// RateTokens is the answer length of the open-loop levels, short so
	// that what is measured is the dispatching of many requests, not
	// thousands of long streams.
	RateTokens int
	// RetrySteal, when above 0, measures a level again (once) when the
	// machine's CPU steal during it was above this percentage, and keeps
	// the measurement taken under less steal: on a shared VM a level can
	// lose half its CPU to other tenants. The report says which levels
	// were measured again.
	RetrySteal float64
	// IdleConfig is the daemon's configuration for the idle measurement,
	// held for IdleFor; an empty IdleConfig skips it.
	IdleConfig string
	IdleFor    time.Duration
	// SchedSlice is the scheduling slice tokenprobe's processes ask for
	// (`--sched.slice`; 0, the kernel's, by default as in the daemon); the
	// floor client, k6 and the simulator always run with the kernel's.
	SchedSlice time.Duration
	// Wide are the levels of tens of thousands of streams, in several
	// processes, after the others.
	Wide WideOptions
	// Replay is the trace replay of issue 3's bar, after the levels.
	Replay ReplayOptions
	// ModuleDir, when set, is where the Go benchmark of per-chunk parsing
	// runs (`go test -bench`).
	ModuleDir string
	// Progress receives a line per step.
	Progress io.Writer
}

// Measurement is one client at one level.
type Measurement struct {
	Load   Load         `json:"load"`
	Client ClientResult `json:"client"`
	// CPUSeconds is the client process's user+system time (its rusage).
	CPUSeconds float64 `json:"cpu_seconds"`
	// SystemSeconds is the part of CPUSeconds the kernel spent for the
	// process: the reads, connects and waits a floor client pays too.
	SystemSeconds float64 `json:"system_seconds,omitempty"`
	// IdleRSS is the client's RSS just before its load began (not known
	// for k6); PeakRSS the largest seen during the run.
	IdleRSS int64 `json:"idle_rss_bytes,omitempty"`
	PeakRSS int64 `json:"peak_rss_bytes"`
	// SimCPUSeconds is what the simulator spent meanwhile.
	SimCPUSeconds float64 `json:"sim_cpu_seconds"`
	// OTLPMetricBytes and OTLPTraceBytes are what the collector received
	// during the level (the OTLP kinds).
	OTLPMetricBytes int64 `json:"otlp_metric_bytes,omitempty"`
	OTLPTraceBytes  int64 `json:"otlp_trace_bytes,omitempty"`
	// Processes is how many client processes shared the level (0 for
	// k6, which runs in one).
	Processes int `json:"processes,omitempty"`
	// Simulators is how many simulator processes served it, on one shared
	// port (0: the harness's one).
	Simulators int `json:"simulators,omitempty"`
	// Pair is which of a wide level's measurements of each client this
	// is, from 1 (WideOptions.Pairs; 0 at the other levels).
	Pair int `json:"pair,omitempty"`
	// BusyPercent is how much of the machine's CPU time its processes
	// used during the level (all of them: clients, simulators, others).
	BusyPercent float64 `json:"machine_busy_percent"`
	// Disturbance is the machine's CPU steal during the level.
	Disturbance
}

// ChunksPerSecond is the streamed content chunks per second of load.
func (m Measurement) ChunksPerSecond() float64 {
	if m.Client.Seconds <= 0 {
		return 0
	}
	return float64(m.Client.Chunks) / m.Client.Seconds
}

// ReadReport reads the raw figures a run wrote (--json), to report them
// again.
func ReadReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Achieved is the requests sent per second of the load's duration (the
// seconds arrivals were sent in; the client's own seconds add the last
// answers' drain).
func (m Measurement) Achieved() float64 {
	if m.Load.Duration <= 0 {
		return 0
	}
	return float64(m.Client.Requests) / m.Load.Duration.Seconds()
}

// SimCoreShare is the simulator's CPU during the level, in percent of one
// core.
func (m Measurement) SimCoreShare() float64 {
	if m.Client.Seconds <= 0 {
		return 0
	}
	return 100 * m.SimCPUSeconds / m.Client.Seconds
}

// CPUPerMillionChunks is client CPU seconds per million content chunks.
func (m Measurement) CPUPerMillionChunks() float64 {
	if m.Client.Chunks == 0 {
		return 0
	}
	return m.CPUSeconds / float64(m.Client.Chunks) * 1e6
}

// HeldCPUPerMillionChunks is client CPU seconds per million content chunks
// while the level's streams were open (Held): 0 where the client reports
// no such window (k6, the open loop).
func (m Measurement) HeldCPUPerMillionChunks() float64 {
	return m.Client.Held.CPUPerMillionChunks()
}

// ChunksPerCoreSecond is the content chunks one core of the client's
// CPU time read.
func (m Measurement) ChunksPerCoreSecond() float64 {
	if m.CPUSeconds <= 0 {
		return 0
	}
	return float64(m.Client.Chunks) / m.CPUSeconds
}

// StreamsPerCore is how many of the level's streams one core would hold:
// the streams over the cores the client kept busy.
func (m Measurement) StreamsPerCore() float64 {
	if m.CPUSeconds <= 0 || m.Client.Seconds <= 0 {
		return 0
	}
	return float64(m.Client.PeakInFlight) / (m.CPUSeconds / m.Client.Seconds)
}

// RSSPerStream is the memory each open stream added: peak minus idle RSS
// over the peak number of open streams (gross for k6, whose idle RSS is
// not known).
func (m Measurement) RSSPerStream() float64 {
	if m.Client.PeakInFlight == 0 {
		return 0
	}
	return float64(m.PeakRSS-m.IdleRSS) / float64(m.Client.PeakInFlight)
}

// Idle is the daemon between runs.
type Idle struct {
	Config string `json:"config"`
	// Seconds is the time with no run in progress, of Observed in all.
	Seconds  float64 `json:"idle_seconds"`
	Observed float64 `json:"observed_seconds"`
	// CPUFraction is CPU time per wall time while idle (1 = a whole core).
	CPUFraction float64 `json:"cpu_fraction"`
	// RSS is the largest RSS seen while idle; RSSAnon and RSSFile are its
	// anonymous and file-backed parts at that moment (VmRSS also counts
	// shared memory, which the daemon has none of).
	RSS     int64 `json:"rss_bytes"`
	RSSAnon int64 `json:"rss_anon_bytes,omitempty"`
	RSSFile int64 `json:"rss_file_bytes,omitempty"`
	// RSSFilePMD is the part of RSSFile mapped whole as 2 MiB folios
	// (FilePmdMapped): a binary the linker has just written.
	RSSFilePMD int64 `json:"rss_file_pmd_bytes,omitempty"`
	// Binary is the size of the executable measured, in bytes.
	Binary int64 `json:"binary_bytes,omitempty"`
}

// Report is everything one harness run measured.
type Report struct {
	Date     time.Time     `json:"date"`
	Machine  string        `json:"machine"`
	Go       string        `json:"go"`
	Command  string        `json:"command"`
	Interval time.Duration `json:"interval_ns"`
	Tokens   int           `json:"tokens"`
	// RateTokens is the open loop's answer length.
	RateTokens int           `json:"rate_tokens"`
	Duration   time.Duration `json:"duration_ns"`
	K6         string        `json:"k6,omitempty"`
	Results    []Measurement `json:"results"`
	// Wide are the levels of many streams (WideOptions), WideLoad how.
	Wide     []Measurement `json:"wide,omitempty"`
	WideLoad WideOptions   `json:"wide_load"`
	Replays  []Replay      `json:"replays,omitempty"`
	// SchedSlice is Options.SchedSlice.
	SchedSlice time.Duration `json:"sched_slice_ns"`
	// ReplayTrace is the trace file the replays read.
	ReplayTrace string      `json:"replay_trace,omitempty"`
	Idle        *Idle       `json:"idle,omitempty"`
	Parse       *ParseBench `json:"parse,omitempty"`
	Problems    []string    `json:"problems,omitempty"`
	Quietness   Quietness   `json:"quietness"`
	// RetrySteal is Options.RetrySteal.
	RetrySteal float64 `json:"retry_steal_percent,omitempty"`
	// Took is how long the whole run took: the one place the docs take
	// make bench's duration from.
	Took time.Duration `json:"took_ns,omitempty"`
}

// Run measures every level with every client against one simulator
// process. A client that fails at a level is recorded as a problem and
// the harness goes on: a figure that misses is reported, not hidden.
func Run(ctx context.Context, o Options) (*Report, error) {
	rep := &Report{Date: time.Now().UTC(), Machine: Machine(), Interval: o.Interval, Tokens: o.Tokens, RateTokens: o.RateTokens, Duration: o.Duration,
		RetrySteal: o.RetrySteal, SchedSlice: o.SchedSlice, WideLoad: o.Wide}
	rep.Go = goVersion()
	if o.K6 != "" {
		rep.K6 = k6Version(o.K6)
	}
	sim, err := startSimulator(ctx, o.Tokenprobe, o.Progress, "--bench", "--decode-base", o.Interval.String())
	if err != nil {
		return nil, err
	}
	defer sim.stop()
	url := sim.base + "/v1"
	var collector *collector
	if slices.ContainsFunc(o.Clients, func(k string) bool { return k == KindOTLP || k == KindTraced }) {
		collector = startCollector()
		defer collector.Close()
	}
	runSteal := steal.Start()
	rep.Quietness.SleepBefore = sleepOvershoot(1000)
	defer func() {
		rep.Quietness.SleepAfter = sleepOvershoot(1000)
		rep.Quietness.StealPercent = runSteal.Percent()
	}()
	var loads []Load
	for _, n := range o.Streams {
		loads = append(loads, Load{URL: url, Streams: n, Duration: o.Duration, Tokens: o.Tokens, Interval: o.Interval, OTLP: collector.url()})
	}
	for _, r := range o.Rates {
		loads = append(loads, Load{URL: url, Rate: r, Duration: o.Duration, Tokens: o.RateTokens, Interval: o.Interval, OTLP: collector.url()})
	}
	for _, l := range loads {
		for _, kind := range o.Clients {
			if kind == KindK6 && (o.K6 == "" || o.K6MaxStreams > 0 && l.Streams > o.K6MaxStreams) {
				continue
			}
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			fmt.Fprintf(o.Progress, "bench: %s with %s for %s ...\n", l, kind, l.Duration)
			measureLevel := func() (Measurement, error) {
				simBefore, _ := cpuOf(sim.cmd.Process.Pid)
				levelSteal := steal.Start()
				metricsBefore, tracesBefore := collector.received()
				m, err := measure(ctx, o, kind, l)
				simAfter, _ := cpuOf(sim.cmd.Process.Pid)
				metricsAfter, tracesAfter := collector.received()
				m.OTLPMetricBytes, m.OTLPTraceBytes = metricsAfter-metricsBefore, tracesAfter-tracesBefore
				m.StealPercent, m.BusyPercent = levelSteal.Percent(), levelSteal.BusyPercent()
				m.SimCPUSeconds = (simAfter - simBefore).Seconds()
				return m, err
			}
			m, err := measureLevel()
			if err == nil && ctx.Err() == nil {
				// A failed second measurement leaves the first.
				m, _ = lessDisturbed(o.RetrySteal, m, measureLevel, func(pct float64) {
					fmt.Fprintf(o.Progress, "bench:   %.1f%% steal: measuring again ...\n", pct)
				})
			}
			if err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s, %s: %v", l, kind, err))
				fmt.Fprintf(o.Progress, "bench:   failed: %v\n", err)
				continue
			}
			fmt.Fprintf(o.Progress, "bench:   %.0f chunks/s, %.2f CPU s per 1M chunks, %.1f KiB per stream, %d errors, %.1f%% steal\n",
				m.ChunksPerSecond(), m.CPUPerMillionChunks(), m.RSSPerStream()/1024, m.Client.Errors, m.StealPercent)
			rep.Results = append(rep.Results, m)
			if m.Client.FirstError != "" {
				rep.Problems = append(rep.Problems, fmt.Sprintf("%s, %s: %s", l, kind, m.Client.FirstError))
			}
			// Let the simulator's closed connections and the kernel settle.
			time.Sleep(time.Second)
		}
	}
	if len(o.Wide.Streams) > 0 && ctx.Err() == nil {
		runWide(ctx, o, rep)
	}
	if o.Replay.Trace != "" && ctx.Err() == nil {
		progress := func(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }
		rep.ReplayTrace = o.Replay.Trace
		replay := o.Replay
		replay.RetrySteal = o.RetrySteal
		rep.Replays, err = RunReplays(ctx, o.Tokenprobe, replay, o.SchedSlice, progress)
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			fmt.Fprintf(o.Progress, "bench:   failed: %v\n", err)
		}
	}
	if o.ModuleDir != "" && ctx.Err() == nil {
		fmt.Fprintln(o.Progress, "bench: go test -bench BenchmarkStreamPerChunk ...")
		if rep.Parse, err = RunParseBench(ctx, o.ModuleDir); err != nil {
			rep.Problems = append(rep.Problems, err.Error())
		}
	}
	if o.IdleConfig != "" && ctx.Err() == nil {
		fmt.Fprintf(o.Progress, "bench: the daemon on %s for %s ...\n", o.IdleConfig, o.IdleFor)
		idle, err := MeasureIdle(ctx, o.Tokenprobe, o.IdleConfig, o.IdleFor)
		if err != nil {
			rep.Problems = append(rep.Problems, "idle daemon: "+err.Error())
		} else {
			rep.Idle = idle
			fmt.Fprintf(o.Progress, "bench:   idle %.0f of %.0f s: %.2f%% of a core, %.1f MiB\n",
				idle.Seconds, idle.Observed, 100*idle.CPUFraction, mib(idle.RSS))
		}
	}
	rep.Took = time.Since(rep.Date)
	return rep, nil
}

// measure runs one client process at one level.
func measure(ctx context.Context, o Options, kind string, l Load) (Measurement, error) {
	if kind == KindK6 {
		return measureK6(ctx, o.K6, l)
	}
	return measureProcesses(ctx, o, kind, l, []string{l.Source})
}

// measureProcesses runs a level's streams in a client process for each
// of sources, the streams divided among them, each process's connections
// from its source address (Load.Source; "" the kernel's choice); the
// measurement is their sum: CPU, RSS (each process's peak, added),
// requests and chunks, and the timing error of their histograms added up.
func measureProcesses(ctx context.Context, o Options, kind string, l Load, sources []string) (Measurement, error) {
	n := len(sources)
	type proc struct {
		cmd     *exec.Cmd
		rss     *rssSampler
		idle    int64
		last    string
		scanned chan struct{}
	}
	procs := make([]*proc, n)
	for i := range n {
		pl := l
		pl.Streams = l.Streams/n + boolInt(i < l.Streams%n)
		pl.Source = sources[i]
		args := []string{"client", "--kind", kind, "--url", pl.URL, "--duration", pl.Duration.String(), "--tokens", strconv.Itoa(pl.Tokens)}
		if isTokenprobe(kind) {
			args = append(args, "--sched.slice", o.SchedSlice.String())
		}
		if pl.OTLP != "" {
			args = append(args, "--otlp", pl.OTLP)
		}
		if pl.Source != "" {
			args = append(args, "--source", pl.Source)
		}
		if pl.Settle > 0 {
			args = append(args, "--settle", pl.Settle.String())
		}
		if pl.Streams > 0 {
			args = append(args, "--streams", strconv.Itoa(pl.Streams))
		} else {
			args = append(args, "--rate", strconv.FormatFloat(pl.Rate, 'f', -1, 64))
		}
		cmd := exec.CommandContext(ctx, o.Self, args...)
		cmd.Stderr = o.Progress
		out, err := cmd.StdoutPipe()
		if err != nil {
			return Measurement{}, err
		}
		if err := cmd.Start(); err != nil {
			return Measurement{}, err
		}
		p := &proc{cmd: cmd, rss: sampleRSS(cmd.Process.Pid), scanned: make(chan struct{})}
		procs[i] = p
		go func() {
			defer close(p.scanned)
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 16<<20) // the result's histogram is one long line
			for sc.Scan() {
				p.last = sc.Text()
				if p.last == readyLine {
					p.idle, _ = rssOf(cmd.Process.Pid)
				}
			}
		}()
	}
	m := Measurement{Load: l, Processes: n}
	timing := NewHistogram()
	var errs []error
	held := &Held{} // the processes' held windows added up; nil once one has none
	for i, p := range procs {
		<-p.scanned
		m.PeakRSS += p.rss.Stop()
		m.IdleRSS += p.idle
		if err := p.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("%s client %d of %d: %w", kind, i+1, n, err))
			continue
		}
		m.addRusage(p.cmd.ProcessState.SysUsage().(*syscall.Rusage))
		var c ClientResult
		if err := json.Unmarshal([]byte(p.last), &c); err != nil {
			errs = append(errs, fmt.Errorf("%s client printed %.200q: %w", kind, p.last, err))
			continue
		}
		if n == 1 {
			m.Client = c
			break
		}
		m.Client.Kind = c.Kind
		m.Client.Requests += c.Requests
		m.Client.Errors += c.Errors
		m.Client.Chunks += c.Chunks
		m.Client.PeakInFlight += c.PeakInFlight // as PeakRSS: each process's peak, added (at least the whole's)
		m.Client.Dropped += c.Dropped
		if m.Client.FirstError == "" && c.FirstError != "" {
			m.Client.FirstError = fmt.Sprintf("process %d of %d: %s", i+1, n, c.FirstError)
		}
		m.Client.Seconds = max(m.Client.Seconds, c.Seconds)
		timing.Add(c.Timing)
		held = addHeld(held, c.Held)
	}
	if n > 1 {
		m.Client.TimingError = quantilesOf(timing)
		m.Client.Held = held
	}
	m.Client.Timing = nil // in the JSON of each process, not of the report
	return m, errors.Join(errs...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readyLine is what a client process prints when its load is about to start.
const readyLine = "ready"

// ClientMain is the `client` subcommand: it runs the load in this process
// and prints readyLine, then the result as one JSON line.
//
// With TOKENPROBE_BENCH_PROFILE=DIR set it writes a CPU profile of the
// whole load and a heap profile at its middle into DIR, named by the
// client, the level and, at the wide levels, the process's source
// address: the profiles docs/BENCHMARKS.md explains its figures with. A
// closed loop's CPU profile is three files, as Held splits its CPU time:
// NAME-before, NAME-held and NAME-after.cpu.pprof (`go tool pprof` merges
// the files it is given: a glob of them is the whole).
//
// slice is the scheduling slice the process asks for (0: the kernel's).
func ClientMain(ctx context.Context, kind string, l Load, slice time.Duration, stdout io.Writer) error {
	if _, err := schedslice.Apply(slice); err != nil && !errors.Is(err, schedslice.ErrUnsupported) {
		return err
	}
	if dir := os.Getenv("TOKENPROBE_BENCH_PROFILE"); dir != "" {
		stop, err := profile(dir, kind, l)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := RunClient(ctx, kind, l, func() { fmt.Fprintln(stdout, readyLine) })
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(res)
}

// simulator is a `tokenprobe sim` process the harness started.
type simulator struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
}

// startSimulator starts `tokenprobe sim` with args on a free loopback
// port and waits until it answers its health check.
func startSimulator(ctx context.Context, tokenprobe string, stderr io.Writer, args ...string) (*simulator, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startSimulatorAt(ctx, tokenprobe, stderr, "127.0.0.1:"+port, args...)
}

// startSimulatorAt starts `tokenprobe sim` with args on addr. With
// --reuse-port, several share addr: the health check may be answered by
// one started before, but the kernel hands connections only to listening
// simulators, so none is lost to one still starting.
func startSimulatorAt(ctx context.Context, tokenprobe string, stderr io.Writer, addr string, args ...string) (*simulator, error) {
	cmd := exec.CommandContext(ctx, tokenprobe, append([]string{"sim", "--listen", addr, "--log.level", "warn"}, args...)...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the simulator: %w", err)
	}
	s := &simulator{cmd: cmd, base: "http://" + addr}
	if err := waitHealthy(ctx, s.base+"/health"); err != nil {
		s.stop()
		return nil, fmt.Errorf("the simulator did not come up: %w", err)
	}
	return s, nil
}

// stop ends the simulator and waits for it.
func (s *simulator) stop() { _ = s.cmd.Process.Signal(syscall.SIGTERM); _ = s.cmd.Wait() }

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	return port, err
}

func waitHealthy(ctx context.Context, url string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New(resp.Status)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func goVersion() string {
	out, err := exec.Command("go", "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// FindK6 looks for k6 on PATH and in GOBIN or GOPATH/bin, where `go
// install go.k6.io/k6@v1.8.1` puts it.
func FindK6() string {
	if p, err := exec.LookPath("k6"); err == nil {
		return p
	}
	for _, env := range []string{"GOBIN", "GOPATH"} {
		out, err := exec.Command("go", "env", env).Output()
		if err != nil || strings.TrimSpace(string(out)) == "" {
			continue
		}
		p := strings.TrimSpace(string(out))
		if env == "GOPATH" {
			p = filepath.Join(strings.Split(p, string(os.PathListSeparator))[0], "bin")
		}
		if _, err := os.Stat(filepath.Join(p, "k6")); err == nil {
			return filepath.Join(p, "k6")
		}
	}
	return ""
}

// profile starts a CPU profile and schedules a heap profile at the middle
// of the load.
func profile(dir, kind string, l Load) (stop func(), err error) {
	runtime.MemProfileRate = 4096 // fine enough to see a stream's few kilobytes
	level := fmt.Sprintf("streams%d", l.Streams)
	if l.Streams == 0 {
		level = fmt.Sprintf("rate%g", l.Rate)
	}
	if l.Source != "" { // the wide levels' processes, one per source address
		level += "-" + l.Source
	}
	name := filepath.Join(dir, kind+"-"+level)
	cpu := &phasedProfile{name: name}
	settle := settleTime(l)
	var timers []*time.Timer
	if l.Streams > 0 && settle < l.Duration {
		// As Held splits the CPU time: before the settle instant, the
		// window of open streams, and after the load's end.
		if err := cpu.begin("-before"); err != nil {
			return nil, err
		}
		timers = append(timers, time.AfterFunc(settle, func() { cpu.next("-held") }), time.AfterFunc(l.Duration, func() { cpu.next("-after") }))
	} else if err := cpu.begin(""); err != nil {
		return nil, err
	}
	heap := time.AfterFunc(l.Duration/2, func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "bench: %s at %s: heap in use %d KiB, stacks %d KiB, runtime total %d KiB, %d goroutines\n",
			kind, l, ms.HeapInuse>>10, ms.StackInuse>>10, ms.Sys>>10, runtime.NumGoroutine())
		if h, err := os.Create(name + ".heap.pprof"); err == nil {
			_ = pprof.Lookup("heap").WriteTo(h, 0)
			h.Close()
		}
	})
	return func() {
		heap.Stop()
		for _, t := range timers {
			t.Stop()
		}
		cpu.end()
	}, nil
}

// phasedProfile is a CPU profile written in phases, a file each: NAME
// plus the phase's suffix, then ".cpu.pprof". `go tool pprof` merges
// the files given together, so that a glob of them is the whole profile.
type phasedProfile struct {
	name string
	mu   sync.Mutex
	f    *os.File // the phase being written; nil once ended or failed to start
}

func (p *phasedProfile) begin(suffix string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.startLocked(suffix)
}

func (p *phasedProfile) startLocked(suffix string) error {
	f, err := os.Create(p.name + suffix + ".cpu.pprof")
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	p.f = f
	return nil
}

// next ends the phase being written and starts the one named by suffix;
// after end, nothing. A phase that cannot start is said on stderr, and the
// profile ends there.
func (p *phasedProfile) next(suffix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		return
	}
	p.stopLocked()
	if err := p.startLocked(suffix); err != nil {
		fmt.Fprintf(os.Stderr, "bench: CPU profile %s: %v\n", suffix, err)
	}
}

func (p *phasedProfile) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

func (p *phasedProfile) stopLocked() {
	if p.f != nil {
		pprof.StopCPUProfile()
		p.f.Close()
		p.f = nil
	}
}
