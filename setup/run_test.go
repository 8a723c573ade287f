package setup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenprobe/tokenprobe/config"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/tokenizer"
)

// workload.tokenizer makes every synthetic prompt exactly its drawn
// length in the tokenizer's tokens.
func TestTokenizerSizesPromptsExactly(t *testing.T) {
	dir := t.TempDir()
	tk, err := os.ReadFile("../probe/tokenizer/testdata/tiny-bpe.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tk, 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
endpoints: [{name: sim, simulator: {}}]
profiles:
  - name: p
    endpoints: [sim]
    workload:
      tokenizer: tokenizer.json
      input_tokens: {mean: 300, stddev: 40}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewRun(cfg.Profiles[0], &client.Endpoint{Name: "sim"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := tokenizer.Shared(filepath.Join(dir, "tokenizer.json"))
	differs := false
	for range 20 {
		p := run.Workload.Next()
		n, err := h.Count(p.Text)
		if err != nil || n != p.InputTokens {
			t.Fatalf("prompt says %d tokens, the tokenizer counts %d (%v)", p.InputTokens, n, err)
		}
		differs = differs || n != 300
	}
	if !differs {
		t.Error("every prompt was 300 tokens: the lengths' spread was lost")
	}
}
