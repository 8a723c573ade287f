// Command tokenprobe probes LLM inference endpoints the way users feel them.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/tokenprobe/tokenprobe/alerts"
	"github.com/tokenprobe/tokenprobe/dashboards"
	"github.com/tokenprobe/tokenprobe/internal/schedslice"
	"github.com/tokenprobe/tokenprobe/runonce"
	"github.com/tokenprobe/tokenprobe/setup"
	"github.com/tokenprobe/tokenprobe/sim"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// wrote reports what a generator wrote and returns the exit code.
func wrote(files []string, err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return runonce.ExitRuntime
	}
	for _, f := range files {
		fmt.Println("wrote", f)
	}
	return runonce.ExitOK
}

// schedSliceFlag is --sched.slice of the commands that measure.
func schedSliceFlag(cmd *kingpin.CmdClause) *time.Duration {
	return cmd.Flag("sched.slice", "Ask Linux (6.12 or later) to run tokenprobe's threads in slices this short (100us to 100ms), so that a thread woken by a chunk or a send time preempts another process's sooner on a shared machine; the CPU share is unchanged, the CPU cost a little higher (0: the kernel's default; docs/BENCHMARKS.md has what it bought).").
		Default("0").Duration()
}

// applySchedSlice sets the scheduling slice, or reports false for a slice
// out of the kernel's bounds. A kernel without custom slices is no error:
// tokenprobe runs as before.
func applySchedSlice(logger *slog.Logger, d time.Duration) bool {
	if err := schedslice.Validate(d); err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe: --sched.slice: %v\n", err)
		return false
	}
	n, err := schedslice.Apply(d)
	switch {
	case d == 0:
	case errors.Is(err, schedslice.ErrUnsupported):
		logger.Debug("scheduling slice left to the kernel", "reason", err)
	case err != nil:
		logger.Warn("scheduling slice left to the kernel", "err", err)
	default:
		logger.Debug("scheduling slice set", "slice", d, "threads", n)
	}
	return true
}

