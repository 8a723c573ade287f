// Package alerts generates Prometheus recording and alerting rules from the
// metric catalog: SLO burn rates on tokenprobe's good/total counters, the
// TTFT cliff, goodput drops, capacity regressions and the probe's own
// health. Windows scale, so the same rules run at compressed time in the
// end-to-end test.
package alerts

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/tokenprobe/tokenprobe/catalog"
)

// Options tune the generated rules.
type Options struct {
	// Scale divides every window and duration (1: real time; 60: an hour
	// becomes a minute, for tests).
	Scale float64
	// RunbookURL is the base of runbook links (docs/RUNBOOK.md on GitHub).
	RunbookURL string
	// CliffTTFT and CliffITL: the TTFT cliff fires when TTFT p95 is CliffTTFT
	// times its baseline while ITL p50 stays under CliffITL times its own.
	CliffTTFT, CliffITL float64
	// MinRate is the traffic floor (requests per second over the short
	// window) below which latency alerts stay quiet.
	MinRate float64
	// NoSuccessFor is how long without a passing run pages the probe's owner.
	NoSuccessFor time.Duration
	// DispatchLagP99 is the probe's own lateness that makes its numbers suspect.
	DispatchLagP99 time.Duration
}

// Defaults are the real-time rules shipped in alerts/.
func Defaults() Options {
	return Options{
		Scale: 1, RunbookURL: "https://github.com/tokenprobe/tokenprobe/blob/main/docs/RUNBOOK.md",
		CliffTTFT: 4, CliffITL: 1.5, MinRate: 0.01, NoSuccessFor: time.Hour, DispatchLagP99: 50 * time.Millisecond,
	}
}

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []Group `yaml:"groups"`
}

