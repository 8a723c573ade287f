// Package gen generates tokenprobe's Grafana dashboards with the
// grafana-foundation-sdk from the same metric catalog the exporter
// registers, into the JSON files package dashboards embeds. It is kept
// out of the binary: the SDK was 1.1 MB of its mapped code and tables
// (docs/BENCHMARKS.md, issue 48), for an output that takes no option.
// TestCheckedInDashboardsAreGenerated fails while a checked-in file
// differs from what this generates; `make dashboards` writes them anew.
package gen

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/tokenprobe/tokenprobe/internal/catalog"
	"github.com/tokenprobe/tokenprobe/internal/gpu"
)

var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// sel is the label selector every request query carries. The selectors
// name profile, which series pushed over OTLP into the same
// Prometheus never carry (theirs is tokenprobe_profile): a panel draws
// the scraped series alone, whatever its variables match.
const sel = `profile=~"$profile",profile!="",endpoint=~"$endpoint",model=~"$model",location=~"$location"`
const runSel = `profile=~"$profile",profile!="",endpoint=~"$endpoint",location=~"$location"`

func q(expr, legend string) cog.Builder[variants.Dataquery] {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(namesEveryLine(legend)).Range()
}

// namesEveryLine adds to a legend of tokenprobe's series the labels that
// tell its lines apart where it leaves them out: the endpoint beside the
// profile, and the location (empty where the daemons set none). Three
// locations drew three lines named "baseline answers load 1"
// (e2e TestE2EQuorumAcrossLocations holds every legend to it).
func namesEveryLine(legend string) string {
	if !strings.Contains(legend, "{{profile}}") && !strings.Contains(legend, "{{endpoint}}") {
		return legend
	}
	if !strings.Contains(legend, "{{endpoint}}") {
		legend = strings.Replace(legend, "{{profile}}", "{{profile}} {{endpoint}}", 1)
	}
	if !strings.Contains(legend, "{{location}}") {
		legend += " {{location}}"
	}
	return legend
}

func ts(title, desc, unit string, queries ...cog.Builder[variants.Dataquery]) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Height(8).Span(12)
	for _, t := range queries {
		p.WithTarget(t)
	}
	return p
}

func st(title, desc, unit string, query cog.Builder[variants.Dataquery]) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Datasource(ds).Height(4).Span(6).WithTarget(query)
}

// percentiles reads a histogram's p50, p95 and p99 by labels, under any
// scrape setting (catalog.Quantile: native where kept, else classic).
func percentiles(metric, by string) []cog.Builder[variants.Dataquery] {
	labels := strings.TrimPrefix(by, ", ")
	var out []cog.Builder[variants.Dataquery]
	for _, p := range []float64{0.5, 0.95, 0.99} {
		query := prometheus.NewDataqueryBuilder().Expr(catalog.Quantile(p, metric, labels, sel, "$__rate_interval")).
			LegendFormat(fmt.Sprintf("p%g {{%s}}", p*100, labels)).Range()
		if p == 0.95 {
			// The histogram's exemplars (trace_id, span_id, request_id)
			// drawn once, as points: Grafana links each to its trace in
			// the data source that the Prometheus data source names for
			// trace_id (docs/CONFIGURATION.md#tracing).
			query = query.Exemplar(true)
		}
		out = append(out, query)
	}
	return out
}

// quantileBy reads one quantile of a histogram by a label, under any
// scrape setting.
func quantileBy(p, metric, label, legend string) []cog.Builder[variants.Dataquery] {
	v, _ := strconv.ParseFloat(p, 64)
	return []cog.Builder[variants.Dataquery]{q(catalog.Quantile(v, metric, label, sel, "$__rate_interval"), legend)}
}

// heat is a heatmap of a histogram over time: its classic buckets where
// Prometheus keeps them, else its native form (the native part answers
// only when no classic bucket does, so the two never mix).
func heat(title, desc, metric string) *heatmap.PanelBuilder {
	classic := fmt.Sprintf(`sum by (le) (rate(%s_bucket{%s}[$__rate_interval]))`, metric, sel)
	native := fmt.Sprintf(`sum(rate(%s{%s}[$__rate_interval]))`, metric, sel)
	return heatmap.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).Height(8).Span(12).
		WithTarget(prometheus.NewDataqueryBuilder().
			Expr(classic + " or (" + native + " unless on () " + classic + ")").
			Format(prometheus.PromQueryFormatHeatmap).LegendFormat("{{le}}").Range())
}

