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

// vectorsBody is an OpenAI-shaped embeddings response: 8 vectors of
// 1,536 dimensions (text-embedding-3-small's), about 170 KB.
func vectorsBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"object":"list","data":[`)
	for i := range 8 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"object":"embedding","index":0,"embedding":[`)
		for j := range 1536 {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString("-0.0123456789")
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`],"model":"text-embedding-3-small","usage":{"prompt_tokens":64,"total_tokens":64}}`)
	return b.Bytes()
}

// BenchmarkEmbeddingsWhole and BenchmarkEmbeddingsStreamed read the same
// response held whole and as it streams: the CPU per byte of each.
func BenchmarkEmbeddingsWhole(b *testing.B) {
	data := vectorsBody()
	var c Chunk
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := ParseWhole(Embeddings, data, &c); err != nil || c.Vectors != 8 {
			b.Fatal(err)
		}
	}
}

func BenchmarkEmbeddingsStreamed(b *testing.B) {
	data := vectorsBody()
	r := bytes.NewReader(data)
	var c Chunk
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(data)
		if err := ReadEmbeddings(r, &c); err != nil || c.Vectors != 8 {
			b.Fatal(err)
		}
	}
}

// BenchmarkEvent is each API's streamed-event reader through its
// Protocol, on a content event of the shape its servers send.
func BenchmarkEvent(b *testing.B) {
	for _, e := range []struct {
		api  API
		data string
	}{
		{Chat, strings.TrimSuffix(strings.TrimPrefix(benchChunk, "data: "), "\n\n")},
		{Messages, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" token"}}`},
		{Responses, `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67c","output_index":0,"content_index":0,"delta":" token","logprobs":[]}`},
		{KServeGenerate, `{"model_name":"ensemble","model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":" token"}`},
	} {
		b.Run(string(e.api), func(b *testing.B) {
			read := Lookup(e.api).Event
			data := []byte(e.data)
			var c Chunk
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := read(data, &c); err != nil || !c.Content {
					b.Fatal("bad event")
				}
			}
		})
	}
}