// Group is a rule group.
type Group struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is a recording or alerting rule.
type Rule struct {
	Record        string            `yaml:"record,omitempty"`
	Alert         string            `yaml:"alert,omitempty"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

const by = "profile, endpoint"

// window formats d divided by the scale as a Prometheus duration.
func (o Options) window(d time.Duration) string {
	scaled := time.Duration(float64(d) / o.Scale)
	if scaled < time.Second {
		scaled = time.Second
	}
	return model.Duration(scaled.Round(time.Second)).String()
}

// burnWindows are the multi-window, multi-burn-rate pairs of the Google
// SRE workbook: long window, short window, burn rate, severity.
var burnWindows = []struct {
	long, short time.Duration
	burn        float64
	severity    string
}{
	{time.Hour, 5 * time.Minute, 14.4, "page"},
	{6 * time.Hour, 30 * time.Minute, 6, "page"},
	{24 * time.Hour, 2 * time.Hour, 3, "ticket"},
	{3 * 24 * time.Hour, 6 * time.Hour, 1, "ticket"},
}

func windowName(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// Generate returns the rule file.
func Generate(o Options) RuleFile {
	if o.Scale <= 0 {
		o.Scale = 1
	}
	rec := Group{Name: "tokenprobe.recording", Rules: o.recording()}
	return RuleFile{Groups: []Group{rec, {Name: "tokenprobe.server", Rules: o.serverRecording()}, {Name: "tokenprobe.slo", Rules: o.sloAlerts()},
		{Name: "tokenprobe.latency", Rules: o.latencyAlerts()}, {Name: "tokenprobe.probe", Rules: o.probeAlerts()}}}
}

// serverRecording puts the servers' own series beside tokenprobe's, by
// model: the servers label theirs model_name, tokenprobe model, and the
// two are the same name when the endpoint asks for the model the server
// serves. The hidden queue is the part of the user's TTFT that the
// server's own TTFT does not show.
func (o Options) serverRecording() []Rule {
	short := o.window(5 * time.Minute)
	byModel := func(server, expr string) string {
		return fmt.Sprintf(`label_replace(label_replace(%s, "model", "$1", "model_name", "(.*)"), "server", %q, "model_name", ".*")`, expr, server)
	}
	mean := func(metric string) string {
		return fmt.Sprintf(`sum by (model_name) (rate(%[1]s_sum[%[2]s])) / sum by (model_name) (rate(%[1]s_count[%[2]s]))`, metric, short)
	}
	anyServer := func(of func(server string, i int) string) string {
		parts := make([]string, len(catalog.Servers))
		for i, s := range catalog.Servers {
			parts[i] = byModel(s.Server, of(s.Server, i))
		}
		return strings.Join(parts, " or ")
	}
	x := "tokenprobe_time_to_first_token_seconds"
	return []Rule{
		{Record: "tokenprobe:ttft_seconds:mean5m", Expr: fmt.Sprintf(`sum by (model) (histogram_sum(rate(%[1]s[%[2]s]))) / sum by (model) (histogram_count(rate(%[1]s[%[2]s]))) or sum by (model) (rate(%[1]s_sum[%[2]s])) / sum by (model) (rate(%[1]s_count[%[2]s]))`, x, short)},
		{Record: "tokenprobe:server_queue_seconds:mean5m", Expr: anyServer(func(_ string, i int) string { return mean(catalog.Servers[i].Queue) })},
		{Record: "tokenprobe:server_ttft_seconds:mean5m", Expr: anyServer(func(_ string, i int) string { return mean(catalog.Servers[i].TTFT) })},
		{Record: "tokenprobe:hidden_queue_seconds:mean5m", Expr: `tokenprobe:ttft_seconds:mean5m - on (model) group_right tokenprobe:server_ttft_seconds:mean5m`},
		{Record: "tokenprobe:server_running_requests", Expr: anyServer(func(_ string, i int) string { return "sum by (model_name) (" + catalog.Servers[i].Running + ")" })},
		{Record: "tokenprobe:server_waiting_requests", Expr: anyServer(func(_ string, i int) string { return "sum by (model_name) (" + catalog.Servers[i].Waiting + ")" })},
		{Record: "tokenprobe:server_kv_cache_usage:ratio", Expr: anyServer(func(_ string, i int) string {
			var alts []string
			for _, m := range catalog.Servers[i].KVCache {
				alts = append(alts, "avg by (model_name) ("+m+")")
			}
			return "(" + strings.Join(alts, " or ") + ")"
		})},
	}
}

func (o Options) recording() []Rule {
	var rules []Rule
	seen := map[time.Duration]bool{}
	for _, bw := range burnWindows {
		for _, w := range []time.Duration{bw.long, bw.short} {
			if seen[w] {
				continue
			}
			seen[w] = true
			// Errors against the SLO: 1 - good / (success + error). Cancelled
			// requests count in neither.
			rules = append(rules, Rule{
				Record: "tokenprobe:slo_errors:ratio_rate" + windowName(w),
				Expr: fmt.Sprintf(`1 - (sum by (%[1]s) (rate(tokenprobe_good_requests_total[%[2]s])) / sum by (%[1]s) (rate(tokenprobe_requests_total{outcome=~"success|error"}[%[2]s])))`,
					by, o.window(w)),
			})
		}
	}
	short, hour := o.window(5*time.Minute), o.window(time.Hour)
	q := func(name, metric string, p float64) Rule {
		return Rule{Record: name, Expr: catalog.Quantile(p, metric, by, "", short)}
	}
	rules = append(rules,
		Rule{Record: "tokenprobe:requests:rate5m", Expr: fmt.Sprintf(`sum by (%s) (rate(tokenprobe_requests_total{outcome=~"success|error"}[%s]))`, by, short)},
		Rule{Record: "tokenprobe:goodput:rate5m", Expr: fmt.Sprintf(`sum by (%s) (rate(tokenprobe_good_requests_total[%s]))`, by, short)},
		Rule{Record: "tokenprobe:goodput:rate1h", Expr: fmt.Sprintf(`sum by (%s) (rate(tokenprobe_good_requests_total[%s]))`, by, hour)},
		Rule{Record: "tokenprobe:slo_attainment:ratio_rate5m", Expr: `1 - tokenprobe:slo_errors:ratio_rate5m`},
		q("tokenprobe:ttft_p50:rate5m", "tokenprobe_time_to_first_token_seconds", 0.5),
		q("tokenprobe:ttft_p95:rate5m", "tokenprobe_time_to_first_token_seconds", 0.95),
		q("tokenprobe:ttft_p99:rate5m", "tokenprobe_time_to_first_token_seconds", 0.99),
		q("tokenprobe:itl_p50:rate5m", "tokenprobe_inter_token_latency_seconds", 0.5),
		q("tokenprobe:dispatch_lag_p99:rate5m", "tokenprobe_dispatch_lag_seconds", 0.99),
		// Baselines: the lowest of the last hour's 5-minute values, leaving
		// out the last 5 minutes, so a new cliff is measured against the
		// floor before it.
		Rule{Record: "tokenprobe:ttft_p95:baseline1h", Expr: fmt.Sprintf(`min_over_time(tokenprobe:ttft_p95:rate5m[%s] offset %s)`, hour, short)},
		Rule{Record: "tokenprobe:itl_p50:baseline1h", Expr: fmt.Sprintf(`min_over_time(tokenprobe:itl_p50:rate5m[%s] offset %s)`, hour, short)},
	)
	return rules
}

func (o Options) alert(name, severity, expr, summary, description string) Rule {
	return Rule{
		Alert: name, Expr: expr,
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary": summary, "description": description,
			"runbook_url": o.RunbookURL + "#" + strings.ToLower(name),
		},
	}
}

// objective is the error budget of a profile with an SLO objective.
// Every replica of a sharded daemon exports the objective of the
// profiles it knows: max by keeps one series per profile and endpoint, so
// the match with the recording rules stays one-to-one.
const budget = `(1 - max by (profile, endpoint) (tokenprobe_slo_objective_ratio) > 0 < 1)`

func (o Options) sloAlerts() []Rule {
	burn := func(long, short time.Duration, rate float64) string {
		return fmt.Sprintf(`(tokenprobe:slo_errors:ratio_rate%[1]s > on (%[3]s) (%[4]g * %[5]s) and tokenprobe:slo_errors:ratio_rate%[2]s > on (%[3]s) (%[4]g * %[5]s))`,
			windowName(long), windowName(short), by, rate, budget)
	}
	page := burn(burnWindows[0].long, burnWindows[0].short, burnWindows[0].burn) + " or " + burn(burnWindows[1].long, burnWindows[1].short, burnWindows[1].burn)
	ticket := burn(burnWindows[2].long, burnWindows[2].short, burnWindows[2].burn) + " or " + burn(burnWindows[3].long, burnWindows[3].short, burnWindows[3].burn)
	goodDrop := o.alert("TokenprobeGoodputDrop", "ticket",
		fmt.Sprintf(`tokenprobe:goodput:rate1h < 0.5 * (tokenprobe:goodput:rate1h offset %s) and on (%s) sum by (%s) (increase(tokenprobe_requests_total{outcome=~"success|error"}[%s])) > 50`,
			o.window(24*time.Hour), by, by, o.window(time.Hour)),
		"Goodput of {{ $labels.profile }} on {{ $labels.endpoint }} halved against yesterday",
		"Good requests per second over the last hour are {{ $value | humanize }}, under half of the same hour yesterday, on at least 50 requests.")
	goodDrop.For = o.window(15 * time.Minute)
	goodZero := o.alert("TokenprobeGoodputZero", "page",
		fmt.Sprintf(`tokenprobe:goodput:rate5m == 0 and on (%s) tokenprobe:requests:rate5m > %g`, by, o.MinRate),
		"No request of {{ $labels.profile }} on {{ $labels.endpoint }} meets its SLOs",
		"Requests are being sent and answered or failing, but none is good: every one misses a threshold or fails.")
	goodZero.For = o.window(10 * time.Minute)
	return []Rule{
		o.alert("TokenprobeGoodputBudgetBurn", "page", page,
			"{{ $labels.profile }} on {{ $labels.endpoint }} burns its goodput error budget fast",
			"Requests that are not good (failed, or missed an SLO threshold) run at 14.4x the budget over 1h and 5m, or 6x over 6h and 30m: at this pace a 30-day budget lasts two days."),
		o.alert("TokenprobeGoodputBudgetBurnSlow", "ticket", ticket,
			"{{ $labels.profile }} on {{ $labels.endpoint }} burns its goodput error budget",
			"Requests that are not good run at 3x the budget over 1d and 2h, or 1x over 3d and 6h."),
		goodDrop, goodZero,
	}
}

// dominantPhase names, where the server's own metrics are read, the phase
// that held most of the last run's TTFT: the queue confirms the cliff's
// reading, elsewhere points away from the server. Without a breakdown it
// adds nothing.
const dominantPhase = `{{ with printf "max by (phase) (tokenprobe_run_last_ttft_dominant_phase{profile=%q,endpoint=%q}) == 1" $labels.profile $labels.endpoint | query }}{{ with first . }}` +
	` The server's own metrics say where the last run's TTFT went: mostly {{ if eq (label "phase" .) "queue" }}waiting in the server's queue{{ else if eq (label "phase" .) "prefill" }}in the server's prefill{{ else }}outside the server's queue and prefill (network, gateway, tokenization){{ end }}.{{ end }}{{ end }}`

func (o Options) latencyAlerts() []Rule {
	cliff := o.alert("TokenprobeTTFTCliff", "page",
		fmt.Sprintf(`tokenprobe:ttft_p95:rate5m > %[1]g * tokenprobe:ttft_p95:baseline1h and on (%[2]s) tokenprobe:itl_p50:rate5m < %[3]g * tokenprobe:itl_p50:baseline1h and on (%[2]s) tokenprobe:requests:rate5m > %[4]g`,
			o.CliffTTFT, by, o.CliffITL, o.MinRate),
		"TTFT cliff on {{ $labels.endpoint }} ({{ $labels.profile }}): requests are queueing",
		fmt.Sprintf("TTFT p95 is {{ $value | humanizeDuration }}, over %gx its floor of the last hour, while inter-token latency stays under %gx its own: the server is not slower, requests wait for a slot. Check load, batch size and replicas.", o.CliffTTFT, o.CliffITL)+dominantPhase)
	cliff.For = o.window(2 * time.Minute)
	cliff.KeepFiringFor = o.window(10 * time.Minute)
	tail := o.alert("TokenprobeTTFTTailDivergence", "ticket",
		fmt.Sprintf(`tokenprobe:ttft_p99:rate5m > 10 * tokenprobe:ttft_p50:rate5m and on (%s) tokenprobe:requests:rate5m > %g`, by, o.MinRate),
		"TTFT p99 of {{ $labels.profile }} on {{ $labels.endpoint }} is over 10x its median",
		"Most requests start fast but the slowest percent wait {{ $value | humanizeDuration }}: head-of-line blocking behind long prompts, preemption, or one bad replica.")
	tail.For = o.window(15 * time.Minute)
	capacity := o.alert("TokenprobeCapacityRegression", "ticket",
		fmt.Sprintf(`tokenprobe_run_last_capacity_at_slo < 0.5 * quantile_over_time(0.5, tokenprobe_run_last_capacity_at_slo[%s]) and tokenprobe_run_last_capacity_at_slo > 0 or tokenprobe_run_last_capacity_at_slo == 0 and quantile_over_time(0.5, tokenprobe_run_last_capacity_at_slo[%s]) > 0`,
			o.window(7*24*time.Hour), o.window(7*24*time.Hour)),
		"Capacity at SLO of {{ $labels.endpoint }} ({{ $labels.profile }}) fell below half its 7-day level",
		"The last sweep meets its SLO objective up to load level {{ $value }} only, under half the median of the last 7 days: a deploy, a config change or lost replicas cut capacity.")
	return []Rule{cliff, tail, capacity,
		o.alert("TokenprobeQueueingWithIdleGPUs", "info",
			`ALERTS{alertname="TokenprobeTTFTCliff",alertstate="firing"} and on () (avg(DCGM_FI_PROF_SM_ACTIVE) < 0.3)`,
			"TTFT cliff on {{ $labels.endpoint }} while the GPUs are mostly idle",
			"Requests queue but SM activity averages under 30%: the bottleneck is before the GPU (scheduler limits such as max_num_seqs, tokenization, a small KV cache), not compute. A cliff with SM activity near 100% needs more GPUs."),
	}
}

func (o Options) probeAlerts() []Rule {
	noSuccess := o.alert("TokenprobeNoSuccessfulRun", "ticket",
		fmt.Sprintf(`time() - tokenprobe_run_last_success_timestamp_seconds > %g and on (%s) tokenprobe_run_last_timestamp_seconds > 0`, time.Duration(float64(o.NoSuccessFor)/o.Scale).Seconds(), by),
		"{{ $labels.profile }} on {{ $labels.endpoint }} has not passed for {{ $value | humanizeDuration }}",
		"Runs happen but none met its objective or finished without error. The last run's page on the status page has its report and log.")
	noData := o.alert("TokenprobeNoData", "ticket", fmt.Sprintf(`absent_over_time(tokenprobe_build_info[%s])`, o.window(10*time.Minute)),
		"No tokenprobe metrics", "Prometheus has scraped no tokenprobe for 10 minutes: the probe is down or not scraped, and every other alert here is blind.")
	lag := o.alert("TokenprobeDispatchLagHigh", "ticket", fmt.Sprintf(`tokenprobe:dispatch_lag_p99:rate5m > %g`, o.DispatchLagP99.Seconds()),
		"tokenprobe sends {{ $labels.profile }} requests late",
		"Dispatch lag p99 is {{ $value | humanizeDuration }}: the probe cannot keep its own schedule (CPU, max_concurrency), so its latency figures understate what users would see.")
	lag.For = o.window(10 * time.Minute)
	reload := o.alert("TokenprobeConfigReloadFailed", "ticket", `tokenprobe_config_last_reload_successful == 0`,
		"tokenprobe refused its configuration file",
		"The last reload failed; the previous configuration still runs. The status page and the log name the file, line and field.")
	reload.For = o.window(5 * time.Minute)
	return []Rule{noSuccess, noData, lag, reload}
}
