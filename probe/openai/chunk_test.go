package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tokenprobe/tokenprobe/probe/sse"
)

// transcript sums what a whole recorded stream says, chunk by chunk.
type transcript struct {
	content, reasoning, finished, errors, toolCalls int
	usage                                           bool
	prompt, completion, cached                      int
	done, errorEvent, end                           bool
	finish                                          string
}

// apiOf is the API a recorded stream speaks, by its file's name.
// Parse reads one streamed event's data of api into c, as the client does.
func Parse(api API, data []byte, c *Chunk) error { return Of(api).Event(data, c) }

// ParseWhole reads a whole response of api into c, as the client does.
func ParseWhole(api API, data []byte, c *Chunk) error { return Of(api).Whole(data, c) }

func apiOf(name string) API {
	switch {
	case strings.Contains(name, "messages"), strings.Contains(name, "anthropic"):
		return Messages
	case strings.Contains(name, "responses"):
		return Responses
	}
	return Chat
}

// openEvents reads a recorded stream's events; the file closes with the
// test.
func openEvents(t *testing.T, path string) *sse.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return sse.NewReader(f, 0)
}

func readTranscript(t *testing.T, path string) transcript {
	t.Helper()
	r := openEvents(t, path)
	var sum transcript
	var c Chunk
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return sum
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if string(ev.Name) == "error" {
			sum.errorEvent = true
			continue
		}
		if bytes.Equal(ev.Data, []byte("[DONE]")) {
			sum.done = true
			continue
		}
		if err := Parse(apiOf(path), ev.Data, &c); err != nil {
			t.Fatalf("%s: chunk %q: %v", path, ev.Data, err)
		}
		if c.ToolCall {
			sum.toolCalls++
		}
		if c.End {
			sum.end = true
		}
		if c.FinishReason != nil {
			sum.finish = string(c.FinishReason)
		}
		if c.Content {
			sum.content++
		}
		if c.Reasoning {
			sum.reasoning++
		}
		if c.Finished {
			sum.finished++
		}
		if c.Error {
			sum.errors++
		}
		if c.Usage {
			// As the client merges usage: a later count replaces an
			// earlier one, a missing count keeps it.
			sum.usage = true
			if c.PromptTokens > 0 {
				sum.prompt = c.PromptTokens
			}
			if c.CompletionTokens > 0 {
				sum.completion = c.CompletionTokens
			}
			if c.CachedTokens > 0 {
				sum.cached = c.CachedTokens
			}
		}
	}
}

