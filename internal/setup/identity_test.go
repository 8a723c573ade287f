package setup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/internal/redact"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// The built-in prompts are as many as the configuration allows.
func TestIdentityPromptsMatchTheBound(t *testing.T) {
	if len(workload.IdentityPrompts) != config.MaxIdentityPrompts {
		t.Fatalf("%d built-in prompts, config.MaxIdentityPrompts %d", len(workload.IdentityPrompts), config.MaxIdentityPrompts)
	}
}

// A reference kept in a file is read back as it was written, under a
// name of its own whatever the profile's and endpoint's names; a file
// that is too large, not a reference, or outside a reference's bounds is
// refused, and a file not there yet is no reference.
func TestIdentityFile(t *testing.T) {
	dir := t.TempDir()
	p := &config.Profile{Name: "identity", ModelIdentity: &config.ModelIdentity{Prompts: 4, MaxTokens: 8, LearnRuns: 1, MinAgreement: 0.5}}
	ep := &client.Endpoint{Name: "../../etc", Model: "m"}
	tr, err := NewIdentityTracker(p, ep, dir)
	if err != nil {
		t.Fatal(err)
	}
	f := tr.Store.(*IdentityFile)
	if !strings.HasPrefix(f.Path, filepath.Join(dir, "model-identity")+string(filepath.Separator)) {
		t.Fatalf("the reference goes to %s, outside %s", f.Path, dir)
	}
	if ref, err := f.Load(); ref != nil || err != nil {
		t.Fatalf("before any: %v, %v", ref, err)
	}
	r := tr.Begin()
	for i := range 4 {
		r.Answer(i, "answer", nil)
	}
	if mi := r.Finish(true); mi.Verdict != stats.Learning || mi.Why != "" {
		t.Fatalf("%+v", mi)
	}
	back, err := ReadIdentityReference(f.Path, 4)
	if err != nil || back.Runs != 1 || back.Answers[3][0] != "answer" {
		t.Fatalf("read back: %+v, %v", back, err)
	}
	// Pinned from that file, a tracker judges from its first run.
	p.ModelIdentity.ReferencePath = f.Path
	pinned, err := NewIdentityTracker(p, ep, "")
	if err != nil || !pinned.Pinned {
		t.Fatalf("pinned: %v", err)
	}
	for name, body := range map[string]string{
		"60 MB":         strings.Repeat(" ", 60<<20),
		"not JSON":      "prompts: [a]",
		"unknown field": `{"prompts":["a"],"answers":[["x"]],"unstable":[false],"runs":1,"extra":1}`,
		"other prompts": `{"prompts":["a"],"answers":[["x"]],"unstable":[false],"runs":1}`,
		"no runs":       `{"prompts":["a","b","c","d"],"answers":[["x"],["x"],["x"],["x"]],"unstable":[false,false,false,false],"runs":0}`,
		"a huge answer": `{"prompts":["a","b","c","d"],"answers":[["` + strings.Repeat("x", 2000) + `"],["x"],["x"],["x"]],"unstable":[false,false,false,false],"runs":1}`,
	} {
		path := filepath.Join(dir, "bad.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadIdentityReference(path, 4); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := f.Forget(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Path); !os.IsNotExist(err) {
		t.Fatalf("forgotten, the file is still there: %v", err)
	}
}

// A model-identity profile against an API that cannot be asked to decode
// greedily, or with a pinned reference that is not one, is refused at
// load.
func TestModelIdentityRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref.json")
	if err := os.WriteFile(ref, []byte(`{"prompts":["a"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `endpoints:
  - {name: embed, base_url: "http://vllm:8000/v1", model: m, api: embeddings}
  - {name: chat, base_url: "http://vllm:8000/v1", model: m}
profiles:
  - name: identity
    endpoints: [embed]
    model_identity: {}
  - name: pinned
    endpoints: [chat]
    model_identity: {reference: ref.json}
`
	path := filepath.Join(dir, "tokenprobe.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	if err == nil || !strings.Contains(err.Error(), `profiles[0].endpoints[0]: endpoint "embed" speaks embeddings, which tokenprobe cannot ask to decode greedily`) ||
		!strings.Contains(err.Error(), "profiles[1].model_identity.reference: ") {
		t.Fatalf("%v", err)
	}
}

// A model-identity run asks its API for greedy decoding over the
// endpoint's own body fields, and sends the profile's prompts in order.
func TestModelIdentityRunIsGreedy(t *testing.T) {
	cfg, err := Parse("identity.yaml", []byte(`endpoints:
  - {name: chat, base_url: "http://vllm:8000/v1", model: m, extra_body: {temperature: 0.7}}
  - {name: claude, base_url: "http://anthropic:8000/v1", model: m, api: messages}
profiles:
  - name: identity
    endpoints: [chat, claude]
    model_identity: {prompts: 4, max_tokens: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ep   string
		want map[string]any
	}{
		{"chat", map[string]any{"temperature": 0, "top_p": 1, "seed": 1}},
		{"claude", map[string]any{"temperature": 0, "top_k": 1}},
	} {
		targets, err := OpenEndpoint(cfg.Endpoint(c.ep), redact.New(), Tracing{})
		if err != nil {
			t.Fatal(err)
		}
		run, err := NewRun(cfg.Profiles[0], targets.Endpoint, targets.Client)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.want {
			if run.Extra[k] != v {
				t.Errorf("%s: %s is %v, want %v (body fields %v)", c.ep, k, run.Extra[k], v, run.Extra)
			}
		}
		if run.Plan.Stages[0].Concurrency != 1 || run.Plan.Stages[0].Requests != 4 {
			t.Errorf("%s: plan %s", c.ep, run.Plan)
		}
		for i := range 5 {
			p := run.Workload.Next()
			if p.IdentityPrompt != i%4+1 || p.Text != workload.IdentityPrompts[i%4] || p.MaxTokens != 8 {
				t.Fatalf("%s: prompt %d is %+v", c.ep, i, p)
			}
		}
	}
}
