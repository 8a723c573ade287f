package config

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// Each file in testdata/invalid states the exact errors it must produce in
// "# want: <suffix after the file name>" lines; an empty file wants the
// empty-file error.
func TestInvalidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 10 {
		t.Fatalf("only %d invalid files found", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want := wantedErrors(t, file)
			_, err := LoadFile(file)
			if err == nil {
				t.Fatalf("accepted; want:\n%s", strings.Join(want, "\n"))
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Fatalf("got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}

func wantedErrors(t *testing.T, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
			want = append(want, file+rest)
		}
	}
	if len(want) == 0 {
		want = []string{file + ": the file is empty: it needs at least one endpoint and one profile"}
	}
	return want
}

func TestFullFileAndDefaults(t *testing.T) {
	cfg, err := LoadFile("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Endpoint("vllm-a")
	if a.APIKey.Reveal() != "sk-test-from-file" || a.Usage() || a.Timeout.D() != 30*time.Second || a.API != "completions" {
		t.Errorf("vllm-a decoded wrong: %+v", a)
	}
	sim := cfg.Endpoint("sim")
	if sim.Simulator.Slots != 8 || sim.Simulator.PrefillPerToken.D() != 50*time.Microsecond || sim.Simulator.Faults.StallFor.D() != 3*time.Second {
		t.Errorf("simulator decoded wrong: %+v", sim.Simulator)
	}
	if sim.Model != "tokenprobe-sim" || sim.API != "chat" || sim.Timeout.D() != 120*time.Second {
		t.Errorf("endpoint defaults: model %q api %q timeout %v", sim.Model, sim.API, sim.Timeout.D())
	}
	p := cfg.Profile("chat-slo")
	if p.Load.Rate != 4 || p.Load.Arrival != "constant" || p.Load.GracePeriod == nil || p.Load.GracePeriod.D() != 20*time.Second || p.SLO.TTFT.D() != 500*time.Millisecond || p.SLO.Objective != 0.95 {
		t.Errorf("profile decoded wrong: %+v", p)
	}
	st := cfg.Profile("staircase").Load.Plan()
	if len(st) != 4 || st[3].Smoothness != 0.5 || st[3].Arrival != "gamma" || st[0].Concurrency != 1 || st[1].Requests != 100 || st[2].Arrival != "poisson" || st[2].MaxConcurrency != 10 {
		t.Errorf("stages: %+v", st)
	}
	d := cfg.Profile("defaults")
	if d.Load.Concurrency != 1 || d.Load.Duration.D() != time.Minute || d.Workload.InputTokens.Mean != 128 || !d.Workload.Streaming() {
		t.Errorf("profile defaults: %+v", d)
	}
}

// A key read from a file never shows up when the config is printed,
// marshalled or formatted, whatever the verb.
func TestSecretsNeverPrint(t *testing.T) {
	cfg, err := LoadFile("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const key = "sk-test-from-file"
	y, _ := yaml.Marshal(cfg)
	j, _ := json.Marshal(cfg)
	for name, out := range map[string]string{
		"yaml": string(y), "json": string(j),
		"%v": fmt.Sprintf("%v", cfg.Endpoints[0]), "%+v": fmt.Sprintf("%+v", *cfg.Endpoints[0]),
		"%#v": fmt.Sprintf("%#v", *cfg.Endpoints[0]), "%s": fmt.Sprintf("%s", cfg.Endpoints[0].APIKey),
	} {
		if strings.Contains(out, key) {
			t.Errorf("%s output contains the key: %s", name, out)
		}
	}
}

func TestEnvKey(t *testing.T) {
	t.Setenv("TOKENPROBE_TEST_KEY", "sk-env")
	cfg, err := Parse("inline.yaml", []byte("endpoints:\n  - {name: e, base_url: 'http://h/v1', model: m, api_key_env: TOKENPROBE_TEST_KEY}\nprofiles:\n  - name: p\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Endpoints[0].APIKey.Reveal() != "sk-env" || cfg.Profiles[0].Endpoints[0] != "e" {
		t.Fatalf("key %q, endpoints %v", cfg.Endpoints[0].APIKey.Reveal(), cfg.Profiles[0].Endpoints)
	}
}

// Whatever the bytes, Parse returns a config or located errors, never a
// panic; what it accepts has endpoints and profiles that refer to each other.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/good/*.yaml", "testdata/invalid/*.yaml", "../../configs/demo.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, name := range files {
			b, _ := os.ReadFile(name)
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(filepath.Join(t.TempDir(), "fuzz.yaml"), data)
		if err != nil {
			if es := Errors(nil); !errors.As(err, &es) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if len(cfg.Endpoints) == 0 || len(cfg.Profiles) == 0 {
			t.Fatal("accepted a config without endpoints or profiles")
		}
		for _, p := range cfg.Profiles {
			for _, e := range p.Endpoints {
				if cfg.Endpoint(e) == nil {
					t.Fatalf("profile %s names unknown endpoint %s", p.Name, e)
				}
			}
		}
	})
}

// The names that carry credentials, vendors' included, and names that
// only look like one.
func TestIsCredentialHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "X-Honeycomb-Team": true, "X-Password": true, "X-Credential": true, "X-Bearer": true,
		"X-Signature": true, "X-Amz-Sig": true, "X-Session-Id": true, "X-Api-Key": true,
		"X-Team": false, "X-Design": false, "Content-Type": false, "Anthropic-Version": false,
		"X-Portkey-Provider": false, "X-Portkey-Custom-Host": false, "X-Portkey-Api-Key": true, "X-Portkey-Virtual-Key": true,
	} {
		if got := IsCredentialHeader(name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// Prices and budgets are finite and within their stated ranges, each
// refusal naming its field: 1e308 made a run's cost +Inf (no summary.json,
// a counter at +Inf for ever, the daily budget spent for good), and .nan
// and .inf passed silently.
func TestPricesAndBudgetsAreFiniteAndInRange(t *testing.T) {
	for value, want := range map[string]string{
		"input_per_million: 1e308":           "endpoints[0].price.input_per_million: 1e+308 is not a price",
		"output_per_million: .inf":           "endpoints[0].price.output_per_million: +Inf is not a price",
		"output_per_million: .nan":           "endpoints[0].price.output_per_million: NaN is not a price",
		"cached_input_per_million: -1":       "endpoints[0].price.cached_input_per_million: -1 is not a price",
		"input_per_million: 600, budget-nan": "profiles[0].schedule.budget.max_cost_per_day: NaN is not a budget",
		"input_per_million: 600, budget-big": "profiles[0].schedule.budget.max_cost_per_day: 1e+300 is not a budget",
	} {
		price, budget, _ := strings.Cut(value, ", ")
		day := "10"
		switch budget {
		case "budget-nan":
			day = ".nan"
		case "budget-big":
			day = "1e300"
		}
		doc := fmt.Sprintf("endpoints:\n  - {name: e, base_url: 'http://x/v1', model: m, price: {%s}}\nprofiles:\n  - {name: p, schedule: {budget: {max_cost_per_day: %s}}}\n", price, day)
		_, err := Parse("tokenprobe.yaml", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", value, err, want)
		}
	}
	if _, err := Parse("tokenprobe.yaml", []byte("endpoints:\n  - {name: e, base_url: 'http://x/v1', model: m, price: {input_per_million: 600, output_per_million: 2400}}\nprofiles:\n  - {name: p, schedule: {budget: {max_cost_per_day: 50}}}\n")); err != nil {
		t.Errorf("a dear model's price: %v", err)
	}
}

// A prefix_cache profile takes its defaults and sets its own load: one
// triple at a time, prefix_cache.triples of them, short answers.
func TestPrefixCacheDefaults(t *testing.T) {
	cfg, err := Parse("cache.yaml", []byte(`endpoints: [{name: vllm, base_url: "http://vllm:8000", model: m}]
profiles:
  - name: cache
    prefix_cache: {}
  - name: longer
    prefix_cache: {prefix_tokens: 4096, triples: 20, min_speedup: 2}
    workload: {output_tokens: {mean: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Profiles[0]
	if pc := p.PrefixCache; pc.PrefixTokens != DefaultPrefixTokens || pc.Triples != DefaultCacheTriples || pc.MinSpeedup != DefaultMinSpeedup {
		t.Errorf("defaults %+v", pc)
	}
	if st := p.Load.Stage; st.Concurrency != 1 || st.Requests != DefaultCacheTriples || st.Duration != 0 || p.Workload.OutputTokens.Mean != DefaultCacheOutTokens {
		t.Errorf("load %+v, output tokens %d", st, p.Workload.OutputTokens.Mean)
	}
	q := cfg.Profiles[1]
	if q.PrefixCache.PrefixTokens != 4096 || q.Load.Stage.Requests != 20 || q.Workload.OutputTokens.Mean != 1 || q.PrefixCache.MinSpeedup != 2 {
		t.Errorf("given values %+v, load %+v, output %d", q.PrefixCache, q.Load.Stage, q.Workload.OutputTokens.Mean)
	}
}