func variables(b *dashboard.DashboardBuilder) {
	b.WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus"))
	// The trace backend that the exemplars' trace_id opens (Jaeger, or
	// Tempo): the Prometheus data source's exemplar link names it.
	b.WithVariable(dashboard.NewDatasourceVariableBuilder("traces").Label("Traces").Type("jaeger"))
	// location is --probe.location's label: one value, or none, where a
	// single place probes (".*" matches a series without it too).
	for _, name := range []string{"profile", "endpoint", "model", "location"} {
		b.WithVariable(dashboard.NewQueryVariableBuilder(name).Label(name).Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr(fmt.Sprintf("label_values(tokenprobe_requests_total, %s)", name))}).
			Multi(true).IncludeAll(true).AllValue(".*").Refresh(dashboard.VariableRefreshOnTimeRangeChanged))
	}
}

// serverVariable picks whose own series the server panels read (vLLM,
// SGLang): the names the server recording rules put under one label.
func serverVariable(b *dashboard.DashboardBuilder) {
	names := catalog.ServerNames()
	var options []dashboard.VariableOption
	for i, n := range names {
		options = append(options, dashboard.VariableOption{Selected: cog.ToPtr(i == 0),
			Text: dashboard.StringOrArrayOfString{String: cog.ToPtr(n)}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(n)}})
	}
	b.WithVariable(dashboard.NewCustomVariableBuilder("server").Label("server").
		Description("The inference server whose own metrics the server panels read (Prometheus must scrape it).").
		Values(dashboard.StringOrMap{String: cog.ToPtr(strings.Join(names, ","))}).Options(options).Current(options[0]))
}

// serverSel selects the server recording rules' series.
const serverSel = `server="$server",endpoint=~"$endpoint",model=~"$model"`

// serverPanels put the server's own view beside the user's: its TTFT and
// queue over tokenprobe's TTFT (the gap is the queue the server's TTFT
// does not show), its running and waiting requests and KV cache, and where
// the last run's TTFT went.
func serverPanels(b *dashboard.DashboardBuilder) {
	b.WithPanel(ts("TTFT: the user's and the server's ($server)", "Mean TTFT as tokenprobe measures it (tokenprobe:ttft_seconds:mean5m) over the server's own TTFT (tokenprobe:server_ttft_seconds:mean5m) and queue time (tokenprobe:server_queue_seconds:mean5m), by endpoint and model, each over the requests the server finished. vLLM's and SGLang's TTFT counts from the request's arrival, queue included: the gap to the user's (tokenprobe:ttft_outside_server_seconds:mean5m) is time outside the server, in the network and gateways and their queues. A server whose TTFT starts at scheduling (below its queue time) has no outside line.", "s",
		q(`tokenprobe:ttft_seconds:mean5m{endpoint=~"$endpoint",model=~"$model"}`, "user TTFT {{endpoint}}"),
		q(fmt.Sprintf(`tokenprobe:server_ttft_seconds:mean5m{%s}`, serverSel), "server TTFT {{endpoint}}"),
		q(fmt.Sprintf(`tokenprobe:server_queue_seconds:mean5m{%s}`, serverSel), "server queue {{endpoint}}"),
		q(fmt.Sprintf(`tokenprobe:ttft_outside_server_seconds:mean5m{%s}`, serverSel), "outside the server {{endpoint}}")))
	b.WithPanel(ts("Server running and waiting requests ($server)", "The server's own running and waiting requests by endpoint (tokenprobe:server_running_requests, tokenprobe:server_waiting_requests), beside tokenprobe's in flight: waiting above 0 where TTFT leaves its floor is the knee.", "short",
		q(fmt.Sprintf(`tokenprobe:server_running_requests{%s}`, serverSel), "running {{endpoint}}"),
		q(fmt.Sprintf(`tokenprobe:server_waiting_requests{%s}`, serverSel), "waiting {{endpoint}}"),
		q(fmt.Sprintf(`sum(tokenprobe_in_flight_requests{%s})`, runSel), "tokenprobe in flight")))
	b.WithPanel(ts("Server KV cache usage ($server)", "The server's KV cache in use by endpoint (tokenprobe:server_kv_cache_usage:ratio): near 1, requests wait for memory, not for a slot.", "percentunit",
		q(fmt.Sprintf(`tokenprobe:server_kv_cache_usage:ratio{%s}`, serverSel), "{{endpoint}}")))
	b.WithPanel(ts("Where the last run's TTFT went", "The last run's mean TTFT split with the server's own histograms (tokenprobe_run_last_ttft_breakdown_seconds{stat=\"mean\"}): waiting in the server's queue, in its prefill, and elsewhere (network, gateway, tokenization, the client). Runs of endpoints with server_metrics only.", "s",
		q(fmt.Sprintf(`max by (profile, phase) (tokenprobe_run_last_ttft_breakdown_seconds{%s,stat="mean"})`, runSel), "{{profile}} {{phase}}")))
}

