// Package served learns what an endpoint serves: the model its answers
// name. It belongs to the endpoint (client.Endpoint) and is read by the
// default model check (probe/check).
package served

import (
	"fmt"
	"sync"
)

// Model is what an endpoint has been seen to serve: the model its answers
// name. Servers name it in their own ways (docs/MEASUREMENT.md, "The model
// an answer names"): vLLM, SGLang and Ollama echo the name asked for;
// llama.cpp's server answers its --alias or the -m path whatever was asked;
// OpenAI answers a dated snapshot (gpt-4o-2024-08-06 for gpt-4o); Azure
// OpenAI the model behind the deployment the URL names. A check that wants
// the asked name back therefore fails every healthy answer of half of them,
// while the question users mean is "is this still the model that answered
// before?". Served learns the answer to that from the answers themselves.
//
// One Model belongs to one endpoint (its client.Endpoint), so what it
// learned lasts across runs, and across reloads that leave the endpoint
// unchanged. It is safe for concurrent use.
type Model struct {
	mu      sync.Mutex
	learned string
	echoes  bool
}

// Judge says whether an answer naming served, to a request that asked for
// asked, is from the model the endpoint serves, and if not, the model that
// answered before. The first name seen is learned. An answer that names the
// model asked for always passes, and from then on the endpoint is known to
// echo: the learned name becomes the asked one, so a gateway's fallback
// that happened to answer first does not become the expected model.
func (s *Model) Judge(asked, served string) (ok bool, earlier string) {
	if served == "" {
		return true, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case served == asked:
		s.learned, s.echoes = served, true
		return true, ""
	case s.learned == "":
		s.learned = served
		return true, ""
	case served == s.learned:
		return true, ""
	}
	return false, s.learned
}

// Name is the model learned so far ("" before the first answer), and
// whether the endpoint answers with the name asked for.
func (s *Model) Name() (name string, echoes bool) {
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.learned, s.echoes
}

// Substituted is the model check's message for an answer from a model
// other than the one the endpoint served before.
func Substituted(served, earlier string) string {
	return fmt.Sprintf("served %q, earlier %q", served, earlier)
}
