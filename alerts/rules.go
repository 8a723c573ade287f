// Package alerts generates Prometheus recording and alerting rules from the
// metric catalog: SLO burn rates on tokenprobe's good/total counters, the
// TTFT cliff, goodput drops, capacity regressions and the probe's own
// health. Windows scale, so the same rules run at compressed time in the
// end-to-end test.
package alerts

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/probe/stats"
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
	// Selector is the label matcher every rule puts on tokenprobe's own
	// series, so that it reads the scraped ones alone: series pushed over
	// OTLP into the same Prometheus carry tokenprobe_profile, never
	// profile, and some share a name with the scraped ones.
	Selector string
	// WrongAnswers is the share of answers failing a check that pages.
	WrongAnswers float64
	// BaselineSamples is how many full-window values of a level's TTFT p95
	// the last hour must hold before its median is a baseline: until then
	// the cliff alert says nothing of that level.
	BaselineSamples int
	// RateLimitShare is the share of a provider's rate limit left that
	// opens a ticket when the answers keep saying less (default 0.1).
	RateLimitShare float64
	// MinLocations is how many locations (--probe.location) must see a
	// condition before its quorum alert fires (2 or more); where fewer
	// probe the profile, only the per-location alerts fire.
	MinLocations int
	// MinRequests is the least number of requests in a window that a
	// latency page (the cliff, the tail) or a total outage's burn page
	// stands on: a p95 of a handful of requests is their slowest. It is
	// a count, so it does not scale with time.
	MinRequests int
	// StarvedShare is the share of a figure the probe's own delay p99
	// must stay under for the figure to count towards a baseline; past
	// it at the smallest TTFT p50 of a location's profiles,
	// TokenprobeProbeStarved opens a ticket.
	StarvedShare float64
}

// Defaults are the real-time rules shipped in alerts/.
func Defaults() Options {
	return Options{
		Scale: 1, RunbookURL: "https://github.com/tokenprobe/tokenprobe/blob/main/docs/RUNBOOK.md",
		CliffTTFT: 4, CliffITL: 1.5, MinRate: 0.01, NoSuccessFor: time.Hour, DispatchLagP99: 50 * time.Millisecond,
		Selector: `profile!=""`, BaselineSamples: catalog.BaselineSamples, WrongAnswers: 0.05, MinLocations: 2,
		RateLimitShare: 0.1, MinRequests: 20, StarvedShare: 0.1,
	}
}

// z is the standard normal's 97.5th percentile: every interval a rule
// reads is a 95% one, as every verdict's is (probe/stats).
const z = 1.959963984540054

// wilsonLow is the low end of the 95% Wilson interval of a ratio p over
// n requests, in PromQL (p and n series matched on their labels): a
// ratio holds at the conservative end of its interval only when this does.
func wilsonLow(p, n string) string {
	return fmt.Sprintf(`(%[1]s + %[3]g / %[2]s - %[4]g * sqrt(clamp_min(%[1]s * (1 - %[1]s), 0) / %[2]s + %[5]g / %[2]s ^ 2)) / (1 + %[6]g / %[2]s)`,
		p, n, z*z/2, z, z*z/4, z*z)
}

// p95LowBins are, for a window of at least N requests, the quantile of
// the window whose value is at or under the low end of the 95% interval
// of its p95 (the order statistic of the binomial rule, at N, the
// smallest count of the bin): the p95 a cliff page stands on, so that a
// few slow requests among dozens do not page.
func p95LowBins(minRequests int) []struct {
	N   int
	Phi float64
} {
	var out []struct {
		N   int
		Phi float64
	}
	for _, n := range []int{minRequests, 50, 100, 200, 500, 1000} {
		if n < minRequests || len(out) > 0 && n <= out[len(out)-1].N {
			continue
		}
		// A phi of 0 (one or two requests: the low end is their
		// fastest) is, for a classic histogram, the bottom of its first
		// bucket whatever it holds; a hundredth is the bottom of the
		// first bucket holding a request, as a native histogram's 0 is.
		out = append(out, struct {
			N   int
			Phi float64
		}{n, max(stats.QuantileLowPhi(n, 0.95), 0.01)})
	}
	return out
}

// m is metric with the rules' selector and matchers.
func (o Options) m(metric string, matchers ...string) string {
	all := append([]string{o.Selector}, matchers...)
	return metric + "{" + strings.Join(all, ",") + "}"
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

// by is every figure's grouping: a profile against an endpoint, from
// each place that probes it (--probe.location; one series where there
// is no location label), the replicas of a sharded daemon summed.
const by = "profile, endpoint, location"

// byLevel is the cliff's grouping: a sweep compares each load level with
// that level's own past, never its low stages with its high ones.
const byLevel = "profile, endpoint, location, load_level"

// loaded keeps a recorded series only while its profile is configured: a
// removed profile's info series goes at once, its counters' rates would
// linger for their windows.
func (o Options) loaded(expr string) string {
	return fmt.Sprintf(`(%s) and on (%s) %s`, expr, by, o.m("tokenprobe_profile_info"))
}

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
	if o.MinLocations < 2 {
		o.MinLocations = 2
	}
	rec := Group{Name: "tokenprobe.recording", Rules: o.recording()}
	slo, latency, probe := o.sloAlerts(), o.latencyAlerts(), append(o.probeAlerts(), o.reasonAlerts()...)
	quorum := o.quorumAlerts(slo, latency, probe)
	return RuleFile{Groups: []Group{rec, {Name: "tokenprobe.server", Rules: o.serverRecording()}, {Name: "tokenprobe.slo", Rules: slo},
		{Name: "tokenprobe.latency", Rules: latency}, {Name: "tokenprobe.probe", Rules: probe}, {Name: "tokenprobe.quorum", Rules: quorum}}}
}

// quorumOf are the alerts that gain a variant firing only when several
// locations see the condition: what a single probe's own network can
// fake. The per-location alerts stay, labelled scope="location"; their
// quorum variants are scope="quorum", to page on, the others to ticket
// on where several places probe.
var quorumOf = map[string]string{
	"TokenprobeTTFTCliff":         "TTFT cliff",
	"TokenprobeWrongAnswers":      "Wrong answers",
	"TokenprobeGoodputBudgetBurn": "Goodput error budget burning fast",
	"TokenprobeNoSuccessfulRun":   "No passing run for an hour",
}