func base(uid, title, desc string) *dashboard.DashboardBuilder {
	b := dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).Tags([]string{"tokenprobe", "llm"}).
		Refresh("30s").Time("now-6h", "now")
	variables(b)
	return b
}

// Dashboards returns every dashboard by file name.
func Dashboards() (map[string]dashboard.Dashboard, error) {
	builders := map[string]*dashboard.DashboardBuilder{
		"tokenprobe-slo.json":    slo(),
		"tokenprobe-cliff.json":  cliff(),
		"tokenprobe-gpu.json":    gpuDashboard(),
		"tokenprobe-health.json": health(),
	}
	out := map[string]dashboard.Dashboard{}
	for name, b := range builders {
		d, err := b.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// The SDK gives every variable the fields of an interval variable
		// (auto, auto_count, auto_min); Grafana's published schema knows
		// them only there, and they mean nothing on query variables.
		for i := range d.Templating.List {
			v := &d.Templating.List[i]
			if v.Type != dashboard.VariableTypeInterval {
				v.Auto, v.AutoMin, v.AutoCount = nil, nil, nil
			}
		}
		out[name] = d
	}
	return out, nil
}

// Marshal renders a dashboard as indented JSON.
func Marshal(d dashboard.Dashboard) ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	return append(b, '\n'), err
}

