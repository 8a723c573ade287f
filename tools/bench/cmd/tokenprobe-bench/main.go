// Command tokenprobe-bench is the harness behind `make bench`: it starts
// the simulator in bench mode in its own process and measures tokenprobe's
// client beside a floor client and k6 at each level, then writes the
// figures into docs/BENCHMARKS.md. See docs/BENCHMARKS.md for how to read
// them.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"

	"github.com/tokenprobe/tokenprobe/tools/bench"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	app := kingpin.New("tokenprobe-bench", "Measure tokenprobe's client against a floor client and k6 on a simulator in bench mode.")
	all := app.Command("run", "Measure every level and write the report.").Default()
	var o bench.Options
	all.Flag("tokenprobe", "The tokenprobe binary (simulator and idle daemon).").Default("bin/tokenprobe").StringVar(&o.Tokenprobe)
	k6 := all.Flag("k6", "The k6 binary; 'auto' looks on PATH and in GOPATH/bin, '' leaves k6 out.").Default("auto").String()
	all.Flag("k6.max-streams", "Leave k6 out of closed-loop levels above this (0: none).").Default("5000").IntVar(&o.K6MaxStreams)
	all.Flag("k6.wide-max-streams", "Leave k6 out of the wide levels above this (0: none): one process, it fails past the open-file limit, and tens of thousands of VUs take gigabytes.").Default("25000").IntVar(&o.K6WideMaxStreams)
	clients := all.Flag("clients", "Clients to measure, comma-separated: floor, tokenprobe, k6, and tokenprobe-otlp and tokenprobe-traced (OTLP push with tracing off and on, to a collector that discards).").Default("floor,tokenprobe,k6").String()
	streams := all.Flag("streams", "Closed-loop levels: streams held open.").Default("100,1000,5000,10000").String()
	rates := all.Flag("rates", "Open-loop levels: requests per second (Poisson).").Default("500,1000,2000,5000").String()
	all.Flag("duration", "Load per level and client.").Default("15s").DurationVar(&o.Duration)
	all.Flag("steal.retry", "Measure a level again (once) when the hypervisor took more than this percentage of the CPU during it, and keep the less disturbed measurement (0: never).").Default("5").Float64Var(&o.RetrySteal)
	all.Flag("interval", "Time between one stream's chunks.").Default("100ms").DurationVar(&o.Interval)
	all.Flag("tokens", "Content chunks per answer at the closed-loop levels.").Default("50").IntVar(&o.Tokens)
	all.Flag("rate-tokens", "Content chunks per answer at the open-loop levels.").Default("5").IntVar(&o.RateTokens)
	wide := all.Flag("wide.streams", "Levels of many streams, held by as many client and simulator processes as the open-file limit needs ('' skips them).").Default("10000,25000,50000").String()
	all.Flag("wide.interval", "Time between one stream's chunks at those levels: long enough that the machine is not saturated.").Default("2s").DurationVar(&o.Wide.Interval)
	all.Flag("wide.tokens", "Content chunks per answer at those levels: enough that an answer outlasts the load.").Default("15").IntVar(&o.Wide.Tokens)
	all.Flag("wide.duration", "Load per wide level and client.").Default("20s").DurationVar(&o.Wide.Duration)
	all.Flag("wide.settle", "How long the wide levels' streams have to open before their chunks count for timing.").Default("8s").DurationVar(&o.Wide.Settle)
	all.Flag("wide.pairs", "Times each wide level measures the floor and tokenprobe, the order swapped each time: the CPU bars take the median pair's ratio.").Default("3").IntVar(&o.Wide.Pairs)
	all.Flag("wide.per-process", "Most streams one process holds at the wide levels (0: three quarters of the open-file limit).").Default("0").IntVar(&o.Wide.PerProcess)
	all.Flag("idle.config", "Daemon configuration for the idle measurement ('' skips it).").Default("configs/demo.yaml").StringVar(&o.IdleConfig)
	all.Flag("idle.for", "How long to watch the idle daemon.").Default("150s").DurationVar(&o.IdleFor)
	all.Flag("sched.slice", "Scheduling slice tokenprobe's processes ask for, as tokenprobe's --sched.slice (0: the kernel's).").Default("0").DurationVar(&o.SchedSlice)
	all.Flag("replay.trace", "Mooncake trace the replays read ('' skips them).").Default("../shared/datasets/mooncake_conversation_trace.jsonl").StringVar(&o.Replay.Trace)
	speedups := all.Flag("replay.speedups", "Speed-ups to replay the trace at, comma-separated.").Default("1,10").String()
	all.Flag("replay.for", "How long each replay sends: the trace's first replay.for x speed-up.").Default("30s").DurationVar(&o.Replay.For)
	all.Flag("replay.runs", "Replays at each speed-up.").Default("3").IntVar(&o.Replay.Runs)
	gobench := all.Flag("gobench", "Run the per-chunk parsing Go benchmark in this module.").Default("true").Bool()
	out := all.Flag("out", "Markdown file whose 'make bench' section is replaced ('' prints only).").Default("docs/BENCHMARKS.md").String()
	jsonOut := all.Flag("json", "Where the raw figures go ('' for nowhere).").Default("docs/bench/latest.json").String()
	fromJSON := all.Flag("from-json", "Measure nothing: write the report again from these raw figures (after a change to how they are reported).").String()

	cl := app.Command("client", "Run one client's load in this process (the harness starts these).").Hidden()
	kind := cl.Flag("kind", "floor, tokenprobe, tokenprobe-otlp or tokenprobe-traced.").Required().String()
	var l bench.Load
	cl.Flag("url", "The simulator's base URL.").Required().StringVar(&l.URL)
	cl.Flag("streams", "Streams held open.").IntVar(&l.Streams)
	cl.Flag("rate", "Requests per second.").Float64Var(&l.Rate)
	cl.Flag("duration", "How long.").Required().DurationVar(&l.Duration)
	cl.Flag("tokens", "Content chunks per answer.").Required().IntVar(&l.Tokens)
	cl.Flag("otlp", "The collector the OTLP kinds push to.").StringVar(&l.OTLP)
	cl.Flag("source", "The local address of the client's connections (127.0.0.2: any 127.x reaches a loopback server).").StringVar(&l.Source)
	cl.Flag("settle", "How long after the start the streams count as open (0: a fifth of the load, at most 3 s).").DurationVar(&l.Settle)
	clSlice := cl.Flag("sched.slice", "Scheduling slice to ask for (0: the kernel's).").Default("0").Duration()

	cmd, err := app.Parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe-bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cmd == cl.FullCommand() {
		if err := bench.ClientMain(ctx, *kind, l, *clSlice, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "tokenprobe-bench client: %v\n", err)
			return 1
		}
		return 0
	}

	o.Progress = os.Stderr
	if o.Self, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if o.Streams, err = ints("streams", *streams); err == nil {
		o.Wide.Streams, err = ints("wide.streams", *wide)
	}
	if err == nil {
		if o.Rates, err = floats("rates", *rates); err == nil {
			o.Replay.Speedups, err = floats("replay.speedups", *speedups)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe-bench: %v\n", err)
		return 2
	}
	o.Clients = strings.Split(*clients, ",")
	switch *k6 {
	case "auto":
		if o.K6 = bench.FindK6(); o.K6 == "" {
			fmt.Fprintln(os.Stderr, "bench: k6 not found, left out (go install go.k6.io/k6@v1.8.1)")
		}
	default:
		o.K6 = *k6
	}
	if *gobench {
		o.ModuleDir = "."
	}
	var rep *bench.Report
	if *fromJSON != "" {
		// The figures keep the command they were measured with.
		rep, err = bench.ReadReport(*fromJSON)
		*jsonOut = ""
	} else if rep, err = bench.Run(ctx, o); err == nil {
		err = rep.Check()
		rep.Command = strings.TrimSpace("make bench BENCHFLAGS='" + strings.Join(args, " ") + "'")
		if len(args) == 0 {
			rep.Command = "make bench"
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tokenprobe-bench: %v\n", err)
		return 1
	}
	md := rep.Markdown()
	fmt.Println(md)
	if *out != "" {
		if err := bench.WriteSection(*out, md); err != nil {
			fmt.Fprintf(os.Stderr, "tokenprobe-bench: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", *out)
	}
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(rep, "", "  ")
		err := os.MkdirAll(dirOf(*jsonOut), 0o755)
		if err == nil {
			err = os.WriteFile(*jsonOut, append(data, '\n'), 0o644)
		}
		if err != nil { // a failed write used to go unreported here
			fmt.Fprintf(os.Stderr, "tokenprobe-bench: %v\n", err)
			return 1
		}
	}
	return 0
}

func dirOf(p string) string {
	return filepath.Dir(p)
}

func ints(flag, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive whole number", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func floats(flag, s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseFloat(f, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--%s: %q is not a positive number", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}