// quorumAlerts marks every alert scope="location" and adds, for those of
// quorumOf, one that fires when at least MinLocations (2 or more)
// locations see its condition. Where fewer probe a profile (one daemon,
// with or without a location) only the per-location alert fires: one
// page per problem, not the same one twice.
func (o Options) quorumAlerts(groups ...[]Rule) []Rule {
	var out []Rule
	for _, g := range groups {
		for i := range g {
			r := &g[i]
			r.Labels["scope"] = "location"
			what, ok := quorumOf[r.Alert]
			if !ok {
				continue
			}
			locations := func(expr string) string {
				return fmt.Sprintf(`count by (profile, endpoint) (count by (%s) (%s))`, by, expr)
			}
			q := o.alert(r.Alert+"Quorum", r.Labels["severity"],
				fmt.Sprintf(`%s >= %d`, locations(r.Expr), o.MinLocations),
				what+" on {{ $labels.endpoint }} ({{ $labels.profile }}), seen from {{ $value }} locations",
				fmt.Sprintf("%s sees this from {{ $value }} locations at once (at least %d): not one probe's own network. ", r.Alert, o.MinLocations)+
					`{{ with printf `+strconv.Quote(atLocations(r.Expr))+` $labels.profile $labels.endpoint | query }}Seen at: {{ range $i, $s := sortByLabel "location" . }}{{ if $i }}, {{ end }}{{ label "location" $s }}{{ end }}.{{ end }}`)
			q.For, q.KeepFiringFor = r.For, r.KeepFiringFor
			q.Labels["scope"] = "quorum"
			out = append(out, q)
		}
	}
	return out
}

// atLocations is a printf format of the query naming the locations where
// expr holds for one profile and endpoint (its two %q): the quorum's own
// condition, read in the quorum's evaluation. The per-location alerts'
// ALERTS series were read before, and fire in the same evaluation as the
// quorum or later: its first notification named one location of two, or
// none.
func atLocations(expr string) string {
	return fmt.Sprintf(`count by (location) ((%s) and on (profile, endpoint) label_replace(label_replace(vector(1), "profile", %%q, "", ""), "endpoint", %%q, "", ""))`,
		strings.ReplaceAll(expr, "%", "%%"))
}