// Files returns every dashboard's JSON by file name.
func Files() (map[string][]byte, error) {
	ds, err := Dashboards()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for name, d := range ds {
		b, err := Marshal(d)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

func slo() *dashboard.DashboardBuilder {
	good := fmt.Sprintf(`sum by (profile, endpoint) (rate(tokenprobe_good_requests_total{%s}[$__rate_interval]))`, sel)
	counted := fmt.Sprintf(`sum by (profile, endpoint) (rate(tokenprobe_requests_total{%s,outcome!="cancelled"}[$__rate_interval]))`, sel)
	b := base("tokenprobe-slo", "tokenprobe / SLO overview", "Goodput against throughput, SLO attainment and error budget, errors, and latency percentiles.")
	b.WithPanel(ts("Goodput vs throughput", "Good requests per second (tokenprobe_good_requests_total) against successful requests per second (tokenprobe_requests_total{outcome=\"success\"}). A gap is requests that succeed but miss an SLO.", "reqps",
		q(good, "goodput {{profile}} {{endpoint}}"),
		q(fmt.Sprintf(`sum by (profile, endpoint) (rate(tokenprobe_requests_total{%s,outcome="success"}[$__rate_interval]))`, sel), "throughput {{profile}} {{endpoint}}")))
	b.WithPanel(ts("SLO attainment", "Good requests over every request but the cancelled (tokenprobe_good_requests_total / tokenprobe_requests_total): success, error and wrong_answer.", "percentunit",
		q(good+" / "+counted, "{{profile}} {{endpoint}}")))
	b.WithPanel(ts("Attainment per SLO", "Requests meeting each threshold over every request but the cancelled (tokenprobe_slo_requests_total{result=\"met\"} / all results).", "percentunit",
		q(fmt.Sprintf(`sum by (profile, slo) (rate(tokenprobe_slo_requests_total{%s,result="met"}[$__rate_interval])) / sum by (profile, slo) (rate(tokenprobe_slo_requests_total{%s}[$__rate_interval]))`, sel, sel), "{{profile}} {{slo}}")))
	b.WithPanel(ts("Error budget burn rate", "How fast requests that are not good spend the budget of the profile's objective (tokenprobe:slo_errors:ratio_rate1h / (1 - tokenprobe_slo_objective_ratio)); 1 spends it in exactly the SLO window, 14.4 pages.", "x",
		q(fmt.Sprintf(`tokenprobe:slo_errors:ratio_rate1h{%s} / on (profile, endpoint, location) (1 - max by (profile, endpoint, location) (tokenprobe_slo_objective_ratio{%s}))`, runSel, runSel), "1h {{profile}}"),
		q(fmt.Sprintf(`tokenprobe:slo_errors:ratio_rate6h{%s} / on (profile, endpoint, location) (1 - max by (profile, endpoint, location) (tokenprobe_slo_objective_ratio{%s}))`, runSel, runSel), "6h {{profile}}")))
	b.WithPanel(ts("Errors by reason", "Failed requests per second by reason (tokenprobe_request_errors_total).", "reqps",
		q(fmt.Sprintf(`sum by (reason) (rate(tokenprobe_request_errors_total{%s}[$__rate_interval])) > 0`, sel), "{{reason}}")))
	b.WithPanel(ts("Rate limit left", "What the provider's answers say remains of the key's rate limit, by kind (tokenprobe_rate_limit_remaining / tokenprobe_rate_limit_limit): under 10% for minutes, 429s (rate_limit) follow; TokenprobeRateLimitNearlySpent opens a ticket. Empty for servers that send no rate-limit headers.", "percentunit",
		q(fmt.Sprintf(`max by (endpoint, kind) (tokenprobe_rate_limit_remaining{%s} / (tokenprobe_rate_limit_limit{%s} > 0))`, runSel, runSel), "{{endpoint}} {{kind}}")))
	b.WithPanel(ts("Wrong answers by check", "Answers per second that failed each answer check (tokenprobe_answer_checks_total{result=\"fail\"}): the wrong model, a finish reason, a length, the text, JSON. Each is a wrong_answer request: answered as fast as ever, but wrong.", "reqps",
		q(fmt.Sprintf(`sum by (profile, check) (rate(tokenprobe_answer_checks_total{%s,result="fail"}[$__rate_interval]))`, sel), "{{profile}} {{check}}")))
	b.WithPanel(ts("TTFT", "Time to first token percentiles (tokenprobe_time_to_first_token_seconds), from native histograms where Prometheus keeps them, else from the classic buckets.", "s", percentiles("tokenprobe_time_to_first_token_seconds", ", profile")...))
	b.WithPanel(ts("TTST", "Time to second token percentiles (tokenprobe_time_to_second_token_seconds).", "s", percentiles("tokenprobe_time_to_second_token_seconds", ", profile")...))
	b.WithPanel(ts("ITL", "Per-request inter-token latency percentiles (tokenprobe_inter_token_latency_seconds).", "s", percentiles("tokenprobe_inter_token_latency_seconds", ", profile")...))
	b.WithPanel(ts("Request latency", "End-to-end latency percentiles (tokenprobe_request_duration_seconds).", "s", percentiles("tokenprobe_request_duration_seconds", ", profile")...))
	b.WithPanel(heat("TTFT heatmap", "TTFT distribution over time (tokenprobe_time_to_first_token_seconds): classic buckets where Prometheus keeps them, else the native histogram.", "tokenprobe_time_to_first_token_seconds"))
	b.WithPanel(heat("ITL heatmap", "Per-request inter-token latency over time (tokenprobe_inter_token_latency_seconds): classic buckets where kept, else the native histogram.", "tokenprobe_inter_token_latency_seconds"))
	b.WithPanel(ts("Error budget spent over 3 days", "Share of the error budget of the profile's objective used over the last 3 days (tokenprobe:slo_errors:ratio_rate3d / (1 - tokenprobe_slo_objective_ratio)); above 0.1 a 30-day budget runs out early.", "percentunit",
		q(fmt.Sprintf(`tokenprobe:slo_errors:ratio_rate3d{%s} / on (profile, endpoint, location) (1 - max by (profile, endpoint, location) (tokenprobe_slo_objective_ratio{%s})) * 3 / 30`, runSel, runSel), "{{profile}} {{endpoint}}")))
	byLocation(b)
	serverVariable(b)
	serverPanels(b)
	return b
}

// byLocation sets the places that probe (--probe.location) side by side:
// one whose numbers differ from the others' is seeing its own network.
func byLocation(b *dashboard.DashboardBuilder) {
	b.WithPanel(ts("TTFT p95 by location", "TTFT p95 of each location that probes the endpoint (tokenprobe_time_to_first_token_seconds by location): a cliff everywhere is the server, in one place its path.", "s",
		q(catalog.Quantile(0.95, "tokenprobe_time_to_first_token_seconds", "location, endpoint", sel, "$__rate_interval"), "{{location}} {{endpoint}}")))
	b.WithPanel(ts("Goodput by location", "Good requests per second from each location (tokenprobe_good_requests_total by location).", "reqps",
		q(fmt.Sprintf(`sum by (location, endpoint) (rate(tokenprobe_good_requests_total{%s}[$__rate_interval]))`, sel), "{{location}} {{endpoint}}")))
	b.WithPanel(table.NewPanelBuilder().Title("Latest state by location").
		Description("Each location's last run of each profile and endpoint: passed (tokenprobe_run_last_passed), its SLO attainment and goodput, and how long ago it ended.").
		Datasource(ds).Height(8).Span(24).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf(`max by (location, endpoint, profile) (tokenprobe_run_last_passed{%s})`, runSel)).Format(prometheus.PromQueryFormatTable).Instant().RefId("passed")).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf(`max by (location, endpoint, profile) (tokenprobe_run_last_slo_attainment_ratio{%s})`, runSel)).Format(prometheus.PromQueryFormatTable).Instant().RefId("attainment")).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf(`max by (location, endpoint, profile) (tokenprobe_run_last_goodput_requests_per_second{%s})`, runSel)).Format(prometheus.PromQueryFormatTable).Instant().RefId("goodput")).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(fmt.Sprintf(`time() - max by (location, endpoint, profile) (tokenprobe_run_last_timestamp_seconds{%s})`, runSel)).Format(prometheus.PromQueryFormatTable).Instant().RefId("age")).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge"}))
}

