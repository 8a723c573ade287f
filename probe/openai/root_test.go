package openai

import "testing"

// aiperf's --url names a server's root: the write-ups' command lines give
// http://host:8000 and the like, and aiperf's endpoint paths carry /v1.
func TestBaseOfRoot(t *testing.T) {
	for _, c := range []struct {
		api       API
		raw, want string
	}{
		{Chat, "http://inference-server:8000", "http://inference-server:8000/v1"},
		{Chat, "http://localhost:11434/", "http://localhost:11434/v1"},
		{Chat, "localhost:8000", "http://localhost:8000/v1"},
		{Chat, "http://localhost:8000/v1", "http://localhost:8000/v1"},
		{Chat, "https://gw.example.com/openai/v1", "https://gw.example.com/openai/v1"},
		{Chat, "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21"},
		{Chat, "http://h:8000?key=v", "http://h:8000/v1?key=v"},
		{Messages, "https://api.anthropic.com", "https://api.anthropic.com/v1"},
		{KServeGenerate, "http://triton:8000", "http://triton:8000"},
	} {
		if got := Of(c.api).BaseOfRoot(c.raw); got != c.want {
			t.Errorf("%s %q: %q, want %q", c.api, c.raw, got, c.want)
		}
	}
}