func run(args []string) int {
	app := kingpin.New("tokenprobe", "Synthetic monitoring and load testing of LLM inference endpoints: TTFT, ITL, goodput and SLO attainment.")
	app.Version(version.Print("tokenprobe"))
	app.HelpFlag.Short('h')
	logCfg := &promslog.Config{}
	promslogflag.AddFlags(app, logCfg)

	serveCmd := app.Command("serve", "Run the daemon: probe every profile on its schedule and serve /metrics and the status page (the default command).").Default()
	so := serveOptions{}
	serveCmd.Flag("config.file", "Configuration file.").Short('c').Default("tokenprobe.yaml").StringVar(&so.configFile)
	so.web = kingpinflag.AddFlags(serveCmd, ":9470")
	serveCmd.Flag("web.enable-lifecycle", "Enable POST /-/reload and POST /api/v1/runs?profile= (run a profile now).").Default("false").BoolVar(&so.lifecycle)
	serveCmd.Flag("config.check-interval", "Reload the configuration when its checksum changes, checking this often (0 turns it off).").Default("0s").DurationVar(&so.checkInterval)
	serveCmd.Flag("scheduler.max-concurrent-runs", "At most this many runs at once across all profiles (0: no limit).").Default("0").IntVar(&so.maxConcurrentRuns)
	serveCmd.Flag("shard.count", "Replicas sharing the configuration: each runs the profiles whose name hashes to its index, and its share of split profiles.").Default("1").IntVar(&so.shardCount)
	serveCmd.Flag("shard.index", "This replica's index among --shard.count (default: the StatefulSet ordinal at the end of the hostname).").Default("-1").IntVar(&so.shardIndex)
	serveCmd.Flag("artifacts-dir", "Keep each run's records.jsonl, summary.json and report.txt in a folder of its own here, so the request_id exemplars on /metrics find their records (empty: keep none).").Default("").StringVar(&so.artifactsDir)
	serveCmd.Flag("artifacts-retain", "How many run folders --artifacts-dir keeps, the newest.").Default("100").IntVar(&so.artifactsRetain)
	serveSlice := schedSliceFlag(serveCmd)
	serveCmd.Flag("shutdown.timeout", "How long to wait for runs to stop and metrics to flush on SIGTERM.").Default("30s").DurationVar(&so.shutdownTimeout)

	runCmd := app.Command("run", "Run profiles once, print a report, write artifacts (records.jsonl, summary.json, report.txt per run; summary.json and report.html for all) and exit: 0 passed, 1 an SLO objective missed, 2 bad configuration, 3 a run could not be carried out, was aborted or broken (no success, too many failures), or was interrupted.")
	runConfig := runCmd.Flag("config.file", "Configuration file.").Short('c').Required().String()
	runProfiles := runCmd.Flag("profile", "Profile to run (repeatable; default: every profile).").Short('p').Strings()
	runEndpoint := runCmd.Flag("endpoint", "Only run against this endpoint.").String()
	runArtifacts := runCmd.Flag("artifacts-dir", "Folder for records.jsonl, summary.json and report.txt (empty: write none).").Default("artifacts").String()
	runProgress := runCmd.Flag("progress-interval", "How often to print progress (0 turns it off).").Default("2s").Duration()
	runCPUProfile := runCmd.Flag("debug.cpu-profile", "Write a CPU profile of the run to this file (go tool pprof reads it).").String()
	runHeapProfile := runCmd.Flag("debug.heap-profile", "Write a heap profile (allocations included) to this file when the run ends.").String()
	runTrace := runCmd.Flag("debug.trace", "Write an execution trace of the run to this file (go tool trace reads it).").String()
	runSlice := schedSliceFlag(runCmd)

	checkCmd := app.Command("check", "Validate a configuration file and exit 0 if it is valid. A secret it cannot read (an unset variable, a missing key file) is a warning here, so CI can check without the production secrets; serve and run refuse it.")
	checkConfig := checkCmd.Flag("config.file", "Configuration file.").Short('c').Required().String()

	genCmd := app.Command("generate", "Generate files from the metric catalog.")
	genRules := genCmd.Command("rules", "Write the Prometheus recording and alerting rules and a PrometheusRule resource.")
	genRulesOut := genRules.Flag("out", "Folder to write to.").Default("alerts").String()
	genRulesScale := genRules.Flag("scale", "Divide every window by this (60: an hour becomes a minute), for tests at compressed time.").Default("1").Float64()

	genDash := genCmd.Command("dashboards", "Write the Grafana dashboards (JSON) generated from the metric catalog.")
	genDashOut := genDash.Flag("out", "Folder to write to.").Default("dashboards").String()

	simCmd := app.Command("sim", "Serve a simulated OpenAI-compatible LLM endpoint with a queueing model and fault injection.")
	simListen := simCmd.Flag("listen", "Address to listen on.").Default("127.0.0.1:8000").String()
	var sc sim.Config
	simCmd.Flag("model", "Model name served.").Default("tokenprobe-sim").StringVar(&sc.Model)
	simCmd.Flag("slots", "Requests running at once; more wait in a FIFO queue.").Default("4").IntVar(&sc.Slots)
	simCmd.Flag("max-queue", "Reject with 503 when this many wait (0: unbounded).").Default("0").IntVar(&sc.MaxQueue)
	simCmd.Flag("prefill-base", "Fixed prefill time.").Default("5ms").DurationVar(&sc.PrefillBase)
	simCmd.Flag("prefill-per-token", "Prefill time per prompt token.").Default("100us").DurationVar(&sc.PrefillPerToken)
	simCmd.Flag("decode-base", "Time between tokens with one running request.").Default("10ms").DurationVar(&sc.DecodeBase)
	simCmd.Flag("decode-slowdown", "Fraction of decode-base added per further running request.").Default("0.05").Float64Var(&sc.DecodeSlowdown)
	simCmd.Flag("jitter", "Relative standard deviation of each step.").Default("0.05").Float64Var(&sc.Jitter)
	simCmd.Flag("tokens-per-chunk", "Tokens in each streamed chunk.").Default("1").IntVar(&sc.TokensPerChunk)
	simCmd.Flag("bench", "Benchmark mode: no queueing model or faults; every request streams its tokens decode-base apart, each chunk stamped with its send time.").BoolVar(&sc.Bench)
	simCmd.Flag("seed", "Seed of jitter and faults.").Default("1").Uint64Var(&sc.Seed)
	simCmd.Flag("fault.error-500", "Probability of HTTP 500.").Default("0").Float64Var(&sc.Faults.Error500)
	simCmd.Flag("fault.error-503", "Probability of HTTP 503.").Default("0").Float64Var(&sc.Faults.Error503)
	simCmd.Flag("fault.error-429", "Probability of HTTP 429 with Retry-After.").Default("0").Float64Var(&sc.Faults.Error429)
	simCmd.Flag("fault.disconnect", "Probability of a disconnect mid-stream.").Default("0").Float64Var(&sc.Faults.Disconnect)
	simCmd.Flag("fault.stall", "Probability of a stall mid-stream.").Default("0").Float64Var(&sc.Faults.Stall)
	simCmd.Flag("fault.stall-for", "Length of a stall.").Default("5s").DurationVar(&sc.Faults.StallFor)
	simCmd.Flag("fault.malformed", "Probability of a malformed chunk mid-stream.").Default("0").Float64Var(&sc.Faults.Malformed)

	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe: %v (try --help)\n", err)
		return runonce.ExitConfig
	}
	logger := promslog.New(logCfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	switch cmd {
	case serveCmd.FullCommand():
		if !applySchedSlice(logger, *serveSlice) {
			return runonce.ExitConfig
		}
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		return serve(ctx, so, logger, hup)
	case runCmd.FullCommand():
		if !applySchedSlice(logger, *runSlice) {
			return runonce.ExitConfig
		}
		stopProfiles, err := startProfiles(*runCPUProfile, *runHeapProfile, *runTrace)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tokenprobe: %v\n", err)
			return runonce.ExitRuntime
		}
		defer stopProfiles()
		// The first interrupt ends the run gracefully; a second one, with
		// the signal's default behaviour restored, quits at once.
		context.AfterFunc(ctx, stop)
		return runonce.Run(ctx, runonce.Options{
			ConfigFile: *runConfig, Profiles: *runProfiles, Endpoint: *runEndpoint,
			ArtifactsDir: *runArtifacts, ProgressEvery: *runProgress, Out: os.Stdout, Progress: os.Stderr,
		})
	case genRules.FullCommand():
		o := alerts.Defaults()
		o.Scale = *genRulesScale
		return wrote(alerts.WriteFiles(*genRulesOut, o))
	case genDash.FullCommand():
		return wrote(dashboards.Write(*genDashOut))
	case checkCmd.FullCommand():
		cfg, warnings, err := setup.CheckFile(*checkConfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return runonce.ExitConfig
		}
		for _, w := range warnings {
			fmt.Fprintf(os.Stderr, "warning: %v (serve and run refuse this)\n", w)
		}
		fmt.Printf("%s: valid (%d endpoints, %d profiles)\n", *checkConfig, len(cfg.Endpoints), len(cfg.Profiles))
		return 0
	case simCmd.FullCommand():
		s, err := sim.Start(*simListen, sc)
		if err != nil {
			logger.Error("cannot start the simulator", "err", err)
			return runonce.ExitRuntime
		}
		c := s.Config()
		logger.Info("simulator serving", "url", s.URL(), "slots", c.Slots, "decode_base", c.DecodeBase, "prefill_per_token", c.PrefillPerToken)
		<-ctx.Done()
		logger.Info("simulator stopping")
		_ = s.Close()
		return runonce.ExitOK
	}
	return runonce.ExitConfig
}
