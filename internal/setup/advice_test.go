package setup

import (
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/config"
)

// A run, a sweep's level or a search's step with fewer requests than can
// ever show its objective met gets a note at the field that sets them;
// one with enough, or a run held for a duration, gets none.
func TestAdviceOnTooFewRequestsToShowTheObjective(t *testing.T) {
	const endpoints = "endpoints:\n  - {name: e, base_url: 'http://h/v1', model: m}\nprofiles:\n"
	for _, c := range []struct {
		name, profile, want string
	}{
		{"run", "  - name: p\n    load: {concurrency: 2, requests: 20}\n    slo: {ttft: 500ms, objective: 0.9}\n",
			"inline.yaml:5:28: profiles[0].load.requests: a run of 20 requests can never show the 90.0% objective met: it takes at least 35"},
		{"sweep", "  - name: p\n    load:\n      sweep: {concurrency: [1, 2], requests: 72}\n    slo: {ttft: 500ms, objective: 0.95}\n",
			"inline.yaml:6:36: profiles[0].load.sweep.requests: a level of 72 requests can never show the 95.0% objective met: it takes at least 73"},
		{"search", "  - name: p\n    load: {requests: 100, search: {concurrency: [1, 64]}}\n    slo: {ttft: 500ms, objective: 0.99}\n",
			"profiles[0].load.requests: a step of 100 requests can never show the 99.0% objective met: it takes at least 381"},
		{"enough", "  - name: p\n    load: {concurrency: 2, requests: 35}\n    slo: {ttft: 500ms, objective: 0.9}\n", ""},
		{"no objective", "  - name: p\n    load: {concurrency: 2, requests: 5}\n    slo: {ttft: 500ms}\n", ""},
		{"a duration", "  - name: p\n    load: {concurrency: 2, duration: 1m}\n    slo: {ttft: 500ms, objective: 0.9}\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse("inline.yaml", []byte(endpoints+c.profile))
			if err != nil {
				t.Fatal(err)
			}
			got := Advice(cfg)
			switch {
			case c.want == "" && len(got) > 0:
				t.Errorf("advice %v, want none", got)
			case c.want != "" && (len(got) != 1 || !strings.Contains(got[0].Error(), c.want)):
				t.Errorf("advice %v, want one holding %q", got, c.want)
			}
		})
	}
}
