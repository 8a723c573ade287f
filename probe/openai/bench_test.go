package openai

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tokenprobe/tokenprobe/probe/sse"
)

// A vLLM-shaped content chunk, the common case on the hot path.
const benchChunk = `data: {"id":"chatcmpl-9f1c2a","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n"

// BenchmarkStreamPerChunk is the client's per-chunk work: frame the SSE
// event and parse its JSON. Reported per chunk.
func BenchmarkStreamPerChunk(b *testing.B) {
	const perBody = 1000
	body := strings.Repeat(benchChunk, perBody)
	src := strings.NewReader(body)
	r := sse.NewReader(src, 0)
	var c Chunk
	b.SetBytes(int64(len(benchChunk)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		src.Reset(body)
		r.Reset(src)
		for ; i < b.N; i++ {
			ev, err := r.Next()
			if err != nil {
				break
			}
			if err := ParseChunk(ev.Data, &c); err != nil || !c.Content {
				b.Fatal("bad chunk")
			}
		}
	}
}

func BenchmarkParseChunk(b *testing.B) {
	data := bytes.TrimSuffix(bytes.TrimPrefix([]byte(benchChunk), []byte("data: ")), []byte("\n\n"))
	var c Chunk
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		_ = ParseChunk(data, &c)
	}
}
