package realserver

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// Both servers start, answer on loopback, name their model as they do,
// and serve their metrics; a stopped server's address refuses, and a
// restarted one answers again on the same address.
func TestServersStartAndStop(t *testing.T) {
	t.Run("llama-server", func(t *testing.T) {
		s := LlamaServer(t)
		if models := s.Get("/v1/models"); !bytes.Contains(models, []byte(`"id":"tiny-llama"`)) {
			t.Fatalf("/v1/models: %s", models)
		}
		if m := s.Get("/metrics"); !bytes.Contains(m, []byte("llamacpp:requests_processing")) {
			t.Fatalf("/metrics: %.300s", m)
		}
	})
	t.Run("llm-d-inference-sim", func(t *testing.T) {
		s := LLMDSim(t, "sim-model")
		if models := s.Get("/v1/models"); !bytes.Contains(models, []byte(`"sim-model"`)) {
			t.Fatalf("/v1/models: %s", models)
		}
		if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
			t.Fatalf("URL %s", s.URL)
		}
		s.Stop()
		if resp, err := http.Get(s.URL + "/health"); err == nil {
			resp.Body.Close()
			t.Fatal("a stopped server's address still answers")
		}
		// Each start is a namespace of its own, reached by a relay of its
		// own: a relay that kept serving an old namespace, or entered the
		// new process's before it left ours, would be refused here.
		for i := range 5 {
			s.Restart()
			if models := s.Get("/v1/models"); !bytes.Contains(models, []byte(`"sim-model"`)) {
				t.Fatalf("after restart %d, /v1/models: %s", i+1, models)
			}
		}
	})
}
