package alerts

import (
	"bytes"
	"fmt"
	"math"

	"gopkg.in/yaml.v3"
)

// The canary signals read tokenprobe's recording rules, so that a
// progressive delivery tool judges a canary by what a probe of it measured:
// SLO attainment (goodput over success + error) and the TTFT cliff (TTFT
// p95 against its baseline of the last hour, load level by load level,
// the worst level's ratio).
const (
	// The worst location's, where several probe the canary.
	canaryAttainment = `min by (profile, endpoint) (tokenprobe:slo_attainment:ratio_rate5m{profile="%s",endpoint="%s"})`
	canaryCliff      = `max by (profile, endpoint) (tokenprobe:ttft_p95_by_level:rate5m{profile="%[1]s",endpoint="%[2]s"} / on (profile, endpoint, location, load_level) tokenprobe:ttft_p95_by_level:baseline1h{profile="%[1]s",endpoint="%[2]s"})`
)

// AnalysisTemplate is an Argo Rollouts AnalysisTemplate: a canary passes
// while the probe of its endpoint keeps the SLO attainment at or above the
// objective and shows no TTFT cliff. Its arguments: the Prometheus
// address, the profile, the canary's endpoint name in tokenprobe's
// configuration, and the objective.
func AnalysisTemplate(o Options) map[string]any {
	prom := func(query string) map[string]any {
		return map[string]any{"prometheus": map[string]any{"address": "{{args.prometheus-address}}", "query": query}}
	}
	return map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AnalysisTemplate",
		"metadata":   map[string]any{"name": "tokenprobe-canary", "labels": map[string]string{"app.kubernetes.io/name": "tokenprobe"}},
		"spec": map[string]any{
			"args": []map[string]any{
				{"name": "prometheus-address", "value": "http://prometheus.monitoring:9090"},
				{"name": "profile"},
				{"name": "endpoint"},
				{"name": "objective", "value": "0.95"},
			},
			"metrics": []map[string]any{
				{
					// No result (the probe has not measured the canary yet) is
					// neither: inconclusive, never a pass.
					"name": "slo-attainment", "interval": "1m", "count": 5, "failureLimit": 1, "inconclusiveLimit": 2,
					"successCondition":      "len(result) > 0 && result[0] >= {{args.objective}}",
					"failureCondition":      "len(result) > 0 && result[0] < {{args.objective}}",
					"provider":              prom(fmt.Sprintf(canaryAttainment, "{{args.profile}}", "{{args.endpoint}}")),
					"consecutiveErrorLimit": 3,
				},
				{
					"name": "ttft-cliff", "interval": "1m", "count": 5, "failureLimit": 1, "inconclusiveLimit": 2,
					"successCondition":      fmt.Sprintf("len(result) > 0 && result[0] < %g", o.CliffTTFT),
					"failureCondition":      fmt.Sprintf("len(result) > 0 && result[0] >= %g", o.CliffTTFT),
					"provider":              prom(fmt.Sprintf(canaryCliff, "{{args.profile}}", "{{args.endpoint}}")),
					"consecutiveErrorLimit": 3,
				},
			},
		},
	}
}

// MetricTemplates are Flagger MetricTemplates of the same two signals; a
// Canary's analysis sets their thresholds (attainment min: the
// objective; cliff max: 4) and the profile and endpoint as variables.
func MetricTemplates() []map[string]any {
	tmpl := func(name, query string) map[string]any {
		return map[string]any{
			"apiVersion": "flagger.app/v1beta1",
			"kind":       "MetricTemplate",
			"metadata":   map[string]any{"name": name, "labels": map[string]string{"app.kubernetes.io/name": "tokenprobe"}},
			"spec": map[string]any{
				"provider": map[string]any{"type": "prometheus", "address": "http://prometheus.monitoring:9090"},
				"query":    query,
			},
		}
	}
	vars := []any{"{{ variables.profile }}", "{{ variables.endpoint }}"}
	return []map[string]any{
		tmpl("tokenprobe-slo-attainment", fmt.Sprintf(canaryAttainment, vars...)),
		tmpl("tokenprobe-ttft-cliff", fmt.Sprintf(canaryCliff, vars...)),
	}
}

// SLO is one profile against one endpoint with an SLO objective.
type SLO struct {
	Profile, Endpoint string
	Objective         float64
}

// Sloth is the goodput SLO of each profile and endpoint in Sloth's
// prometheus/v1 format: the events that count are success and error
// (cancelled requests are no fault of the server), the errors those that
// were not good. Sloth generates its own recording and burn-rate rules
// from it, for teams that keep their SLOs there.
func Sloth(service string, slos []SLO) map[string]any {
	var out []map[string]any
	for _, s := range slos {
		sel := fmt.Sprintf(`profile=%q,endpoint=%q`, s.Profile, s.Endpoint)
		total := fmt.Sprintf(`sum(rate(tokenprobe_requests_total{%s,outcome!="cancelled"}[{{.window}}]))`, sel)
		out = append(out, map[string]any{
			"name":        s.Profile + "-" + s.Endpoint + "-goodput",
			"objective":   math.Round(s.Objective*1e6) / 1e4, // a percentage, without 95.00000000000001
			"description": fmt.Sprintf("Requests of tokenprobe profile %s on %s that succeed and meet every SLO threshold.", s.Profile, s.Endpoint),
			"sli": map[string]any{"events": map[string]any{
				"error_query": fmt.Sprintf(`%s - sum(rate(tokenprobe_good_requests_total{%s}[{{.window}}]))`, total, sel),
				"total_query": total,
			}},
			"alerting": map[string]any{
				"name":         "TokenprobeGoodputSLO",
				"labels":       map[string]string{"profile": s.Profile, "endpoint": s.Endpoint},
				"page_alert":   map[string]any{"labels": map[string]string{"severity": "page"}},
				"ticket_alert": map[string]any{"labels": map[string]string{"severity": "ticket"}},
			},
		})
	}
	return map[string]any{"version": "prometheus/v1", "service": service, "slos": out}
}

// MarshalDocs renders YAML documents, one after another.
func MarshalDocs(header string, docs ...any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), enc.Close()
}
