package catalog

import (
	"fmt"

	"github.com/tokenprobe/tokenprobe/internal/gpu"
	"strconv"
	"strings"
)

// BaselineSamples is how many 5-minute values a load level's cliff
// baseline needs before the cliff alert compares with it (the rules'
// default; the cliff dashboard says it).
const BaselineSamples = 10

// DemoSeries and DemoServerSeries are the tokenprobe series the demo
// (configs/demo.yaml) exports after one run of each profile, and of them
// the server's view: daemon TestDemoSeries counts them and fails while
// these are stale; `make docs` writes them here.
const (
	DemoSeries       = 2958
	DemoServerSeries = 72
)

// thousands writes n with a comma between thousands: 2,567.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Markdown renders docs/METRICS.md from the catalog.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# Metrics reference

Generated from ` + "`catalog`" + ` by ` + "`make docs`" + `; a test keeps it equal to the code.
What each measurement means is in [MEASUREMENT.md](MEASUREMENT.md).

## Prometheus

Request metrics carry ` + "`" + strings.Join(RequestLabels, "`, `") + "`" + `: values from the
configuration, never a URL, a prompt, a request id or an error text. ` + "`load_level`" + ` is the
concurrency (closed loop) or request rate (open loop) of the run, so latency can be read
against load. Descriptive labels live on ` + "`tokenprobe_profile_info`" + `; join them with
` + "`group_left`" + `. A profile removed from the configuration loses all its series.

Series count, in the text format (classic buckets; a native histogram is one series): each load
level of a profile against an endpoint has 307 series with two SLO thresholds (TTFT 114, ITL 88,
request duration 25, TTST and inter-chunk 22 each, dispatch lag 16, error reasons 8, SLO 4,
outcomes 3, and 5 more; each further SLO threshold adds 2), and each profile x endpoint about 20
more (runs, skips, last-run gauges, info); an endpoint with server_metrics adds up to 10 (where
the last run's TTFT went, and its server's TTFT clock) and 6 per load level (the server's load,
and where that level's TTFT went). The demo (three profiles,
eight load levels) exports ` + thousands(DemoSeries) + ` tokenprobe series after one run of each (` + strconv.Itoa(DemoServerSeries) + ` of them the
server's view, its simulator being read as server_metrics; ` + "`curl -s localhost:9470/metrics | grep -c '^tokenprobe_'`" + `, the
runs started with ` + "`POST /api/v1/runs`" + `; ` + "`daemon TestDemoSeries`" + ` counts them and ` + "`make docs`" + ` writes them here).

Histograms have classic buckets (listed) and native buckets (factor 1.1) side by side. What a
Prometheus keeps depends on how it scrapes: the text format gives it the classic buckets only;
protobuf with native histograms on gives it the native form only, unless
` + "`scrape_classic_histograms: true`" + ` (2.45 and later) or ` + "`always_scrape_classic_histograms: true`" + `
(3.x) keeps both. The recording rules and the dashboards' percentile panels read the native
form where it is kept and the classic buckets otherwise, so they answer under all three
settings (` + "`e2e TestE2EAlertsInARealPrometheus`" + ` runs the cliff alert and every dashboard query
under each, in Prometheus 2.42 and 3.16); the heatmaps read the classic buckets where kept, else
the native form.

The classic TTFT and ITL buckets are about 10% apart (from 5 ms to 60 s, and 1 ms to 1 s),
so that quantiles read from them stay within 10% of the exact figures even for the tight
distributions a queue makes. Against the exact figures of a demo run (the three demo profiles,
2026-11-23, ` + "`tools/quantile-error/quantile_error.py`" + `), they were within 8.9% for TTFT and 8.5% for
ITL at p50, p95 and p99 at every load level; the round layouts before (22 and 19 buckets) were
off by up to +74% and +85% (TTFT p95 at concurrency 32: 4.8 s against 2.85 s; ITL p95 19.5 ms
against 10.8 ms). The other histograms keep round layouts. The cliff alert compares TTFT p95 with
4x its own floor, so an error shared by both cancels but one that differs does not. SLO
attainment and goodput come from counters, exact under every setting. TTFT, ITL and request
duration observations carry an exemplar (OpenMetrics and native histograms) at most once a second
per series: ` + "`trace_id`" + ` and ` + "`span_id`" + `, the request's traceparent (a trace backend has its span
and the server's child span when ` + "`tracing`" + ` is on), and ` + "`request_id`" + `, matching the ` + "`id`" + ` of
` + "`records.jsonl`" + `: in ` + "`tokenprobe run`" + `'s artifacts, and in the daemon's with
` + "`serve --artifacts-dir`" + `, where request n of run r has the id r x 10^9 + n.

| metric | type | unit | labels | meaning |
| --- | --- | --- | --- | --- |
`)
	for _, m := range All {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", m.Name, m.Type, m.Unit, labels(m.Labels), m.Help)
	}
	b.WriteString("| `tokenprobe_build_info` | gauge | info | version, revision, branch, goversion, goos, goarch, tags | Always 1: the build, from client_golang's version collector. |\n")
	b.WriteString("| `tokenprobe_gpu_source_up` | gauge | boolean | `source` | 1 when the GPU source (dcgm, nvml, auto, dcgm-exporter) read its GPUs at the last scrape; 0 when it is missing or failing, and the DCGM series below are absent. Only with a `gpu` block. |\n")
	b.WriteString("\nClassic bucket boundaries (seconds):\n\n")
	for _, m := range All {
		if m.Type == Histogram {
			fmt.Fprintf(&b, "- `%s`: %s\n", m.Name, floats(m.Buckets))
		}
	}
	b.WriteString("\n" + rulesRead)
	b.WriteString(`## OpenTelemetry (OTLP push)

