package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/tokenprobe/tokenprobe/internal/runonce"
)

// aiperfFlag is one of `aiperf profile`'s flags (its public source,
// aiperf/common/config/*.py, and GenAI-Perf's names it keeps), and what
// `tokenprobe run` does with it. docs/AIPERF.md is this table, written by
// `make docs`; a test holds every command line of the four write-ups this
// project answers to it.
type aiperfFlag struct {
	names []string // aiperf's names, the first its own
	// use is tokenprobe's equivalent; with refused, what to use instead.
	use string
	// how: "same" (tokenprobe's own flag, same meaning), "alias" (another
	// name for one of tokenprobe's flags), "differs" (accepted, meaning
	// told in note) or "refused" (an error naming it and use).
	how  string
	note string
}

// aiperfFlags lists every flag of `aiperf profile`. Those registered by
// main (tokenprobe's own, and the older aliases) are listed for the
// table; registerAIPerf adds the rest.
var aiperfFlags = []aiperfFlag{
	// Endpoint
	{[]string{"--model-names", "--model", "-m"}, "--model", "alias", "one model: a list is refused"},
	{[]string{"--model-selection-strategy"}, "a profile per model in a configuration file", "refused", ""},
	{[]string{"--custom-endpoint"}, "--url with the whole path's base (tokenprobe appends /chat/completions and the like)", "refused", "aiperf's other name for it, --endpoint, is tokenprobe's own flag: only run against the configuration's endpoint of that name"},
	{[]string{"--endpoint-type"}, "--api", "alias", "chat, completions, embeddings; responses, messages and kserve_generate (KServe v2 generate, Triton) are tokenprobe's too"},
	{[]string{"--streaming"}, "--streaming", "differs", "tokenprobe streams by default (a streamed answer is what TTFT and ITL are measured on); --no-streaming asks for whole answers"},
	{[]string{"--url", "-u"}, "--url", "same", "aiperf's server root: http://host:8000 is the API's base below it, http://host:8000/v1 (KServe's generate paths start at the root); a URL with a path is the base as written (http://host:8000/v1, a gateway's /openai/v1); without a scheme, http://"},
	{[]string{"--request-timeout-seconds"}, "--request-timeout-seconds", "same", "aiperf's default, 600 s, in a run from flags (a configuration's endpoint: 120 s)"},
	{[]string{"--api-key"}, "--api-key-env VAR (the variable holding the key)", "refused", "a key on the command line is seen by every user of the host (ps) and kept in shell history"},
	{[]string{"--header", "-H"}, "--header", "same", "NAME=VALUE or 'Name: value'"},
	{[]string{"--extra-inputs"}, "--extra-inputs", "same", "KEY:VALUE, a field of the request body"},
	// Input
	{[]string{"--input-file"}, "--dataset", "alias", "single-turn JSONL"},
	{[]string{"--fixed-schedule"}, "--trace (a Mooncake trace replays on its own schedule)", "refused", ""},
	{[]string{"--fixed-schedule-auto-offset"}, "--trace", "refused", ""},
	{[]string{"--fixed-schedule-start-offset"}, "--trace", "refused", ""},
	{[]string{"--fixed-schedule-end-offset"}, "--trace", "refused", ""},
	{[]string{"--public-dataset"}, "--dataset with the file downloaded (tokenprobe downloads nothing)", "refused", ""},
	{[]string{"--custom-dataset-type"}, "--dataset (single-turn) or --trace (mooncake_trace)", "refused", ""},
	{[]string{"--random-seed"}, "--random-seed", "alias", "the workload's seed"},
	{[]string{"--goodput"}, "--goodput", "same", "aiperf's names (time_to_first_token:500, in ms) or tokenprobe's (ttft:500ms)"},
	{[]string{"--audio-length-mean", "--audio-length-stddev", "--audio-batch-size", "--batch-size-audio", "--audio-format", "--audio-depths", "--audio-sample-rates", "--audio-num-channels"}, "a configuration file's dataset (tokenprobe sends no audio)", "refused", ""},
	{[]string{"--image-height-mean", "--image-height-stddev", "--image-width-mean", "--image-width-stddev", "--image-batch-size", "--batch-size-image", "--image-format"}, "a configuration file's dataset (tokenprobe sends no images)", "refused", ""},
	// Load
	{[]string{"--benchmark-duration"}, "--duration", "alias", "seconds"},
	{[]string{"--benchmark-grace-period"}, "--benchmark-grace-period", "same", "seconds or inf, aiperf's 30 s by default: requests still in flight then are cancelled and counted as cancelled (load.grace_period)"},
	{[]string{"--concurrency"}, "--concurrency", "same", ""},
	{[]string{"--request-rate"}, "--request-rate", "same", "with --concurrency too, as in aiperf: an open loop capped at that many in flight (load.max_concurrency)"},
	{[]string{"--request-rate-mode"}, "--arrival (poisson, constant or gamma)", "refused", ""},
	{[]string{"--request-count", "--num-requests"}, "--requests", "alias", ""},
	{[]string{"--warmup-request-count", "--num-warmup-requests"}, "--warmup-requests", "alias", ""},
	{[]string{"--request-cancellation-rate", "--request-cancellation-delay"}, "a configuration file's workload.cancel", "refused", ""},
	// Output
	{[]string{"--output-artifact-dir", "--artifact-dir"}, "--artifacts-dir", "alias", "a folder per run inside it, and --export-aiperf for AIPerf's files"},
	{[]string{"--profile-export-file"}, "--export-aiperf (profile_export_aiperf.json in each run's folder)", "refused", ""},
	// Sequence lengths
	{[]string{"--prompt-input-tokens-mean", "--synthetic-input-tokens-mean", "--isl"}, "--input-tokens MEAN", "alias", ""},
	{[]string{"--prompt-input-tokens-stddev", "--synthetic-input-tokens-stddev", "--isl-stddev"}, "--input-tokens MEAN,STDDEV", "alias", ""},
	{[]string{"--prompt-input-tokens-block-size", "--synthetic-input-tokens-block-size", "--isl-block-size"}, "a configuration file's workload.prefix (shared prefixes)", "refused", ""},
	{[]string{"--prompt-output-tokens-mean", "--output-tokens-mean", "--osl"}, "--output-tokens MEAN", "alias", ""},
	{[]string{"--prompt-output-tokens-stddev", "--output-tokens-stddev", "--osl-stddev"}, "--output-tokens MEAN,STDDEV", "alias", ""},
	{[]string{"--prompt-prefix-pool-size", "--prefix-prompt-pool-size", "--num-prefix-prompts", "--prompt-prefix-length", "--prefix-prompt-length"}, "a configuration file's workload.prefix", "refused", ""},
	{[]string{"--prompt-batch-size", "--batch-size-text", "--batch-size", "-b"}, "--batch (embeddings)", "refused", "tokenprobe batches only embeddings inputs, with --batch"},
	{[]string{"--seq-dist", "--sequence-distribution"}, "a configuration file's profiles, one per length", "refused", ""},
	{[]string{"--conversation-num", "--num-conversations", "--num-sessions", "--num-dataset-entries", "--num-prompts"}, "--requests (every request gets its own prompt)", "refused", ""},
	{[]string{"--conversation-turn-mean", "--session-turns-mean", "--conversation-turn-stddev", "--session-turns-stddev", "--conversation-turn-delay-mean", "--session-turn-delay-mean", "--conversation-turn-delay-stddev", "--session-turn-delay-stddev", "--conversation-turn-delay-ratio", "--session-delay-ratio"}, "a configuration file's workload.sessions", "refused", ""},
	// Tokenizer
	{[]string{"--tokenizer"}, "--tokenizer", "differs", "a tokenizer.json, a folder holding one, a Hugging Face model id found in the local Hugging Face cache, or builtin (one word a token); tokenprobe downloads nothing"},
	{[]string{"--tokenizer-revision"}, "--tokenizer with the snapshot's tokenizer.json path", "refused", ""},
	{[]string{"--tokenizer-trust-remote-code"}, "--tokenizer with a tokenizer.json (tokenprobe runs no model code)", "refused", ""},
	// AIPerf's own machinery
	{[]string{"--log-level"}, "--log.level", "refused", ""},
	{[]string{"--verbose", "-v", "--extra-verbose", "-vv"}, "--log.level=debug", "refused", ""},
	{[]string{"--ui-type", "--ui"}, "--progress-interval (the console's progress lines)", "refused", ""},
	{[]string{"--workers-max", "--max-workers", "--record-processor-service-count", "--record-processors"}, "--processes (tokenprobe runs its load in one process unless told)", "refused", ""},
	{[]string{"--zmq-host", "--zmq-ipc-path", "--debug-service", "--debug-services", "--trace-service", "--trace-services", "--show-internal-metrics", "--disable-uvloop", "--enable-yappi-profiling"}, "--debug.cpu-profile or --debug.trace (tokenprobe has no services to address)", "refused", ""},
}

