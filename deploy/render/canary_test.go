package render

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	rollouts "github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	flagger "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	sloth "github.com/slok/sloth/pkg/prometheus/api/v1"
	yaml3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"

	"github.com/tokenprobe/tokenprobe/alerts"
)

// strict decodes a YAML document into v as the API server's strict field
// validation reads it: a field v's type lacks is an error.
func strict(doc []byte, v any) error {
	j, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// The canary templates decode into the Argo Rollouts and Flagger API
// types with no unknown field, and say what the rules say.
func TestCanaryTemplatesDecodeIntoTheirAPITypes(t *testing.T) {
	b, err := os.ReadFile("../../alerts/argo-analysistemplate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var at rollouts.AnalysisTemplate
	if err := strict(b, &at); err != nil {
		t.Fatalf("argo-analysistemplate.yaml: %v", err)
	}
	if at.Kind != "AnalysisTemplate" || len(at.Spec.Metrics) != 2 || len(at.Spec.Args) != 4 {
		t.Fatalf("AnalysisTemplate: %+v", at)
	}
	for _, m := range at.Spec.Metrics {
		p := m.Provider.Prometheus
		if p == nil || !strings.Contains(p.Query, "tokenprobe:") || p.Address != "{{args.prometheus-address}}" ||
			m.SuccessCondition == "" || m.FailureCondition == "" {
			t.Errorf("metric %s: %+v", m.Name, m)
		}
	}

	b, err = os.ReadFile("../../alerts/flagger-metrictemplates.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(strings.TrimPrefix(string(b), alerts.Header), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d Flagger documents, want 2", len(docs))
	}
	for _, doc := range docs {
		var mt flagger.MetricTemplate
		if err := strict([]byte(doc), &mt); err != nil {
			t.Fatalf("flagger-metrictemplates.yaml: %v", err)
		}
		if mt.Kind != "MetricTemplate" || mt.Spec.Provider.Type != "prometheus" || !strings.Contains(mt.Spec.Query, "{{ variables.profile }}") {
			t.Errorf("MetricTemplate: %+v", mt)
		}
	}
}

// The goodput SLO in Sloth's prometheus/v1 format decodes into Sloth's own
// type with no unknown field.
func TestSlothSpecDecodesIntoSlothsType(t *testing.T) {
	b, err := alerts.MarshalDocs("", alerts.Sloth("llm", []alerts.SLO{{Profile: "chat", Endpoint: "vllm", Objective: 0.95}}))
	if err != nil {
		t.Fatal(err)
	}
	var spec sloth.Spec
	dec := yaml3.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if spec.Version != sloth.Version || len(spec.SLOs) != 1 {
		t.Fatalf("spec: %+v", spec)
	}
	s := spec.SLOs[0]
	if s.Objective != 95 || s.SLI.Events == nil || !strings.Contains(s.SLI.Events.TotalQuery, `outcome!="cancelled"`) ||
		!strings.Contains(s.SLI.Events.ErrorQuery, "tokenprobe_good_requests_total") || s.Alerting.Name == "" {
		t.Fatalf("SLO: %+v", s)
	}
}