func TestServerTranscripts(t *testing.T) {
	cases := map[string]transcript{
		// vLLM: a role-only first chunk with empty content, a finish chunk
		// with empty content, then a usage-only chunk with no choices.
		"vllm_chat.sse": {content: 3, finished: 1, usage: true, prompt: 12, completion: 4, done: true, finish: "length"},
		// llama.cpp server: CRLF framing, null content on the role chunk,
		// usage and timings on the finish chunk.
		"llamacpp_chat.sse": {content: 2, finished: 1, usage: true, prompt: 9, completion: 2, done: true, finish: "stop"},
		// Ollama: role repeated on every chunk, usage after the finish.
		"ollama_chat.sse": {content: 3, finished: 1, usage: true, prompt: 26, completion: 3, done: true, finish: "stop"},
		// TGI: `data:` without a space, "usage": null until the end, the
		// last token and the finish_reason in the same chunk.
		"tgi_chat.sse":         {content: 3, finished: 1, usage: true, prompt: 7, completion: 3, done: true, finish: "length"},
		"vllm_completions.sse": {content: 2, finished: 1, usage: true, prompt: 5, completion: 4, done: true, finish: "length"},
		// Reasoning models: reasoning_content (older vLLM) and reasoning
		// (newer) are reasoning chunks, not output.
		"vllm_reasoning.sse":  {content: 1, reasoning: 2, finished: 1, done: true, finish: "stop"},
		"vllm_error.sse":      {content: 1, errors: 1},
		"tgi_error_event.sse": {errorEvent: true},
		// Messages: thinking is reasoning, text_delta output, message_stop
		// the end; usage from message_start and message_delta.
		"vllm_messages.sse": {content: 2, reasoning: 2, finished: 1, usage: true, prompt: 14, completion: 9, end: true, finish: "stop"},
		// Anthropic: a ping, a tool_use block's name and input_json_delta
		// pieces are output (an empty piece is not); the input count
		// comes from message_start alone.
		"anthropic_messages_tool_use.sse": {content: 5, toolCalls: 3, finished: 1, usage: true, prompt: 472, completion: 89, end: true, finish: "tool_calls"},
		"anthropic_overloaded.sse":        {content: 1, usage: true, prompt: 12, completion: 1, errorEvent: true},
		// Responses: the done events and response.completed repeat the
		// text and are not content.
		"openai_responses.sse": {content: 2, finished: 1, usage: true, prompt: 37, completion: 11, end: true, finish: "stop"},
		// A capped answer ends incomplete: finished, finish reason length.
		"vllm_responses_reasoning_tool.sse": {content: 3, reasoning: 2, toolCalls: 3, finished: 1, usage: true, prompt: 80, completion: 16, end: true, finish: "length"},
		"openai_responses_failed.sse":       {errors: 1, end: true},
		// A real llama-server (de3ff81), every API it serves: the prompt's
		// length as the server bills it, its cached part apart. Messages
		// counts 1 input token beside 15 read from the prompt cache: 16,
		// as chat says of the same prompt.
		"llamacpp_de3ff81_chat.sse":        {content: 4, finished: 1, usage: true, prompt: 16, completion: 4, cached: 6, done: true, finish: "length"},
		"llamacpp_de3ff81_completions.sse": {content: 4, finished: 1, usage: true, prompt: 3, completion: 4, cached: 1, done: true, finish: "length"},
		"llamacpp_de3ff81_messages.sse":    {content: 4, finished: 1, usage: true, prompt: 16, completion: 4, cached: 15, end: true, finish: "length"},
		// Its Responses API calls an answer cut at max_output_tokens
		// completed, where OpenAI says incomplete: finish stop.
		"llamacpp_de3ff81_responses.sse": {content: 4, finished: 1, usage: true, prompt: 16, completion: 4, cached: 15, end: true, finish: "stop"},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			got := readTranscript(t, filepath.Join("testdata", name))
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestParseChunkRejectsMalformed(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"choices":[{"delta":{"content":"a"}}]`, `{"choices":[{"delta":{"content":"a}}]}`,
		`[]`, `"x"`, `{"choices":[{"delta":{"content":"a"}}]} trailing`, `{"a":tru}`,
		`{"usage":{"completion_tokens":"x"}}`, `{"a":1,}`, "{\"a\":\"\x01\"}",
	} {
		var c Chunk
		if err := ParseChunk([]byte(in), &c); err == nil {
			t.Errorf("ParseChunk(%q) accepted malformed input: %+v", in, c)
		}
	}
}

// reference computes the same facts with encoding/json, the slow and
// obviously-right way, so the hand-written scanner can be held to it. It
// walks a generic map because struct decoding matches keys without regard to
// case. ok is false for input the scanner need not agree on: invalid JSON,
// duplicate keys, and token counts that are not plain non-negative integers.
func reference(data []byte) (c Chunk, ok bool) {
	if !json.Valid(data) || hasDuplicateKeys(data) {
		return Chunk{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return Chunk{}, false
	}
	top, isObj := v.(map[string]any)
	if !isObj {
		return Chunk{}, false
	}
	nonEmpty := func(m map[string]any, k string) bool { s, _ := m[k].(string); return s != "" }
	choices, _ := top["choices"].([]any)
	for _, ch := range choices {
		m, _ := ch.(map[string]any)
		for _, k := range []string{"delta", "message"} {
			if d, _ := m[k].(map[string]any); d != nil {
				c.Content = c.Content || nonEmpty(d, "content")
				c.Reasoning = c.Reasoning || nonEmpty(d, "reasoning_content") || nonEmpty(d, "reasoning")
				calls, _ := d["tool_calls"].([]any)
				for _, tc := range calls {
					call, _ := tc.(map[string]any)
					if fn, _ := call["function"].(map[string]any); fn != nil && (nonEmpty(fn, "name") || nonEmpty(fn, "arguments")) {
						c.Content, c.ToolCall = true, true
					}
				}
			}
		}
		c.Content = c.Content || nonEmpty(m, "text")
		if fr, present := m["finish_reason"]; present && fr != nil {
			c.Finished = true
			if s, isStr := fr.(string); isStr {
				c.FinishReason = []byte(s)
			}
		}
	}
	if u, _ := top["usage"].(map[string]any); u != nil {
		for k, dst := range map[string]*int{"prompt_tokens": &c.PromptTokens, "completion_tokens": &c.CompletionTokens} {
			raw, present := u[k]
			if !present {
				continue
			}
			c.Usage = true
			if raw == nil {
				continue
			}
			n, isNum := raw.(json.Number)
			if !isNum || len(n) > 9 || strings.Trim(string(n), "0123456789") != "" {
				return Chunk{}, false
			}
			*dst, _ = strconv.Atoi(string(n))
		}
		if d, _ := u["prompt_tokens_details"].(map[string]any); d != nil {
			if raw, present := d["cached_tokens"]; present && raw != nil {
				n, isNum := raw.(json.Number)
				if !isNum || len(n) > 9 || strings.Trim(string(n), "0123456789") != "" {
					return Chunk{}, false
				}
				c.CachedTokens, _ = strconv.Atoi(string(n))
			}
		}
	}
	if e, present := top["error"]; present && e != nil {
		c.Error = true
	}
	if o, _ := top["object"].(string); o == "error" {
		c.Error = true
	}
	if m, isStr := top["model"].(string); isStr {
		c.Model = []byte(m)
	}
	return c, true
}

// unescaped is a raw JSON string's bytes as encoding/json decodes them.
func unescaped(t *testing.T, raw []byte) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		t.Fatalf("raw string %q: %v", raw, err)
	}
	return s
}

// depth is how deeply valid JSON nests its objects and arrays.
func depth(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	d, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			d++
			deepest = max(deepest, d)
		case json.Delim('}'), json.Delim(']'):
			d--
		}
	}
}

// hasDuplicateKeys reports whether any object in valid JSON repeats a key.
func hasDuplicateKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		keys     map[string]bool
		isObject bool
		wantKey  bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.isObject && top.wantKey {
			if k, isKey := tok.(string); isKey {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			if top != nil && top.isObject {
				top.wantKey = true
			}
			stack = append(stack, &frame{keys: map[string]bool{}, isObject: true, wantKey: true})
			continue
		case json.Delim('['):
			if top != nil && top.isObject {
				top.wantKey = true
			}
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if top != nil && top.isObject {
			top.wantKey = true
		}
	}
}

func agree(t *testing.T, data []byte) {
	want, ok := reference(data)
	if !ok {
		return // invalid for encoding/json: the scanner may be more lenient
	}
	var got Chunk
	err := ParseChunk(data, &got)
	if errors.Is(err, ErrTooDeep) && depth(data) > MaxDepth {
		return // encoding/json allows 10,000 levels; the scanner MaxDepth
	}
	if err != nil {
		t.Fatalf("ParseChunk(%q): %v; encoding/json accepts it", data, err)
	}
	got.ContentBytes = 0
	if m, fr := unescaped(t, got.Model), unescaped(t, got.FinishReason); m != string(want.Model) || fr != string(want.FinishReason) {
		t.Fatalf("ParseChunk(%q): model %q finish_reason %q, want %q %q", data, m, fr, want.Model, want.FinishReason)
	}
	got.Model, got.FinishReason, want.Model, want.FinishReason = nil, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseChunk(%q)\n got %+v\nwant %+v", data, got, want)
	}
}

func FuzzParseChunk(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.sse")
	for _, name := range files {
		b, _ := os.ReadFile(name)
		for _, line := range bytes.Split(b, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				f.Add(bytes.TrimSpace(d))
			}
		}
	}
	f.Add([]byte(`{"choices":[{"message":{"content":"x"}},{"delta":{"reasoning":""},"text":"y"}],"error":null}`))
	f.Add([]byte(`{"choices":null,"usage":{"prompt_tokens":3.0,"completion_tokens":null}}`))
	f.Add([]byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":"}},{"function":null},7]}}]}`))
	f.Add(nested(MaxDepth))
	f.Add(nested(MaxDepth + 1))
	f.Add(append([]byte(`{"error":`), bytes.Repeat([]byte(`{"a":[`), 300)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, data)
	})
}

func TestParseChunkDoesNotAllocate(t *testing.T) {
	data := []byte(`{"id":"chatcmpl-9f1c","object":"chat.completion.chunk","created":1718000000,"model":"m","choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`)
	var c Chunk
	if n := testing.AllocsPerRun(100, func() { _ = ParseChunk(data, &c) }); n != 0 {
		t.Fatalf("%v allocations per chunk, want 0", n)
	}
}

// TestStrStopsAtTheFirstSpecialByte holds the eight-bytes-at-a-time string
// scan to a byte-at-a-time one: for every byte value that can end a run of
// plain bytes, at every offset across two words, after plain bytes of every
// kind (ASCII on either side of the special ones, UTF-8, 0x7f, 0xff), the
// scan must stop at that byte and not at a later or an earlier one.
func TestStrStopsAtTheFirstSpecialByte(t *testing.T) {
	// want is what str returns by the definition: the raw bytes up to the
	// first unescaped quote, nil at a control character or the end.
	want := func(b []byte) []byte {
		for i := 1; i < len(b); i++ {
			switch c := b[i]; {
			case c == '"':
				return b[1:i]
			case c == '\\':
				i++
			case c < 0x20:
				return nil
			}
		}
		return nil
	}
	fills := []byte{' ', '!', '#', '[', ']', 'a', 0x7f, 0x80, 0xc3, 0xff}
	stops := []byte{'"', '\\', 0x00, 0x01, 0x1f}
	for _, fill := range fills {
		for _, stop := range stops {
			for off := 0; off < 20; off++ {
				for tail := 0; tail < 10; tail++ {
					b := []byte{'"'}
					b = append(b, bytes.Repeat([]byte{fill}, off)...)
					b = append(b, stop)
					b = append(b, bytes.Repeat([]byte{fill}, tail)...)
					b = append(b, '"') // a scan that missed the stop ends here
					s := scanner{b: b}
					got, exp := s.str(), want(b)
					if (got == nil) != (exp == nil) || !bytes.Equal(got, exp) {
						t.Fatalf("str(%q) = %q, want %q", b, got, exp)
					}
					if exp != nil && s.i != len(exp)+2 {
						t.Fatalf("str(%q) left the scanner at %d, want %d", b, s.i, len(exp)+2)
					}
				}
			}
		}
	}
}

// nested returns a chunk whose "x" member opens depth arrays.
func nested(depth int) []byte {
	b := []byte(`{"choices":[{"delta":{"content":"hi"}}],"x":`)
	b = append(b, bytes.Repeat([]byte("["), depth)...)
	b = append(b, bytes.Repeat([]byte("]"), depth)...)
	return append(b, '}')
}

// A server can nest a payload as deeply as its body allows. The scanner
// must answer with an error, on a small stack: this test bounds the stack
// of the whole test binary, so that recursion without a bound fails here
// (as a crash of the test) instead of exhausting the machine.
func TestDeepNestingIsAnErrorOnABoundedStack(t *testing.T) {
	old := debug.SetMaxStack(4 << 20)
	defer debug.SetMaxStack(old)

	var c Chunk
	if err := ParseChunk(nested(MaxDepth), &c); err != nil || !c.Content {
		t.Fatalf("nesting of %d levels: %v, content %v; want it parsed", MaxDepth, err, c.Content)
	}
	for _, depth := range []int{MaxDepth + 1, 10_000, 1 << 20, 20 << 20} {
		err := ParseChunk(nested(depth), &c)
		if !errors.Is(err, ErrTooDeep) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("nesting of %d levels: %v, want ErrTooDeep", depth, err)
		}
	}
	// Objects nest through skip as arrays do, and a truncated body that
	// never closes its brackets is refused the same way.
	obj := append([]byte(`{"x":`), bytes.Repeat([]byte(`{"a":`), 1<<20)...)
	if err := ParseChunk(obj, &c); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("nested objects: %v, want ErrTooDeep", err)
	}
}

// An answer kept as its chunks is read back as AIPerf reads it: output and
// reasoning text, from chat deltas, completions and whole messages; chunks
// without text add nothing.
func TestAnswerText(t *testing.T) {
	chunks := []string{
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`,
		`{"choices":[{"delta":{"reasoning_content":"think "}}]}`,
		`{"choices":[{"delta":{"content":"the \"answer\""}}]}`,
		`{"choices":[{"text":" and more"}]}`,
		`{"choices":[],"usage":{"completion_tokens":9}}`,
		`{"choices":[{"message":{"content":" whole"}}]}`,
		"not json",
	}
	raw := []byte(strings.Join(chunks, "\x00") + "\x00")
	if got, want := AnswerText(Chat, raw), `think the "answer" and more whole`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// A streamed tool call is output: its name and argument pieces make the
// chunk content (so TTFT and the stream's end see it), without
// allocating; read back, the pieces join by index into calls.
func TestToolCalls(t *testing.T) {
	var c Chunk
	for _, tc := range []struct {
		data    string
		content bool
		bytes   int
	}{
		{`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`, true, 0},
		{`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`, true, 10},
		{`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]}`, false, 0},
		{`{"choices":[{"delta":{"tool_calls":[]},"finish_reason":"tool_calls"}]}`, false, 0},
		{`{"choices":[{"delta":{"tool_calls":null}}]}`, false, 0},
		{`{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`, true, 2},
	} {
		if err := ParseChunk([]byte(tc.data), &c); err != nil {
			t.Fatalf("%s: %v", tc.data, err)
		}
		if c.Content != tc.content || c.ToolCall != tc.content || c.ContentBytes != tc.bytes {
			t.Errorf("%s: content %v tool call %v bytes %d, want %v %v %d", tc.data, c.Content, c.ToolCall, c.ContentBytes, tc.content, tc.content, tc.bytes)
		}
	}
	data := []byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`)
	if n := testing.AllocsPerRun(100, func() { _ = ParseChunk(data, &c) }); n != 0 {
		t.Errorf("%v allocations per tool call chunk", n)
	}

	chunks := []string{
		`{"choices":[{"delta":{"reasoning_content":"let me call"}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"get_weather","arguments":""}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"get_time","arguments":"{}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":99,"function":{"name":"far","arguments":"{}"}}]}}]}`,
	}
	a := ParseAnswer(Chat, []byte(strings.Join(chunks, "\x00")+"\x00"))
	want := []ToolCall{{"get_weather", `{"city":"Paris"}`}, {"get_time", "{}"}, {"far", "{}"}}
	if a.Text != "" || a.Reasoning != "let me call" || !slices.Equal(a.ToolCalls, want) {
		t.Errorf("%+v, want no text, the reasoning and calls %+v", a, want)
	}
	whole := ParseAnswer(Chat, []byte(`{"choices":[{"message":{"content":"ok","tool_calls":[{"function":{"name":"f","arguments":"{}"}},{"function":{"name":"g","arguments":"[]"}}]}}]}`+"\x00"))
	if want := []ToolCall{{"f", "{}"}, {"g", "[]"}}; whole.Text != "ok" || !slices.Equal(whole.ToolCalls, want) {
		t.Errorf("a whole message: %+v, want text ok and calls %+v", whole, want)
	}
}