The ` + "`gen_ai.*`" + ` instruments and attributes follow the OpenTelemetry GenAI semantic conventions,
which now live in their own repository,
[open-telemetry/semantic-conventions-genai](https://github.com/open-telemetry/semantic-conventions-genai)
(v0.1.0, development stability); every name used here is the same there as in core
semantic-conventions v1.41.0, the last release that carried them. That repository publishes no
schema URL yet, so the resource, the meter and the tracer carry
` + "`https://opentelemetry.io/schemas/1.41.0`" + `, the schema the names were released under (the Go
constants are ` + "`go.opentelemetry.io/otel/semconv/v1.41.0`" + `'s). Resource attributes:
` + "`service.name=tokenprobe`" + `, ` + "`service.version`" + `, ` + "`service.instance.id`" + ` (hostname unless set) and
those of ` + "`OTEL_RESOURCE_ATTRIBUTES`" + `.

| instrument | kind | unit | attributes | meaning |
| --- | --- | --- | --- | --- |
`)
	for _, i := range OTel {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", i.Name, i.Kind, i.Unit, i.Attributes, i.Help)
	}
	b.WriteString(`
## GPU series (DCGM)

With a ` + "`gpu`" + ` block, ` + "`/metrics`" + ` also carries these DCGM series with exactly the names, help texts and
labels of NVIDIA dcgm-exporter (` + "`" + strings.Join(dcgmLabels, "`, `") + "`" + `), so a dashboard works the same
with any source. ` + "`gpu.source`" + ` is ` + "`dcgm`" + ` (libdcgm in-process or an nv-hostengine), ` + "`nvml`" + ` (the
driver's libnvidia-ml, on GPU nodes without DCGM), ` + "`auto`" + ` (DCGM if it initialises, else NVML) or
` + "`dcgm-exporter`" + ` (a running one's /metrics). The columns say which source provides each series; a
series a source or a GPU lacks is absent, never 0 (the profiling fields, ` + "`DCGM_FI_PROF_*`" + `, are
DCGM's alone and appear on GPUs that support them; XID errors come as events, which NVML polling
does not read).

| metric | type | dcgm | nvml | dcgm-exporter | meaning |
| --- | --- | --- | --- | --- | --- |
`)
	for _, f := range dcgmFields {
		nvml := "no"
		if gpu.NVMLFields[f.Name] {
			nvml = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | yes | %s | yes | %s |\n", f.Name, f.Type, nvml, f.Help)
	}
	return b.String()
}

var (
	dcgmFields = gpu.Fields
	dcgmLabels = gpu.Labels
)

func labels(ls []string) string {
	if len(ls) == 0 {
		return ""
	}
	return "`" + strings.Join(ls, "`, `") + "`"
}

func floats(fs []float64) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(parts, ", ")
}

// rulesRead says what the generated rules and dashboards read of the
// series above.
const rulesRead = `## What the rules read

- **Scraped series only.** Every generated rule and dashboard query selects ` + "`" + `profile!=""` + "`" + `:
  tokenprobe's scraped series always carry ` + "`" + `profile` + "`" + `; the same data pushed over OTLP into the
  same Prometheus (its OTLP receiver) carries the label tokenprobe_profile instead, and three of its
  names (` + "`" + `tokenprobe_requests_total` + "`" + `, ` + "`" + `tokenprobe_slo_requests_total` + "`" + `,
  ` + "`" + `tokenprobe_dispatch_lag_seconds` + "`" + `) are the scraped ones', under the same ` + "`" + `job` + "`" + ` when
  ` + "`" + `service.name` + "`" + ` is the scrape job's name. So one Prometheus can take both side by side: the
  rules read the scrape; query the push by its ` + "`" + `tokenprobe_*` + "`" + ` attributes. To read one scrape job
  alone, generate the rules with a selector of your own (` + "`" + `alerts.Options.Selector` + "`" + `).
- **Every series from the start.** A profile's counters and histograms exist at 0 from the
  moment the configuration loads it, for every load level of its plan (each stage's, each step
  of a ramp), every outcome and error reason, every SLO it sets and every run result: ` + "`" + `rate()` + "`" + `
  ignores a series' first sample, so a series created by its first observation would hide its
  whole first run from every SLO, goodput and burn rule. A search's levels are not known before
  it runs; theirs appear with their first request. A removed profile's series go at once, and
  the recording rules keep a profile's series only while its ` + "`" + `tokenprobe_profile_info` + "`" + ` is there.
- **The cliff per level.** ` + "`" + `tokenprobe:ttft_p95_by_level:rate5m` + "`" + ` and
  ` + "`" + `tokenprobe:itl_p50_by_level:rate5m` + "`" + ` are computed per ` + "`" + `load_level` + "`" + ` over full windows only (the
  level's series had a sample 5 minutes before), and ` + "`" + `..._baseline1h` + "`" + ` is the lower quartile of
  the last hour's values once there are 10 (docs/RUNBOOK.md#tokenprobettftcliff).

`