// aiperfBools are aiperf's flags that take no value.
var aiperfBools = map[string]bool{
	"--fixed-schedule": true, "--fixed-schedule-auto-offset": true, "--verbose": true, "-v": true, "--extra-verbose": true, "-vv": true,
	"--tokenizer-trust-remote-code": true, "--show-internal-metrics": true,
	"--disable-uvloop": true, "--enable-yappi-profiling": true,
}

// registerAIPerf adds to run the aiperf flags main does not register: the
// new aliases, and every refused flag as a hidden one whose use is an
// error naming it and what to use instead (rather than kingpin's
// "unknown flag").
func registerAIPerf(run *kingpin.CmdClause, a *runonce.AdHoc, artifactDir *string) {
	run.Flag("isl-stddev", "--input-tokens MEAN,STDDEV").PlaceHolder("N").IntVar(&a.ISLStddev)
	run.Flag("prompt-input-tokens-mean", "--input-tokens MEAN").Hidden().IntVar(&a.ISLMean)
	run.Flag("prompt-input-tokens-stddev", "--input-tokens MEAN,STDDEV").Hidden().IntVar(&a.ISLStddev)
	run.Flag("osl-stddev", "--output-tokens MEAN,STDDEV").PlaceHolder("N").IntVar(&a.OSLStddev)
	run.Flag("prompt-output-tokens-mean", "--output-tokens MEAN").Hidden().IntVar(&a.OSLMean)
	run.Flag("prompt-output-tokens-stddev", "--output-tokens MEAN,STDDEV").Hidden().IntVar(&a.OSLStddev)
	run.Flag("num-requests", "--requests").Hidden().IntVar(&a.Requests)
	run.Flag("num-warmup-requests", "--warmup-requests").Hidden().IntVar(&a.Warmup)
	run.Flag("model-names", "--model").Hidden().StringVar(&a.Model)
	run.Flag("output-artifact-dir", "--artifacts-dir").Hidden().StringVar(artifactDir)
	run.Flag("input-file", "--dataset").PlaceHolder("FILE").StringVar(&a.Dataset)
	run.Flag("random-seed", "the workload's seed").PlaceHolder("N").Uint64Var(&a.Seed)
	run.Flag("request-timeout-seconds", "A request's timeout, in seconds (aiperf's 600 by default).").PlaceHolder("SECONDS").Float64Var(&a.TimeoutSeconds)
	run.Flag("benchmark-grace-period", "How long requests in flight when --benchmark-duration ends may finish before they are cancelled: seconds, or inf (aiperf's 30 by default).").PlaceHolder("SECONDS").StringVar(&a.GracePeriod)
	run.Flag("streaming", "Stream the answers (the default: TTFT and ITL are measured on a stream); --no-streaming asks for whole answers.").Default("true").IsSetByUser(&a.StreamSet).BoolVar(&a.Stream)
	registered := map[string]bool{}
	for _, f := range run.Model().Flags {
		registered["--"+f.Name] = true
		if f.Short != 0 {
			registered["-"+string(f.Short)] = true
		}
	}
	for _, f := range aiperfFlags {
		if f.how != "refused" {
			continue
		}
		for _, name := range f.names {
			if registered[name] || !strings.HasPrefix(name, "--") {
				continue // a short one: aiperfShortRefused says it, where kingpin would say "unknown"
			}
			text := fmt.Sprintf("%s is aiperf's, and tokenprobe does not implement it: use %s", name, f.use)
			if f.note != "" {
				text += " (" + f.note + ")"
			}
			msg := errors.New(text)
			fl := run.Flag(strings.TrimPrefix(name, "--"), "").Hidden().Action(func(*kingpin.ParseContext) error { return msg })
			if aiperfBools[name] {
				fl.Bool()
			} else {
				fl.String()
			}
		}
	}
}

// aiperfShortRefused is the refusal of the first of aiperf's refused short
// flags among a run's args (-v, -vv, -b, -b8, -b=8), which kingpin cannot
// register as it does the long ones (-vv is no flag of its), or nil.
func aiperfShortRefused(args []string) error {
	if len(args) == 0 || args[0] != "run" {
		return nil
	}
	for _, arg := range args[1:] {
		if arg == "--" {
			return nil
		}
		if !strings.HasPrefix(arg, "-") || strings.HasPrefix(arg, "--") {
			continue
		}
		for _, f := range aiperfFlags {
			if f.how != "refused" {
				continue
			}
			for _, name := range f.names {
				if strings.HasPrefix(name, "--") {
					continue
				}
				value := !aiperfBools[name] && len(arg) > len(name) && strings.HasPrefix(arg, name)
				if arg == name || value {
					text := fmt.Sprintf("%s is aiperf's, and tokenprobe does not implement it: use %s", name, f.use)
					if f.note != "" {
						text += " (" + f.note + ")"
					}
					return errors.New(text)
				}
			}
		}
	}
	return nil
}