// keptAnswer reads a recorded stream as the client keeps an answer: each
// event's data followed by a 0 byte.
func keptAnswer(t *testing.T, path string) []byte {
	t.Helper()
	r := openEvents(t, path)
	var kept []byte
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return kept
		}
		if err != nil {
			t.Fatal(err)
		}
		kept = append(append(kept, ev.Data...), 0)
	}
}

// Every API's answer reads back the same: its text, its reasoning apart,
// its tool calls with their pieces joined.
func TestParseAnswerOfEveryAPI(t *testing.T) {
	for name, want := range map[string]Answer{
		"vllm_messages.sse":                 {Text: "Paris.", Reasoning: "The user asks for a capital."},
		"anthropic_messages_tool_use.sse":   {Text: "Okay, let me check the weather.", ToolCalls: []ToolCall{{"get_weather", `{"location": "San Francisco, CA"}`}}},
		"openai_responses.sse":              {Text: "Hi there!"},
		"vllm_responses_reasoning_tool.sse": {Reasoning: "Need the weather tool.", ToolCalls: []ToolCall{{"get_weather", `{"city":"Paris"}`}}},
		"vllm_reasoning.sse":                {Text: readAnswerText(t, "vllm_reasoning.sse"), Reasoning: ParseAnswer(Chat, keptAnswer(t, "testdata/vllm_reasoning.sse")).Reasoning},
	} {
		got := ParseAnswer(apiOfFile(name), keptAnswer(t, filepath.Join("testdata", name)))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	// Whole responses of each API.
	for api, body := range map[API]string{
		Messages:  `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Paris."},{"type":"tool_use","id":"t","name":"f","input":{"a":1}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":7}}`,
		Responses: `{"id":"r","object":"response","status":"completed","model":"m","output":[{"type":"reasoning","content":[{"type":"reasoning_text","text":"hm"}],"summary":[]},{"type":"message","content":[{"type":"output_text","text":"Paris."}]},{"type":"function_call","name":"f","arguments":"{\"a\":1}"}],"usage":{"input_tokens":5,"output_tokens":7}}`,
	} {
		want := Answer{Text: "Paris.", Reasoning: "hm", ToolCalls: []ToolCall{{"f", `{"a":1}`}}}
		if got := ParseAnswer(api, []byte(body+"\x00")); !reflect.DeepEqual(got, want) {
			t.Errorf("a whole %s response: %+v, want %+v", api, got, want)
		}
		var c Chunk
		if err := ParseWhole(api, []byte(body), &c); err != nil || !c.Content || !c.Reasoning || !c.ToolCall || !c.Finished ||
			c.PromptTokens != 5 || c.CompletionTokens != 7 || string(c.Model) != "m" {
			t.Errorf("a whole %s response: %+v, %v", api, c, err)
		}
	}
}

func readAnswerText(t *testing.T, name string) string {
	return ParseAnswer(apiOfFile(name), keptAnswer(t, filepath.Join("testdata", name))).Text
}

// apiOfFile is the API a recorded stream's file name says it is of.
func apiOfFile(name string) API {
	switch {
	case strings.Contains(name, "messages"):
		return Messages
	case strings.Contains(name, "responses"):
		return Responses
	case strings.Contains(name, "completions"):
		return Completions
	}
	return Chat
}

// The event readers allocate nothing, as the chat scanner does.
func TestEventReadersDoNotAllocate(t *testing.T) {
	for api, data := range map[API]string{
		Messages:       `{"index":1,"type":"content_block_delta","delta":{"type":"text_delta","text":"Paris"}}`,
		Responses:      `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_67c","output_index":0,"content_index":0,"delta":" there!","logprobs":[]}`,
		KServeGenerate: `{"model_name":"ensemble","model_version":"1","text_output":" there","num_output_tokens":1,"finish_reason":["None"]}`,
	} {
		var c Chunk
		b := []byte(data)
		if n := testing.AllocsPerRun(100, func() { _ = Parse(api, b, &c) }); n != 0 || !c.Content {
			t.Errorf("%s: %v allocations per event (content %v)", api, n, c.Content)
		}
	}
}

// FuzzParseEvents holds the Messages, Responses, embeddings and KServe
// generate readers to what encoding/json accepts: valid JSON objects (not
// nested past MaxDepth) parse without error, whatever their members (token
// counts aside: a count that is no plain integer is refused), and nothing
// panics, the answer read back included.
func FuzzParseEvents(f *testing.F) {
	for _, glob := range []string{"testdata/*messages*.sse", "testdata/anthropic*.sse", "testdata/*responses*.sse"} {
		files, _ := filepath.Glob(glob)
		for _, name := range files {
			b, _ := os.ReadFile(name)
			for _, line := range bytes.Split(b, []byte("\n")) {
				if d, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
					f.Add(bytes.TrimSpace(d))
				}
			}
		}
	}
	f.Add([]byte(`{"type":"content_block_delta","delta":"x","content_block":null,"message":[1]}`))
	f.Add([]byte(`{"type":"response.completed","response":{"status":"incomplete","incomplete_details":null,"usage":{"input_tokens":-1}},"delta":{"a":1}}`))
	f.Add([]byte(`{"object":"list","data":[{"embedding":[0.1,-2e-3]},{"embedding":"AAAA"},null,{"embedding":[]}],"usage":{"prompt_tokens":3}}`))
	f.Add([]byte(`{"object":"error","message":"bad \"input\"\u0001","data":[{"embedding":["NaN",null,true,{}],"x\\":[[{}]]}],"model":"m","error":{"code":"invalid_request_error"}}`))
	f.Add([]byte(`{"` + strings.Repeat("k", 300) + `":1,"data":[{"embedding":[1e3,2]},{"embedding":[3]}]}`))
	f.Add([]byte(`{"model_name":"m","model_version":"1","text_output":"a\"b","num_output_tokens":2,"finish_reason":["length"],"error":null}`))
	f.Add([]byte(`{"error":"Executor failed","text_output":null,"finish_reason":"None","num_output_tokens":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, api := range []API{Messages, Responses, Embeddings, KServeGenerate} {
			var c Chunk
			err := Parse(api, data, &c)
			if api == Embeddings {
				err = ParseWhole(api, data, &c)
				streamed(t, data, c, err)
			} else {
				_ = ParseWhole(api, data, &c)
			}
			_ = ParseAnswer(api, append(data, 0))
			valid := json.Valid(data) && bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) && depth(data) <= MaxDepth
			if err != nil && valid && !usageNotPlain(data) {
				t.Fatalf("%s: Parse(%q): %v; encoding/json accepts it", api, data, err)
			}
		}
	})
}

// ReadEmbeddings refuses what it cannot hold: a member kept whole over
// 64 KiB, nesting past MaxDepth in a vector of 8 MB of '['; and says where
// the input was cut.
func TestReadEmbeddingsBounds(t *testing.T) {
	var ch0 Chunk
	for name, c := range map[string]struct {
		body string
		want error
	}{
		"a 100 KiB model": {`{"model":"` + strings.Repeat("m", 100<<10) + `","data":[]}`, ErrMemberTooLarge},
		"8 MB of [":       {`{"data":[{"embedding":[` + strings.Repeat("[", 8<<20), ErrTooDeep},
		"cut":             {`{"data":[{"embedding":[1,2`, ErrMalformed},
	} {
		var ch Chunk
		if err := ReadEmbeddings(strings.NewReader(c.body), &ch); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if err := ReadEmbeddings(io.MultiReader(strings.NewReader(`{"data":[`), emptyReader{}), &ch0); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("a reader that returns nothing: %v, want io.ErrNoProgress", err)
	}
	cut := errors.New("the body limit")
	var ch Chunk
	if err := ReadEmbeddings(io.MultiReader(strings.NewReader(`{"data":[[1,2`), iotest.ErrReader(cut)), &ch); !errors.Is(err, cut) {
		t.Errorf("a read error: %v, want it returned", err)
	}
}

// emptyReader returns nothing, and no error, for ever.
type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

// streamed holds ReadEmbeddings to ParseWhole's reading of data (c, err),
// with the bytes given whole and one at a time: the same chunk, or the
// same error, but where a member kept whole is over its 64 KiB.
func streamed(t *testing.T, data []byte, c Chunk, err error) {
	t.Helper()
	for _, r := range []io.Reader{bytes.NewReader(data), iotest.OneByteReader(bytes.NewReader(data))} {
		var got Chunk
		gotErr := ReadEmbeddings(r, &got)
		if errors.Is(gotErr, ErrMemberTooLarge) && len(data) > maxMember {
			continue
		}
		if !errors.Is(gotErr, err) || err == nil && !reflect.DeepEqual(got, c) {
			t.Fatalf("ReadEmbeddings(%q): %+v, %v; ParseWhole: %+v, %v", data, got, gotErr, c, err)
		}
	}
}

// usageNotPlain reports token counts the scanners refuse (not plain
// non-negative integers), where an error is right.
func usageNotPlain(data []byte) bool {
	for _, k := range []string{`"input_tokens"`, `"output_tokens"`, `"prompt_tokens"`, `"completion_tokens"`, `"num_output_tokens"`} {
		if bytes.Contains(data, []byte(k)) {
			return true
		}
	}
	return false
}

// An embeddings response, in the shape OpenAI's and vLLM's
// /v1/embeddings answer (object list, data of {object, index,
// embedding}, usage with prompt_tokens and total_tokens): its vectors
// counted and measured without allocating, whatever their size.
func TestEmbeddingsResponse(t *testing.T) {
	vec := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("-0.0123,", n), ",") + "]" }
	body := func(vectors ...string) []byte {
		var data []string
		for i, v := range vectors {
			data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, i, v))
		}
		return []byte(`{"object":"list","data":[` + strings.Join(data, ",") + `],"model":"BAAI/bge-m3","usage":{"prompt_tokens":12,"total_tokens":12}}`)
	}
	for name, c := range map[string]struct {
		data          []byte
		vectors, dims int
	}{
		"three of 1024":     {body(vec(1024), vec(1024), vec(1024)), 3, 1024},
		"one empty":         {body(vec(8), "[]"), 2, 0},
		"different lengths": {body(vec(8), vec(4), vec(8)), 3, -1},
		"none":              {body(), 0, 0},
		"not numbers":       {body(vec(4), `["NaN", null, true, {}]`), 2, NotNumbers},
		"not numbers first": {body(`[1, "x"]`, vec(2)), 2, NotNumbers},
	} {
		var ch Chunk
		if err := ParseWhole(Embeddings, c.data, &ch); err != nil || ch.Vectors != c.vectors || ch.Dimensions != c.dims ||
			ch.PromptTokens != 12 || string(ch.Model) != "BAAI/bge-m3" || ch.Content != (c.vectors > 0) {
			t.Errorf("%s: %+v %v", name, ch, err)
		}
	}
	data := body(vec(1024), vec(1024))
	var ch Chunk
	if n := testing.AllocsPerRun(50, func() { _ = ParseWhole(Embeddings, data, &ch) }); n != 0 {
		t.Errorf("%v allocations per embeddings response", n)
	}
}
