package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/stats"
)

const identityCfg = `
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 1ms, seed: 1}
profiles:
  - name: identity
    endpoints: [sim]
    model_identity: {prompts: 4, learn_runs: 1}
    schedule: {manual: true}
`

// GET /api/v1/model-identity answers the reference once learned, as a
// file pins it; DELETE forgets it (lifecycle only); both say so of a
// profile that is no model-identity probe.
func TestModelIdentityAPI(t *testing.T) {
	f := newFixtureWith(t, identityCfg, true)
	if code, body := f.do(t, http.MethodGet, "/api/v1/model-identity?profile=identity&endpoint=sim"); code != http.StatusNotFound || !strings.Contains(body, "no reference is learned yet") {
		t.Fatalf("before a run: %d %s", code, body)
	}
	if code, body := f.do(t, http.MethodPost, "/api/v1/runs?profile=identity"); code != http.StatusAccepted {
		t.Fatalf("run now: %d %s", code, body)
	}
	if r := f.waitForRun(t, "identity"); r.Summary.ModelIdentity == nil || r.Summary.ModelIdentity.Verdict != stats.Learning {
		t.Fatalf("the first run: %+v", r.Summary.ModelIdentity)
	}
	code, body := f.do(t, http.MethodGet, "/api/v1/model-identity?profile=identity&endpoint=sim")
	var ref stats.IdentityReference
	if code != http.StatusOK || json.Unmarshal([]byte(body), &ref) != nil || ref.Check(4) != nil || ref.Runs != 1 {
		t.Fatalf("the reference: %d %s", code, body)
	}
	if code, body := f.do(t, http.MethodGet, "/api/v1/model-identity?profile=demo&endpoint=sim"); code != http.StatusNotFound || !strings.Contains(body, "no model_identity profile") {
		t.Fatalf("another profile: %d %s", code, body)
	}
	if code, body := f.do(t, http.MethodDelete, "/api/v1/model-identity?profile=identity&endpoint=sim"); code != http.StatusOK {
		t.Fatalf("forget: %d %s", code, body)
	}
	if code, _ := f.do(t, http.MethodGet, "/api/v1/model-identity?profile=identity&endpoint=sim"); code != http.StatusNotFound {
		t.Fatalf("after forget: %d", code)
	}
	off := newFixtureWith(t, identityCfg, false)
	if code, _ := off.do(t, http.MethodDelete, "/api/v1/model-identity?profile=identity&endpoint=sim"); code != http.StatusForbidden {
		t.Fatalf("forget without --web.enable-lifecycle: %d", code)
	}
}