// serverRecording puts the servers' own series beside tokenprobe's, by
// endpoint and model: tokenprobe_profile_info names, for each endpoint,
// the instance Prometheus scrapes its server at (server_instance), and the
// server labels its series by model_name. Every mean is over the requests
// the server finished (its end-to-end histogram's count), whatever
// requests its queue histogram observed. vLLM's and SGLang's TTFT counts
// from the request's arrival, queue included: users' TTFT less it is the
// time outside the server, recorded only where the server's TTFT is not
// below its queue (a clock that starts at scheduling has no such part).
func (o Options) serverRecording() []Rule {
	short := o.window(5 * time.Minute)
	const key = "endpoint, model"
	// The endpoints of each server instance and model, as the server
	// labels them; several endpoints may share one server.
	endpoints := fmt.Sprintf(`label_replace(label_replace(max by (server_instance, model, endpoint) (%s), "instance", "$1", "server_instance", "(.+)"), "model_name", "$1", "model", "(.*)")`,
		o.m("tokenprobe_profile_info", `server_instance!=""`))
	joined := func(expr string) string {
		return fmt.Sprintf(`%s * on (instance, model_name) group_left %s`, endpoints, expr)
	}
	sum := func(agg, expr string) string {
		return fmt.Sprintf(`%s by (%s) (%s)`, agg, key, joined(fmt.Sprintf(`%s by (instance, model_name) (%s)`, agg, expr)))
	}
	rate := func(series string) string { return fmt.Sprintf(`rate(%s[%s])`, series, short) }
	mean := func(s catalog.Server, hist string) string {
		return sum("sum", rate(hist+"_sum")) + " / " + sum("sum", rate(s.E2E+"_count"))
	}
	anyServer := func(of func(s catalog.Server) string) string {
		parts := make([]string, len(catalog.Servers))
		for i, s := range catalog.Servers {
			parts[i] = fmt.Sprintf(`label_replace(%s, "server", %q, "", "")`, of(s), s.Server)
		}
		return strings.Join(parts, " or ")
	}
	x := "tokenprobe_time_to_first_token_seconds"
	users := fmt.Sprintf(`sum by (%[1]s) (histogram_sum(rate(%[2]s[%[3]s]))) / sum by (%[1]s) (histogram_count(rate(%[2]s[%[3]s]))) or sum by (%[1]s) (rate(%[4]s[%[3]s])) / sum by (%[1]s) (rate(%[5]s[%[3]s]))`,
		key, o.m(x), short, o.m(x+"_sum"), o.m(x+"_count"))
	return []Rule{
		{Record: "tokenprobe:ttft_seconds:mean5m", Expr: users},
		{Record: "tokenprobe:server_queue_seconds:mean5m", Expr: anyServer(func(s catalog.Server) string { return mean(s, s.Queue) })},
		{Record: "tokenprobe:server_ttft_seconds:mean5m", Expr: anyServer(func(s catalog.Server) string { return mean(s, s.TTFT) })},
		// On the server's clock, as the daemon's runs found it
		// (tokenprobe_server_ttft_clock_info): users' TTFT less the
		// server's where its TTFT holds its queue (arrival), less the
		// queue too where it starts at scheduling; absent where no run has
		// found it. A guess from the means alone (a TTFT below the queue
		// is a scheduling clock) put a queue shorter than the TTFT
		// outside the server: 151-174 ms where the truth was 6-22 ms.
		{Record: "tokenprobe:ttft_outside_server_seconds:mean5m", Expr: fmt.Sprintf(`(tokenprobe:ttft_seconds:mean5m - on (endpoint, model) group_right tokenprobe:server_ttft_seconds:mean5m) and on (endpoint) (%[1]s)`+
			` or (tokenprobe:ttft_seconds:mean5m - on (endpoint, model) group_right () (tokenprobe:server_ttft_seconds:mean5m + on (endpoint, model, server) tokenprobe:server_queue_seconds:mean5m)) and on (endpoint) (%[2]s)`,
			fmt.Sprintf(`max by (endpoint) (%s) == 1`, o.m("tokenprobe_server_ttft_clock_info", `clock="arrival"`)),
			fmt.Sprintf(`max by (endpoint) (%s) == 1`, o.m("tokenprobe_server_ttft_clock_info", `clock="scheduling"`)))},
		{Record: "tokenprobe:server_running_requests", Expr: anyServer(func(s catalog.Server) string { return sum("sum", s.Running) })},
		{Record: "tokenprobe:server_waiting_requests", Expr: anyServer(func(s catalog.Server) string { return sum("sum", s.Waiting) })},
		{Record: "tokenprobe:server_kv_cache_usage:ratio", Expr: anyServer(func(s catalog.Server) string {
			alts := make([]string, len(s.KVCache))
			for i, m := range s.KVCache {
				alts[i] = sum("avg", m)
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
				Expr: o.loaded(fmt.Sprintf(`1 - (sum by (%[1]s) (rate(%[3]s[%[2]s])) / sum by (%[1]s) (rate(%[4]s[%[2]s])))`,
					by, o.window(w), o.m("tokenprobe_good_requests_total"), o.m("tokenprobe_requests_total", `outcome!="cancelled"`))),
			},
				// The requests behind it, and the low end of its 95%
				// interval: the burn pages on a ratio that holds there.
				Rule{
					Record: "tokenprobe:requests:increase" + windowName(w),
					Expr:   o.loaded(fmt.Sprintf(`sum by (%s) (increase(%s[%s]))`, by, o.m("tokenprobe_requests_total", `outcome!="cancelled"`), o.window(w))),
				},
				Rule{
					Record: "tokenprobe:slo_errors:ratio_low" + windowName(w),
					Expr:   wilsonLow("tokenprobe:slo_errors:ratio_rate"+windowName(w), "tokenprobe:requests:increase"+windowName(w)),
				})
		}
	}
	short, hour := o.window(5*time.Minute), o.window(time.Hour)
	q := func(name, metric string, p float64, group string) Rule {
		return Rule{Record: name, Expr: o.loaded(catalog.Quantile(p, metric, group, o.Selector, short))}
	}
	// A level's quantile counts only over a full window: its series (made
	// at zero when the profile is loaded) has a sample a window ago. A
	// Prometheus that starts, or a level that appears, computes its first
	// rates over a few seconds, which can hold one short stage alone.
	full := func(p float64, metric string) string {
		return fmt.Sprintf(`((%s) >= 0) and on (%s) count by (%s) (%s offset %s)`,
			catalog.Quantile(p, metric, byLevel, o.Selector, short), byLevel, byLevel, o.m("tokenprobe_requests_total"), short)
	}
	// A baseline is the lower quartile of a level's full-window values
	// over the last hour, leaving out the last window, once there are
	// enough of them: a few early or odd windows neither set it nor latch
	// it (a minimum would), and a cliff must hold three quarters of the
	// hour before it becomes the level's normal.
	baseline := func(series string) string {
		return fmt.Sprintf(`quantile_over_time(0.25, %[1]s[%[2]s] offset %[3]s) and on (%[4]s) (count_over_time(%[1]s[%[2]s] offset %[3]s) >= %[5]d)`,
			series, hour, short, byLevel, o.BaselineSamples)
	}
	// The low end of a level's p95's 95% interval, from the requests its
	// window holds: the quantile at each bin's phi, for a window of at
	// least that bin's requests and fewer than the next's. Under
	// MinRequests there is none.
	ttft := "tokenprobe_time_to_first_token_seconds"
	bins := p95LowBins(o.MinRequests)
	var low []string
	for i, b := range bins {
		count := fmt.Sprintf(`tokenprobe:ttft_by_level:count5m >= %d`, b.N)
		if i+1 < len(bins) {
			count += fmt.Sprintf(` < %d`, bins[i+1].N)
		}
		low = append(low, fmt.Sprintf(`(%s) and on (%s) (%s)`, full(b.Phi, ttft), byLevel, count))
	}
	countByLevel := fmt.Sprintf(`sum by (%[1]s) (histogram_count(increase(%[2]s[%[3]s]))) or sum by (%[1]s) (increase(%[4]s[%[3]s]))`,
		byLevel, o.m(ttft), short, o.m(ttft+"_bucket", `le="+Inf"`))
	// The probe's own delay p99 at each location, the worst of its
	// daemons: what any of their timestamps could have had added.
	delay := fmt.Sprintf(`max by (location) (histogram_quantile(0.99, sum by (instance, location, le) (rate(tokenprobe_probe_scheduling_delay_seconds_bucket[%s]))))`, short)
	rules = append(rules,
		Rule{Record: "tokenprobe:requests:rate5m", Expr: o.loaded(fmt.Sprintf(`sum by (%s) (rate(%s[%s]))`, by, o.m("tokenprobe_requests_total", `outcome!="cancelled"`), short))},
		// Each reason's share of the requests: what routes a page (a
		// revoked key, a spent quota, a content filter).
		Rule{Record: "tokenprobe:request_errors_by_reason:ratio_rate5m", Expr: o.loaded(fmt.Sprintf(`sum by (%[1]s, reason) (rate(%[2]s[%[3]s])) / on (%[1]s) group_left () (sum by (%[1]s) (rate(%[4]s[%[3]s])) > 0)`,
			by, o.m("tokenprobe_request_errors_total"), short, o.m("tokenprobe_requests_total", `outcome!="cancelled"`)))},
		// What is left of a provider's rate limit, as its answers say.
		Rule{Record: "tokenprobe:rate_limit_remaining:ratio", Expr: fmt.Sprintf(`%s / (%s > 0)`, o.m("tokenprobe_rate_limit_remaining"), o.m("tokenprobe_rate_limit_limit"))},
		Rule{Record: "tokenprobe:goodput:rate5m", Expr: o.loaded(fmt.Sprintf(`sum by (%s) (rate(%s[%s]))`, by, o.m("tokenprobe_good_requests_total"), short))},
		Rule{Record: "tokenprobe:goodput:rate1h", Expr: o.loaded(fmt.Sprintf(`sum by (%s) (rate(%s[%s]))`, by, o.m("tokenprobe_good_requests_total"), hour))},
		Rule{Record: "tokenprobe:slo_attainment:ratio_rate5m", Expr: `1 - tokenprobe:slo_errors:ratio_rate5m`},
		// Answers that failed a check, over every request answered or
		// failed: a wrong answer is a failed request.
		Rule{Record: "tokenprobe:wrong_answers:ratio_rate5m", Expr: o.loaded(fmt.Sprintf(`sum by (%[1]s) (rate(%[2]s[%[4]s])) / sum by (%[1]s) (rate(%[3]s[%[4]s]))`,
			by, o.m("tokenprobe_requests_total", `outcome="wrong_answer"`), o.m("tokenprobe_requests_total", `outcome!="cancelled"`), short))},
		q("tokenprobe:ttft_p50:rate5m", "tokenprobe_time_to_first_token_seconds", 0.5, by),
		q("tokenprobe:ttft_p95:rate5m", "tokenprobe_time_to_first_token_seconds", 0.95, by),
		q("tokenprobe:ttft_p99:rate5m", "tokenprobe_time_to_first_token_seconds", 0.99, by),
		q("tokenprobe:itl_p50:rate5m", "tokenprobe_inter_token_latency_seconds", 0.5, by),
		q("tokenprobe:dispatch_lag_p99:rate5m", "tokenprobe_dispatch_lag_seconds", 0.99, by),
		Rule{Record: "tokenprobe:requests_by_level:rate5m", Expr: o.loaded(fmt.Sprintf(`sum by (%s) (rate(%s[%s]))`, byLevel, o.m("tokenprobe_requests_total", `outcome!="cancelled"`), short))},
		Rule{Record: "tokenprobe:ttft_p95_by_level:rate5m", Expr: o.loaded(full(0.95, ttft))},
		Rule{Record: "tokenprobe:itl_p50_by_level:rate5m", Expr: o.loaded(full(0.5, "tokenprobe_inter_token_latency_seconds"))},
		// The TTFTs each level's window holds: "p95 over N requests".
		Rule{Record: "tokenprobe:ttft_by_level:count5m", Expr: o.loaded(countByLevel)},
		Rule{Record: "tokenprobe:ttft_p95_by_level:low5m", Expr: o.loaded(strings.Join(low, " or "))},
		Rule{Record: "tokenprobe:probe_delay_p99:rate5m", Expr: delay},
		// A level's window counts towards its baseline only while the
		// probe's own delay p99 is under StarvedShare of its p95: a
		// starved probe's windows would lift the baseline the cliff is
		// measured against (and hide the next cliff).
		Rule{Record: "tokenprobe:ttft_p95_by_level:trusted5m", Expr: fmt.Sprintf(`tokenprobe:ttft_p95_by_level:rate5m unless on (%[1]s) (%[2]g * tokenprobe:ttft_p95_by_level:rate5m < on (location) group_left tokenprobe:probe_delay_p99:rate5m)`,
			byLevel, o.StarvedShare)},
		// From the trusted windows while there are enough of them; from
		// every window where there are not: a probe starved all the time
		// (a host always this busy) is compared with itself, its pages
		// still taking its delay off, rather than never armed.
		Rule{Record: "tokenprobe:ttft_p95_by_level:baseline1h", Expr: fmt.Sprintf(`(%s) or (%s)`, baseline("tokenprobe:ttft_p95_by_level:trusted5m"), baseline("tokenprobe:ttft_p95_by_level:rate5m"))},
		Rule{Record: "tokenprobe:itl_p50_by_level:baseline1h", Expr: baseline("tokenprobe:itl_p50_by_level:rate5m")},
		// How many full-window values each level's baseline stands on:
		// below BaselineSamples the cliff alert has not enough history yet.
		Rule{Record: "tokenprobe:ttft_p95_by_level:history_samples1h", Expr: fmt.Sprintf(`count_over_time(tokenprobe:ttft_p95_by_level:rate5m[%s] offset %s)`, hour, short)},
		Rule{Record: "tokenprobe:ttft:count5m", Expr: o.loaded(fmt.Sprintf(`sum by (%[1]s) (histogram_count(increase(%[2]s[%[3]s]))) or sum by (%[1]s) (increase(%[4]s[%[3]s]))`, by, o.m(ttft), short, o.m(ttft+"_bucket", `le="+Inf"`)))},
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
func (o Options) budget() string {
	return fmt.Sprintf(`(1 - max by (%s) (%s) > 0 < 1)`, by, o.m("tokenprobe_slo_objective_ratio"))
}

func (o Options) sloAlerts() []Rule {
	short := o.window(5 * time.Minute)
	// A burn pages on evidence: at least MinRequests in the long window,
	// and the low end of each window's error ratio's 95% interval
	// (tokenprobe:slo_errors:ratio_low*) at or past the burn rate times
	// the budget, so that a few failed requests of a handful do not page.
	// A burn rate times a large budget can pass 1, which no error ratio
	// reaches (14.4x of a 0.9 objective's 10%): a total outage then pages,
	// every request of both windows failing.
	burn := func(long, short time.Duration, rate float64) string {
		enough := fmt.Sprintf(`tokenprobe:requests:increase%s >= %d`, windowName(long), o.MinRequests)
		held := fmt.Sprintf(`tokenprobe:slo_errors:ratio_low%[1]s >= on (%[3]s) %[4]g * %[5]s and tokenprobe:slo_errors:ratio_low%[2]s >= on (%[3]s) %[4]g * %[5]s and on (%[3]s) %[6]s`,
			windowName(long), windowName(short), by, rate, o.budget(), enough)
		outage := fmt.Sprintf(`tokenprobe:slo_errors:ratio_rate%[1]s >= 1 and on (%[2]s) tokenprobe:slo_errors:ratio_rate%[3]s >= 1 and on (%[2]s) %[4]s and on (%[2]s) %[5]s`,
			windowName(long), by, windowName(short), enough, o.budget())
		return fmt.Sprintf(`(%s or %s)`, held, outage)
	}
	page := burn(burnWindows[0].long, burnWindows[0].short, burnWindows[0].burn) + " or " + burn(burnWindows[1].long, burnWindows[1].short, burnWindows[1].burn)
	// An endpoint that was failing (a cause page: a revoked key, a spent
	// quota, no server) within the slower page's short window burns its
	// budget because of that cause, which pages alone. Alertmanager's
	// inhibition holds the burn back only while the cause fires: after
	// the fix the burn, still high over its windows, paged on its own, a
	// page after the problem had ended.
	page = fmt.Sprintf(`(%s) unless on (%s) max by (%s) (max_over_time(tokenprobe_endpoint_failing[%s]) == 1)`, page, by, by, o.window(burnWindows[1].short))
	ticket := burn(burnWindows[2].long, burnWindows[2].short, burnWindows[2].burn) + " or " + burn(burnWindows[3].long, burnWindows[3].short, burnWindows[3].burn)
	goodDrop := o.alert("TokenprobeGoodputDrop", "ticket",
		fmt.Sprintf(`tokenprobe:goodput:rate1h < 0.5 * (tokenprobe:goodput:rate1h offset %s) and on (%s) sum by (%s) (increase(%s[%s])) > 50`,
			o.window(24*time.Hour), by, by, o.m("tokenprobe_requests_total", `outcome!="cancelled"`), o.window(time.Hour)),
		"Goodput of {{ $labels.profile }} on {{ $labels.endpoint }} halved against yesterday",
		"Good requests per second over the last hour are {{ $value | humanize }}, under half of the same hour yesterday, on at least 50 requests.")
	goodDrop.For = o.window(15 * time.Minute)
	goodZero := o.alert("TokenprobeGoodputZero", "page",
		fmt.Sprintf(`tokenprobe:goodput:rate5m == 0 and on (%[1]s) tokenprobe:requests:rate5m > %[2]g and on (%[1]s) tokenprobe:requests:increase5m >= %[3]d`, by, o.MinRate, o.MinRequests),
		"No request of {{ $labels.profile }} on {{ $labels.endpoint }} meets its SLOs",
		fmt.Sprintf("Requests are being sent and answered or failing, but none is good: every one misses a threshold or fails (none of at least %d in each 5-minute window).", o.MinRequests))
	goodZero.For = o.window(10 * time.Minute)
	wrong := o.alert("TokenprobeWrongAnswers", "page",
		fmt.Sprintf(`tokenprobe:wrong_answers:ratio_rate5m > %g and on (%s) tokenprobe:requests:rate5m > %g`, o.WrongAnswers, by, o.MinRate),
		"{{ $labels.profile }} on {{ $labels.endpoint }} answers wrongly",
		fmt.Sprintf("{{ $value | humanizePercentage }} of the answers failed a check over the last 5 minutes (over %g%%): the endpoint is up and fast, but wrong.", 100*o.WrongAnswers)+
			fmt.Sprintf(`{{ with printf "sum by (check) (rate(tokenprobe_answer_checks_total{profile=%%q,endpoint=%%q,location=%%q,result=\"fail\"}[%s])) > 0" $labels.profile $labels.endpoint (or $labels.location "") | query }} Failing checks: {{ range $i, $s := sortByLabel "check" . }}{{ if $i }}, {{ end }}{{ label "check" $s }}{{ end }}.{{ end }}`, short)+
			`{{ with printf "max by (served_model) (tokenprobe_run_last_served_model_info{profile=%q,endpoint=%q,location=%q})" $labels.profile $labels.endpoint (or $labels.location "") | query }} Models that answered the last run: {{ range $i, $s := sortByLabel "served_model" . }}{{ if $i }}, {{ end }}{{ label "served_model" $s }}{{ end }}.{{ end }}`)
	wrong.For = o.window(5 * time.Minute)
	return []Rule{wrong,
		o.alert("TokenprobeGoodputBudgetBurn", "page", page,
			"{{ $labels.profile }} on {{ $labels.endpoint }} burns its goodput error budget fast",
			fmt.Sprintf("Requests that are not good (failed, or missed an SLO threshold) run at 14.4x the budget over 1h and 5m, or 6x over 6h and 30m, at the low end of each window's 95%% interval, on at least %d requests (or every one of them failed): at this pace a 30-day budget lasts two days.", o.MinRequests)+burnFacts(burnWindows[0].short)),
		o.alert("TokenprobeGoodputBudgetBurnSlow", "ticket", ticket,
			"{{ $labels.profile }} on {{ $labels.endpoint }} burns its goodput error budget",
			"Requests that are not good run at 3x the budget over 1d and 2h, or 1x over 3d and 6h, at the low end of each window's 95% interval."+burnFacts(burnWindows[2].short)),
		goodDrop, goodZero,
	}
}

// burnFacts names the error ratio over the short window w, the low end
// of its interval and the requests behind it.
func burnFacts(w time.Duration) string {
	n := windowName(w)
	return `{{ $sel := printf "{profile=%q,endpoint=%q,location=%q}" $labels.profile $labels.endpoint (or $labels.location "") }}` +
		`{{ with printf "tokenprobe:slo_errors:ratio_rate` + n + `%s" $sel | query }}{{ with first . }} Over the last ` + n + ` {{ value . | humanizePercentage }} of the requests were not good{{ end }}{{ end }}` +
		`{{ with printf "tokenprobe:slo_errors:ratio_low` + n + `%s" $sel | query }}{{ with first . }}, at least {{ value . | humanizePercentage }} at the low end of its 95% interval{{ end }}{{ end }}` +
		`{{ with printf "tokenprobe:requests:increase` + n + `%s" $sel | query }}{{ with first . }}, of {{ value . | printf "%.0f" }} requests.{{ end }}{{ end }}`
}

// dominantPhase names, where the server's own metrics are read, the phase
// that held most of the last run's TTFT at the page's load level: the
// queue confirms the cliff's reading, elsewhere points away from the
// server. The run's whole once read "mostly waiting in the server's
// queue" on a page for level 2 of 4 slots, the staircase's top levels'
// cause. Without a breakdown of that level it adds nothing.
const dominantPhase = `{{ with printf "max by (phase) (tokenprobe_run_last_ttft_dominant_phase_by_level{profile=%q,endpoint=%q,location=%q,load_level=%q}) == 1" $labels.profile $labels.endpoint (or $labels.location "") $labels.load_level | query }}{{ with first . }}` +
	` The server's own metrics say where the last run's TTFT at this level went: mostly {{ if eq (label "phase" .) "queue" }}waiting in the server's queue{{ else if eq (label "phase" .) "prefill" }}in the server's prefill{{ else }}outside the server's queue and prefill (network, gateway, tokenization){{ end }}.{{ end }}{{ end }}`

// cliffFacts names, in the cliff's description, the baseline the alert
// compared with, the ratio, and the tokenprobe instances that measured it.
const cliffFacts = `{{ $sel := printf "{profile=%q,endpoint=%q,location=%q,load_level=%q}" $labels.profile $labels.endpoint (or $labels.location "") $labels.load_level }}` +
	`{{ with printf "tokenprobe:ttft_p95_by_level:rate5m%s" $sel | query }}{{ with first . }} Its p95 is {{ value . | humanizeDuration }}{{ end }}{{ end }}` +
	`{{ with printf "tokenprobe:ttft_by_level:count5m%s" $sel | query }}{{ with first . }} over {{ value . | printf "%.0f" }} requests{{ end }}{{ end }}.` +
	`{{ with printf "max(tokenprobe:probe_delay_p99:rate5m{location=%q})" (or $labels.location "") | query }}{{ with first . }} The probe's own delay p99 was {{ value . | humanizeDuration }}.{{ end }}{{ end }}` +
	`{{ with printf "tokenprobe:ttft_p95_by_level:baseline1h%s" $sel | query }}{{ with first . }} Its baseline at this level (the lower quartile of the last hour's 5-minute values) is {{ value . | humanizeDuration }}{{ end }}{{ end }}` +
	`{{ with printf "tokenprobe:ttft_p95_by_level:rate5m%s / tokenprobe:ttft_p95_by_level:baseline1h%s" $sel $sel | query }}{{ with first . }}, {{ value . | printf "%.1f" }}x over it{{ end }}{{ end }}.` +
	`{{ with printf "count by (instance) (tokenprobe_profile_info{profile=%q,endpoint=%q,location=%q})" $labels.profile $labels.endpoint (or $labels.location "") | query }} Measured by {{ range $i, $s := sortByLabel "instance" . }}{{ if $i }}, {{ end }}{{ label "instance" $s }}{{ end }}.{{ end }}`

func (o Options) latencyAlerts() []Rule {
	// The cliff's TTFT is the low end of the 95% interval of the level's
	// p95 over the window's requests (at least MinRequests), less the
	// probe's own delay p99 at its location (a stall of the probe's adds
	// to a TTFT as much at most): a few slow requests among dozens, or a
	// starved probe, cannot take it past the threshold; a queue, which
	// moves every request, does.
	conservative := `(tokenprobe:ttft_p95_by_level:low5m - on (location) group_left tokenprobe:probe_delay_p99:rate5m or tokenprobe:ttft_p95_by_level:low5m)`
	cliff := o.alert("TokenprobeTTFTCliff", "page",
		fmt.Sprintf(`%[5]s > %[1]g * tokenprobe:ttft_p95_by_level:baseline1h and on (%[2]s) tokenprobe:itl_p50_by_level:rate5m < %[3]g * tokenprobe:itl_p50_by_level:baseline1h and on (%[2]s) tokenprobe:requests_by_level:rate5m > %[4]g`,
			o.CliffTTFT, byLevel, o.CliffITL, o.MinRate, conservative),
		"TTFT cliff on {{ $labels.endpoint }} ({{ $labels.profile }}) at load level {{ $labels.load_level }}: requests are queueing",
		fmt.Sprintf("TTFT p95 at load level {{ $labels.load_level }} is at least {{ $value | humanizeDuration }} (the low end of its 95%% interval, less the probe's own delay), over %gx its baseline of the last hour at that level, while inter-token latency stays under %gx its own: the server is not slower, requests wait for a slot. Check load, batch size and replicas.", o.CliffTTFT, o.CliffITL)+cliffFacts+dominantPhase)
	cliff.For = o.window(2 * time.Minute)
	cliff.KeepFiringFor = o.window(10 * time.Minute)
	// The tail's p99 stands on at least five times MinRequests (a p99 of
	// fewer is little more than their slowest), less the probe's delay.
	tail := o.alert("TokenprobeTTFTTailDivergence", "ticket",
		fmt.Sprintf(`(tokenprobe:ttft_p99:rate5m - on (location) group_left tokenprobe:probe_delay_p99:rate5m or tokenprobe:ttft_p99:rate5m) > 10 * tokenprobe:ttft_p50:rate5m and on (%[1]s) tokenprobe:requests:rate5m > %[2]g and on (%[1]s) tokenprobe:ttft:count5m >= %[3]d`, by, o.MinRate, 5*o.MinRequests),
		"TTFT p99 of {{ $labels.profile }} on {{ $labels.endpoint }} is over 10x its median",
		"Most requests start fast but the slowest percent wait {{ $value | humanizeDuration }} (less the probe's own delay): head-of-line blocking behind long prompts, preemption, or one bad replica.")
	tail.For = o.window(15 * time.Minute)
	capacity := o.alert("TokenprobeCapacityRegression", "ticket",
		strings.ReplaceAll(fmt.Sprintf(`C < 0.5 * quantile_over_time(0.5, C[%s]) and C > 0 or C == 0 and quantile_over_time(0.5, C[%s]) > 0`,
			o.window(7*24*time.Hour), o.window(7*24*time.Hour)), "C", o.m("tokenprobe_run_last_capacity_at_slo")),
		"Capacity at SLO of {{ $labels.endpoint }} ({{ $labels.profile }}) fell below half its 7-day level",
		"The last sweep meets its SLO objective up to load level {{ $value }} only, under half the median of the last 7 days: a deploy, a config change or lost replicas cut capacity.")
	// A prefix-cache probe's run is broken only when the whole interval
	// of its warm requests' speed-up is under its bar and the probe was
	// not starved (stats.PrefixCache): the first such run fires. It stays
	// firing through runs that cannot tell, for an hour, and resolves at
	// the first run that finds the cache working: one alert per breakage,
	// not one per run. A ticket: users feel it in TTFT, which the SLO
	// pages watch; this one names the cause.
	verdict := func(v string) string {
		return o.m("tokenprobe_run_last_prefix_cache_verdict", `verdict="`+v+`"`)
	}
	cache := o.alert("TokenprobePrefixCacheBroken", "ticket",
		fmt.Sprintf(`max without (verdict) (max_over_time(%s[%s])) == 1 unless on (%s) max without (verdict) (%s) == 1`,
			verdict("broken"), o.window(time.Hour), by, verdict("working")),
		"The prefix cache of {{ $labels.endpoint }} ({{ $labels.profile }}) is not working",
		`Requests that repeat a long prefix at once are no faster than those with a new one: the warm request's speed-up over its cold and fresh neighbours is under the profile's bar with 95% confidence`+
			`{{ with printf "tokenprobe_run_last_prefix_cache_speedup_ratio{profile=%q,endpoint=%q,location=%q}" $labels.profile $labels.endpoint (or $labels.location "") | query }} (the last run: {{ . | first | value | printf "%.2f" }}x`+
			`{{ with printf "tokenprobe_run_last_prefix_cache_speedup_interval_ratio{profile=%q,endpoint=%q,location=%q,bound=\"high\"}" $labels.profile $labels.endpoint (or $labels.location "") | query }}, at most {{ . | first | value | printf "%.2f" }}x{{ end }}){{ end }}. `+
			"Every long shared prompt (system prompts, agent histories) pays its full prefill: a server flag (vLLM --enable-prefix-caching, llama.cpp cache_prompt), a router no longer sending a prompt to the replica that holds its prefix, or a restart. The run's report has cold, warm and fresh TTFT and the cached tokens the server reported.")
	// A model-identity probe's run calls the model changed only when the
	// whole interval of its prompts' agreement with the reference is
	// under its bar. It pages from the first such run, holds through runs
	// that cannot tell for an hour, and resolves when a run finds the
	// same model or the reference is being learned anew (someone accepted
	// the new model: DELETE /api/v1/model-identity).
	identity := func(v string) string {
		return o.m("tokenprobe_run_last_model_identity_verdict", `verdict=~"`+v+`"`)
	}
	changed := o.alert("TokenprobeModelChanged", "page",
		fmt.Sprintf(`max without (verdict) (max_over_time(%s[%s])) == 1 unless on (%s) max without (verdict) (%s) == 1`,
			identity("changed"), o.window(time.Hour), by, identity("same|learning")),
		"The model behind {{ $labels.endpoint }} ({{ $labels.profile }}) has changed",
		`Fixed prompts under greedy decoding are no longer answered as the reference learned from this endpoint's first runs answered them`+
			`{{ with printf "tokenprobe_run_last_model_identity_agreement_ratio{profile=%q,endpoint=%q,location=%q}" $labels.profile $labels.endpoint (or $labels.location "") | query }} (the last run: {{ . | first | value | humanizePercentage }} of them{{ end }}`+
			`{{ with printf "tokenprobe_run_last_model_identity_agreement_interval_ratio{profile=%q,endpoint=%q,location=%q,bound=\"high\"}" $labels.profile $labels.endpoint (or $labels.location "") | query }}, at most {{ . | first | value | humanizePercentage }}){{ end }}, while the model's name is the same: other weights, another quantization or chat template, or a gateway's fallback. `+
			`{{ with printf "tokenprobe_run_last_model_identity_moved_prompt_info{profile=%q,endpoint=%q,location=%q}" $labels.profile $labels.endpoint (or $labels.location "") | query }}The prompt whose answer moved most: "{{ . | first | label "prompt" }}". {{ end }}`+
			"The run's report quotes its answer and the reference's. A change the team accepts: DELETE /api/v1/model-identity?profile=...&endpoint=... learns the reference anew.")
	return []Rule{cliff, tail, capacity, cache, changed,
		o.alert("TokenprobeQueueingWithIdleGPUs", "info",
			`ALERTS{alertname="TokenprobeTTFTCliff",alertstate="firing"} and on () (avg(DCGM_FI_PROF_SM_ACTIVE) < 0.3)`,
			"TTFT cliff on {{ $labels.endpoint }} while the GPUs are mostly idle",
			"Requests queue but SM activity averages under 30%: the bottleneck is before the GPU (scheduler limits such as max_num_seqs, tokenization, a small KV cache), not compute. A cliff with SM activity near 100% needs more GPUs."),
	}
}

func (o Options) probeAlerts() []Rule {
	noSuccess := o.alert("TokenprobeNoSuccessfulRun", "ticket",
		fmt.Sprintf(`time() - %s > %g and on (%s) %s > 0`, o.m("tokenprobe_run_last_success_timestamp_seconds"), time.Duration(float64(o.NoSuccessFor)/o.Scale).Seconds(), by, o.m("tokenprobe_run_last_timestamp_seconds")),
		"{{ $labels.profile }} on {{ $labels.endpoint }} has not passed for {{ $value | humanizeDuration }}",
		"Runs happen but every one failed its objective or could not run (a run with not enough evidence either way is no failure). The last run's page on the status page has its report and log.")
	// absent() held for 10 minutes, not absent_over_time: a Prometheus
	// that has just started has no past to look over and would fire at
	// once; with for, it fires once it has itself gone 10 minutes without.
	noData := o.alert("TokenprobeNoData", "ticket", `absent(tokenprobe_build_info)`,
		"No tokenprobe metrics", "Prometheus has scraped no tokenprobe for 10 minutes: the probe is down or not scraped, and every other alert here is blind.")
	noData.For = o.window(10 * time.Minute)
	lag := o.alert("TokenprobeDispatchLagHigh", "ticket", fmt.Sprintf(`tokenprobe:dispatch_lag_p99:rate5m > %g`, o.DispatchLagP99.Seconds()),
		"tokenprobe sends {{ $labels.profile }} requests late",
		"Dispatch lag p99 is {{ $value | humanizeDuration }}: the probe cannot keep its own schedule (CPU, max_concurrency), so its latency figures understate what users would see.")
	lag.For = o.window(10 * time.Minute)
	// Against the smallest median TTFT the location's profiles had over
	// the last hour: a profile that runs now and then (every 2 minutes
	// for 15 s) is what the probe must time, between its runs too.
	starved := o.alert("TokenprobeProbeStarved", "ticket",
		fmt.Sprintf(`tokenprobe:probe_delay_p99:rate5m > on (location) %g * min by (location) (min_over_time(tokenprobe:ttft_p50:rate5m[%s])) and tokenprobe:probe_delay_p99:rate5m > 0.002`, o.StarvedShare, o.window(time.Hour)),
		"tokenprobe{{ with $labels.location }} at {{ . }}{{ end }} is starved of CPU",
		fmt.Sprintf("The probe's own timer wake-ups come {{ $value | humanizeDuration }} late at p99, over %g%% of the median TTFT of a profile it probes: any timestamp it takes can be as late, so it cannot vouch for its latency figures. Its latency pages discount the delay, its baselines leave those windows out, and its runs say so. Give it CPU (requests and limits, fewer profiles per instance, another host).", 100*o.StarvedShare))
	starved.For = o.window(10 * time.Minute)
	reload := o.alert("TokenprobeConfigReloadFailed", "ticket", `tokenprobe_config_last_reload_successful == 0`,
		"tokenprobe refused its configuration file",
		"The last reload failed; the previous configuration still runs. The status page and the log name the file, line and field.")
	reload.For = o.window(5 * time.Minute)
	artifacts := o.alert("TokenprobeArtifactsNotWritten", "ticket",
		fmt.Sprintf(`increase(tokenprobe_artifact_write_failures_total[%s]) > 0`, o.window(15*time.Minute)),
		"Runs of {{ $labels.profile }} on {{ $labels.endpoint }} lose their artifacts",
		"The daemon could not write a run's records, summary or report under --artifacts-dir (a full disk, a lost mount, permissions): the run's page says why. Probing goes on, but the runs cannot be looked into afterwards.")
	return []Rule{noSuccess, noData, lag, starved, reload, artifacts}
}

// reasonAlerts route failures by their reason (docs/MEASUREMENT.md,
// "Failure reasons"). A revoked key is an outage that looks like a 4xx:
// it pages at once, without a for, once most requests get it; so do a
// spent quota and an unreachable endpoint: every request fails, for every
// client of the key, the account or the path. Each is the page
// of its problem: it holds back the goodput, burn and latency pages of
// its profile and endpoint (Inhibitions). A content filter that keeps
// refusing opens a ticket: someone must change a prompt, not wake up. An
// overloaded provider needs no alert of its own: it fails requests, which
// burn the error budget like any failure.
func (o Options) reasonAlerts() []Rule {
	ratio := func(reason string) string {
		return fmt.Sprintf(`tokenprobe:request_errors_by_reason:ratio_rate5m{reason=%q}`, reason)
	}
	floor := fmt.Sprintf(` and on (%s) tokenprobe:requests:rate5m > %g`, by, o.MinRate)
	// A cause lasts through the daemon's backoff: after aborted runs it
	// sends nothing for up to an hour, the 5-minute windows empty, and a
	// page on them alone resolved and paged again every run (three times
	// in 40 minutes of a revoked key). The daemon exports the endpoint's
	// failing state until an answer comes (tokenprobe_endpoint_failing):
	// the page holds while it does, with the labels of the ratio's side,
	// so that Alertmanager sees one alert throughout.
	cause := func(reason, threshold string) string {
		return fmt.Sprintf(`(%s > %s%s) or max by (%s, reason) (tokenprobe_endpoint_failing{reason=%q} == 1)`, ratio(reason), threshold, floor, by, reason)
	}
	lasts := " While the daemon backs off after aborted runs and sends nothing, the page holds on its last run's failures (tokenprobe_endpoint_failing) until an answer comes."
	auth := o.alert("TokenprobeAuthFailing", "page", cause("auth", "0.5"),
		"{{ $labels.endpoint }} refuses tokenprobe's key ({{ $labels.profile }})",
		"{{ $value | humanizePercentage }} of the requests over the last 5 minutes were refused as unauthenticated or forbidden (401, 403, an authentication error): the key is missing, wrong, expired or revoked. Every client with the same key fails the same way."+lasts)
	quota := o.alert("TokenprobeQuotaExhausted", "page", cause("quota", "0.1"),
		"{{ $labels.endpoint }} says the account's quota is spent ({{ $labels.profile }})",
		"{{ $value | humanizePercentage }} of the requests over the last 5 minutes failed as quota or billing exhausted (insufficient_quota, billing_error, a spend limit): waiting does not help; the provider's limit must be raised or the bill paid. Every client on the account is refused the same way."+lasts)
	// No for on a cause: the fast burn-rate page has none, and a cause
	// that fired after it would page second, the burn already sent. The
	// 5-minute window, or a run aborted by the failure policy, is its
	// filter: a restart that refuses connections for seconds fails a few
	// requests in the window, not most.
	down := o.alert("TokenprobeEndpointUnreachable", "page", cause("connect", "0.5"),
		"{{ $labels.endpoint }} is unreachable from tokenprobe{{ with $labels.location }} at {{ . }}{{ end }} ({{ $labels.profile }})",
		"{{ $value | humanizePercentage }} of the requests over the last 5 minutes could not connect (refused, reset, no route, no such host): the server is down or the network to it is cut. Clients on the same path fail the same way."+lasts)
	filtered := o.alert("TokenprobeContentFiltered", "ticket", ratio("content_filter")+" > 0.05"+floor,
		"A content filter keeps refusing {{ $labels.profile }} on {{ $labels.endpoint }}",
		"{{ $value | humanizePercentage }} of the requests over the last 5 minutes were refused or cut by the provider's content policy, for 30 minutes: the filter changed, or the profile's prompts trip it.")
	filtered.For = o.window(30 * time.Minute)
	// A rate limit refills (a bucket, or a window a minute long): its
	// share left dips and recovers. The warning needs a dip under the
	// threshold in every 2-minute window for 3 minutes: the key runs at
	// its limit, and the 429s are near; one dip alone stays quiet. (A
	// window of one evaluation interval would hold one sample, or none
	// where the recording rule's latest is not yet seen, as in Prometheus
	// 3.)
	limit := o.alert("TokenprobeRateLimitNearlySpent", "ticket",
		fmt.Sprintf(`min_over_time(tokenprobe:rate_limit_remaining:ratio[%s]) < %g`, o.window(2*time.Minute), o.RateLimitShare),
		"{{ $labels.endpoint }} is near its {{ $labels.kind }} rate limit",
		fmt.Sprintf("The provider's answers say {{ $value | humanizePercentage }} of the key's %s limit is left, under %g%% for minutes: the key runs at its limit, and requests will be refused with 429 (rate_limit) next. Everyone's use of the key counts, the probe's too.", "{{ $labels.kind }}", 100*o.RateLimitShare))
	limit.For = o.window(3 * time.Minute)
	return []Rule{auth, quota, down, filtered, limit}
}
