package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Any header can take its value from a file or a variable; such values are
// sent as they are, listed as secrets, and never printed.
func TestHeadersFromFilesAndVariables(t *testing.T) {
	dir := t.TempDir()
	const fileValue, envValue = "azure-key-from-file-123", "cookie-from-env-456"
	_ = os.WriteFile(filepath.Join(dir, "azure.key"), []byte(fileValue+"\n"), 0o600)
	t.Setenv("TOKENPROBE_TEST_COOKIE", envValue)
	t.Setenv("TOKENPROBE_TEST_OTLP", "honeycomb-789")
	file := filepath.Join(dir, "tokenprobe.yaml")
	data := []byte(`endpoints:
  - name: azure
    base_url: https://example.openai.azure.com/openai/v1
    model: m
    headers:
      Api-Key: {file: azure.key}
      Cookie: {env: TOKENPROBE_TEST_COOKIE}
      X-Tenant: acme
otlp:
  headers:
    x-honeycomb-team: {env: TOKENPROBE_TEST_OTLP}
profiles:
  - name: p
`)
	cfg, err := Parse(file, data)
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Endpoints[0].Headers
	if h["Api-Key"].Value() != fileValue || h["Cookie"].Value() != envValue || h["X-Tenant"].Value() != "acme" {
		t.Fatalf("values %q %q %q", h["Api-Key"].Value(), h["Cookie"].Value(), h["X-Tenant"].Value())
	}
	secrets := cfg.Secrets()
	for _, want := range []string{fileValue, envValue, "honeycomb-789"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("Secrets() lacks %q", want)
		}
	}
	if slices.Contains(secrets, "acme") {
		t.Error("an inline value is no secret")
	}
	y, _ := yaml.Marshal(cfg)
	j, _ := json.Marshal(cfg)
	for name, out := range map[string]string{"yaml": string(y), "json": string(j), "%+v": fmt.Sprintf("%+v", *cfg.Endpoints[0])} {
		for _, secret := range secrets {
			if secret != "" && strings.Contains(out, secret) {
				t.Errorf("%s output shows %q:\n%s", name, secret, out)
			}
		}
	}
	if !strings.Contains(string(y), "file: azure.key") || !strings.Contains(string(y), "env: TOKENPROBE_TEST_COOKIE") {
		t.Errorf("the YAML should name where values come from:\n%s", y)
	}
	// What /config shows parses back to the same configuration.
	if _, err := Parse(file, y); err != nil {
		t.Errorf("marshalled configuration does not load again: %v", err)
	}
}

// check runs where the production secrets are not: a secret it cannot
// read is a warning, everything else is still an error; serve and run
// (Parse, LoadFile) refuse it.
func TestCheckWarnsOfMissingSecrets(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokenprobe.yaml")
	_ = os.WriteFile(file, []byte(`endpoints:
  - name: vllm
    base_url: http://127.0.0.1:8000/v1
    model: m
    api_key_env: TOKENPROBE_TEST_UNSET_KEY
    headers:
      X-Api-Key: {file: /no/such/key}
profiles:
  - name: p
`), 0o644)
	cfg, warns, err := CheckFile(file)
	if err != nil || cfg == nil {
		t.Fatalf("check: %v", err)
	}
	if len(warns) != 2 || !strings.Contains(warns.Error(), "TOKENPROBE_TEST_UNSET_KEY is not set") || !strings.Contains(warns.Error(), "cannot read /no/such/key") {
		t.Fatalf("warnings: %v", warns)
	}
	if _, err := LoadFile(file); err == nil {
		t.Fatal("LoadFile (serve, run) accepted a missing secret")
	}
	// Anything else stays an error in check.
	_ = os.WriteFile(file, []byte("endpoints:\n  - {name: e, base_url: 'http://h/v1', api_key_env: TOKENPROBE_TEST_UNSET_KEY}\nprofiles:\n  - name: p\n"), 0o644)
	if _, _, err := CheckFile(file); err == nil || !strings.Contains(err.Error(), "model is required") || strings.Contains(err.Error(), "TOKENPROBE_TEST_UNSET_KEY") {
		t.Fatalf("check of an invalid file: %v", err)
	}
}

// A server's metrics page may need a token of its own; it is a secret as
// the API key is.
func TestServerMetricsToken(t *testing.T) {
	t.Setenv("TOKENPROBE_TEST_METRICS", "metrics-token-321")
	cfg, err := Parse("tokenprobe.yaml", []byte(`endpoints:
  - name: vllm
    base_url: http://vllm:8000/v1
    model: m
    server_metrics: {url: "http://vllm:8000/metrics", kind: vllm, bearer_token_env: TOKENPROBE_TEST_METRICS}
profiles:
  - name: p
`))
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Endpoints[0].ServerMetrics
	if m.BearerToken.Reveal() != "metrics-token-321" || m.Interval.D().Seconds() != 1 || !slices.Contains(cfg.Secrets(), "metrics-token-321") {
		t.Fatalf("token %q interval %v, secrets listed: %v", m.BearerToken, m.Interval, slices.Contains(cfg.Secrets(), "metrics-token-321"))
	}
}