func cliff() *dashboard.DashboardBuilder {
	b := base("tokenprobe-cliff", "tokenprobe / TTFT cliff", "TTFT against load: where requests start to queue while tokens keep flowing.")
	b.WithPanel(ts("TTFT p95 by load level", "TTFT p95 per load_level (tokenprobe_time_to_first_token_seconds): a cliff is a level where it leaves the floor.", "s",
		quantileBy("0.95", "tokenprobe_time_to_first_token_seconds", "load_level", "load {{load_level}}")...))
	b.WithPanel(ts("ITL p50 by load level", "ITL p50 per load_level (tokenprobe_inter_token_latency_seconds): flat through a cliff means a queue, not a slower model.", "s",
		quantileBy("0.5", "tokenprobe_inter_token_latency_seconds", "load_level", "load {{load_level}}")...))
	b.WithPanel(ts("TTFT / ITL", "TTFT p95 over ITL p50 (tokenprobe:ttft_p95:rate5m / tokenprobe:itl_p50:rate5m): rises in a cliff, stays put when the model slows.", "x",
		q(fmt.Sprintf(`tokenprobe:ttft_p95:rate5m{%s} / tokenprobe:itl_p50:rate5m{%s}`, runSel, runSel), "{{profile}} {{endpoint}}")))
	b.WithPanel(ts("In flight and TTFT", "Requests in flight (tokenprobe_in_flight_requests) and the load asked for (tokenprobe_target_concurrency), with TTFT p95 (tokenprobe:ttft_p95:rate5m, in ms) to read against them.", "short",
		q(fmt.Sprintf(`tokenprobe_in_flight_requests{%s}`, runSel), "in flight {{profile}}"),
		q(fmt.Sprintf(`tokenprobe_target_concurrency{%s}`, runSel), "target {{profile}}"),
		q(fmt.Sprintf(`tokenprobe:ttft_p95:rate5m{%s} * 1000`, runSel), "TTFT p95 ms {{profile}}")))
	b.WithPanel(ts("Capacity at SLO and cliff level", "From sweeps: the highest load level meeting the objective (tokenprobe_run_last_capacity_at_slo) and where TTFT broke (tokenprobe_run_last_ttft_cliff_level).", "short",
		q(fmt.Sprintf(`tokenprobe_run_last_capacity_at_slo{%s}`, runSel), "capacity {{profile}}"),
		q(fmt.Sprintf(`tokenprobe_run_last_ttft_cliff_level{%s}`, runSel), "cliff {{profile}}")))
	// The cliff alert compares each level with its own baseline, which
	// arms only after enough samples: these say what it compares with and
	// how soon a fresh Prometheus, or a new level, can page.
	b.WithPanel(ts("Cliff baseline by load level", "The TTFT p95 each load level is compared with (tokenprobe:ttft_p95_by_level:baseline1h, the lower quartile of the last hour's 5-minute values, leaving out the last 5 minutes): the cliff alert pages at 4x it. Empty for a level still without enough samples.", "s",
		q(fmt.Sprintf(`tokenprobe:ttft_p95_by_level:baseline1h{%s}`, runSel), "baseline {{profile}} load {{load_level}}")))
	b.WithPanel(ts("Baseline samples by load level", fmt.Sprintf("How many 5-minute TTFT p95 values the baseline has at each load level (tokenprobe:ttft_p95_by_level:history_samples1h, over the hour before the last 5 minutes). The cliff alert arms at %d: a fresh Prometheus is silent about cliffs for the first 10 minutes plus %d rule evaluations (docs/RUNBOOK.md).", catalog.BaselineSamples, catalog.BaselineSamples), "short",
		q(fmt.Sprintf(`tokenprobe:ttft_p95_by_level:history_samples1h{%s}`, runSel), "samples {{profile}} load {{load_level}}")))
	b.WithPanel(ts("Dispatch lag p99", "How late the probe sent requests (tokenprobe_dispatch_lag_seconds): the probe's own queue, which must stay small for the rest to mean anything.", "s",
		quantileBy("0.99", "tokenprobe_dispatch_lag_seconds", "profile", "{{profile}}")...))
	// What the cliff page stands on: the low end of each level's p95 and
	// the requests behind it, and the probe's own delay it is read less.
	b.WithPanel(ts("Cliff evidence by load level", "The TTFT p95 the cliff alert reads at each load level: the low end of its 95% interval over the window's requests (tokenprobe:ttft_p95_by_level:low5m; none under 20 requests), beside the p95 itself (tokenprobe:ttft_p95_by_level:rate5m). A few slow requests among dozens lift the p95, not its low end.", "s",
		q(fmt.Sprintf(`tokenprobe:ttft_p95_by_level:low5m{%s}`, runSel), "low end {{profile}} load {{load_level}}"),
		q(fmt.Sprintf(`tokenprobe:ttft_p95_by_level:rate5m{%s}`, runSel), "p95 {{profile}} load {{load_level}}")))
	b.WithPanel(ts("Requests behind each level's p95", "The TTFTs in each load level's 5-minute window (tokenprobe:ttft_by_level:count5m): the cliff alert needs 20.", "short",
		q(fmt.Sprintf(`tokenprobe:ttft_by_level:count5m{%s}`, runSel), "{{profile}} load {{load_level}}")))
	b.WithPanel(ts("The probe's own delay p99", "How late the probe's own timer wake-ups came, at p99, by location (tokenprobe:probe_delay_p99:rate5m, from tokenprobe_probe_scheduling_delay_seconds): any timestamp it took could be as late. Over a tenth of a profile's median TTFT the probe is starved: TokenprobeProbeStarved opens a ticket, the latency pages discount it and the baselines leave those windows out.", "s",
		q(`tokenprobe:probe_delay_p99:rate5m`, "{{location}}")))
	b.WithPanel(ts("Server load by load level (last run)", "The server's own running and waiting requests and KV cache usage at each load level of the last run (tokenprobe_run_last_server_requests, tokenprobe_run_last_server_kv_cache_usage_ratio; endpoints with server_metrics): waiting leaves 0 at the level where TTFT leaves its floor.", "short",
		q(fmt.Sprintf(`max by (load_level, state) (tokenprobe_run_last_server_requests{%s})`, runSel), "{{state}} at load {{load_level}}"),
		q(fmt.Sprintf(`max by (load_level) (tokenprobe_run_last_server_kv_cache_usage_ratio{%s}) * 100`, runSel), "KV cache % at load {{load_level}}")))
	b.WithPanel(ts("Prefix cache speed-up (last run)", "For prefix_cache profiles: how many times faster than uncached the warm request of each triple was in the last run (tokenprobe_run_last_prefix_cache_speedup_ratio), with its 95% interval (tokenprobe_run_last_prefix_cache_speedup_interval_ratio). Near 1 the cache does nothing: TokenprobePrefixCacheBroken opens a ticket once the whole interval is under the profile's min_speedup.", "x",
		q(fmt.Sprintf(`tokenprobe_run_last_prefix_cache_speedup_ratio{%s}`, runSel), "speed-up {{profile}}"),
		q(fmt.Sprintf(`tokenprobe_run_last_prefix_cache_speedup_interval_ratio{%s}`, runSel), "{{bound}} {{profile}}")))
	b.WithPanel(ts("Model identity: prompts answered as the reference (last run)", "For model_identity profiles: the share of fixed prompts the last run answered, under greedy decoding, as the reference learned from the endpoint's first runs answered them (tokenprobe_run_last_model_identity_agreement_ratio), with its 95% interval (tokenprobe_run_last_model_identity_agreement_interval_ratio). The same model answers them all alike; TokenprobeModelChanged pages once the whole interval is under the profile's min_agreement.", "percentunit",
		q(fmt.Sprintf(`tokenprobe_run_last_model_identity_agreement_ratio{%s}`, runSel), "agreement {{profile}}"),
		q(fmt.Sprintf(`tokenprobe_run_last_model_identity_agreement_interval_ratio{%s}`, runSel), "{{bound}} {{profile}}")))
	serverVariable(b)
	serverPanels(b)
	return b
}

func gpuDashboard() *dashboard.DashboardBuilder {
	b := base("tokenprobe-gpu", "tokenprobe / GPU", "DCGM GPU series (from tokenprobe, through DCGM or NVML, or from dcgm-exporter) aligned with TTFT and goodput.")
	g := func(title, metric, unit string) *timeseries.PanelBuilder {
		desc := fmt.Sprintf("%s per GPU (DCGM series %s, dcgm-exporter names).", title, metric)
		if !gpu.NVMLFields[metric] {
			desc += " A DCGM profiling field: empty with gpu.source nvml, which cannot read it."
		}
		return ts(title, desc, unit, q(metric, "{{Hostname}} GPU {{gpu}}"))
	}
	b.WithPanel(ts("TTFT p95 and goodput", "TTFT p95 (tokenprobe:ttft_p95:rate5m) and goodput (tokenprobe:goodput:rate5m) of the selected profiles, to read against the GPUs below.", "s",
		q(fmt.Sprintf(`tokenprobe:ttft_p95:rate5m{%s}`, runSel), "TTFT p95 {{profile}}"),
		q(fmt.Sprintf(`tokenprobe:goodput:rate5m{%s}`, runSel), "goodput {{profile}}")))
	b.WithPanel(g("SM active", "DCGM_FI_PROF_SM_ACTIVE", "percentunit"))
	b.WithPanel(g("Tensor pipe active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "percentunit"))
	b.WithPanel(g("DRAM active", "DCGM_FI_PROF_DRAM_ACTIVE", "percentunit"))
	b.WithPanel(g("GPU utilisation", "DCGM_FI_DEV_GPU_UTIL", "percent"))
	b.WithPanel(g("Power draw", "DCGM_FI_DEV_POWER_USAGE", "watt"))
	b.WithPanel(g("SM clock", "DCGM_FI_DEV_SM_CLOCK", "rotmhz"))
	b.WithPanel(g("Framebuffer used", "DCGM_FI_DEV_FB_USED", "decmbytes"))
	b.WithPanel(ts("Throttling", "Share of time throttled for power and heat (rate of DCGM_FI_DEV_POWER_VIOLATION and DCGM_FI_DEV_THERMAL_VIOLATION, in us per s).", "percentunit",
		q(`rate(DCGM_FI_DEV_POWER_VIOLATION[$__rate_interval]) / 1e6`, "power {{Hostname}} GPU {{gpu}}"),
		q(`rate(DCGM_FI_DEV_THERMAL_VIOLATION[$__rate_interval]) / 1e6`, "thermal {{Hostname}} GPU {{gpu}}")))
	b.WithPanel(g("Last XID error", "DCGM_FI_DEV_XID_ERRORS", "none"))
	return b
}

func health() *dashboard.DashboardBuilder {
	b := base("tokenprobe-health", "tokenprobe / probe health", "Schedules, runs, skipped ticks, reloads and the probe's own lateness.")
	b.WithPanel(st("Config reload", "1 when the last configuration reload succeeded (tokenprobe_config_last_reload_successful).", "bool",
		q(`min(tokenprobe_config_last_reload_successful)`, "reload ok")))
	b.WithPanel(st("Oldest last success", "Seconds since the least recent passing run (tokenprobe_run_last_success_timestamp_seconds).", "s",
		q(fmt.Sprintf(`time() - min(tokenprobe_run_last_success_timestamp_seconds{%s})`, runSel), "age")))
	b.WithPanel(st("GPU source up", "Whether the GPU source reads (tokenprobe_gpu_source_up).", "bool", q(`min(tokenprobe_gpu_source_up)`, "gpu")))
	b.WithPanel(st("Dropped observations", "Results a sink could not take (tokenprobe_observations_dropped_total).", "short",
		q(`sum(increase(tokenprobe_observations_dropped_total[$__range]))`, "dropped")))
	b.WithPanel(ts("Runs by result", "Runs finished per hour by result (tokenprobe_runs_total).", "short",
		q(fmt.Sprintf(`sum by (profile, result) (increase(tokenprobe_runs_total{%s}[1h]))`, runSel), "{{profile}} {{result}}")))
	b.WithPanel(ts("Skipped ticks", "Scheduled ticks that started no run, by reason (tokenprobe_runs_skipped_total).", "short",
		q(fmt.Sprintf(`sum by (profile, reason) (increase(tokenprobe_runs_skipped_total{%s}[1h]))`, runSel), "{{profile}} {{reason}}")))
	b.WithPanel(ts("Next run in", "Seconds until each job's next run (tokenprobe_run_next_timestamp_seconds).", "s",
		q(fmt.Sprintf(`tokenprobe_run_next_timestamp_seconds{%s} - time()`, runSel), "{{profile}} {{endpoint}}")))
	b.WithPanel(ts("Last run attainment and goodput", "From the last run of each job (tokenprobe_run_last_slo_attainment_ratio, tokenprobe_run_last_goodput_requests_per_second).", "short",
		q(fmt.Sprintf(`tokenprobe_run_last_slo_attainment_ratio{%s}`, runSel), "attainment {{profile}}"),
		q(fmt.Sprintf(`tokenprobe_run_last_goodput_requests_per_second{%s}`, runSel), "goodput {{profile}}")))
	return b
}
