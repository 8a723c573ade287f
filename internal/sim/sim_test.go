package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/timingtest"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func do(s *Server, api openai.API, p client.Prompt) result.Request {
	ep := &client.Endpoint{Name: "sim", BaseURL: s.URL(), API: api, Model: "m", Timeout: 10 * time.Second, IncludeUsage: true}
	var r result.Request
	r.Scheduled = time.Now()
	client.New(client.Options{}).Do(context.Background(), ep, p, &r)
	return r
}

func prompt(words, maxTokens int) client.Prompt {
	return client.Prompt{Text: strings.TrimSpace(strings.Repeat("word ", words)), InputTokens: words, MaxTokens: maxTokens, Stream: true}
}

func TestStreamShapeAndTiming(t *testing.T) {
	s := start(t, Config{Slots: 1, PrefillBase: time.Millisecond, PrefillPerToken: 100 * time.Microsecond, DecodeBase: 5 * time.Millisecond})
	for _, api := range []openai.API{openai.Chat, openai.Completions} {
		// The pace is checked on the median gap, over up to three
		// requests: a test binary not scheduled for a while on a busy
		// machine stretches a gap or two, not the simulator's pace.
		timingtest.Retry(t, 3, func(a *timingtest.Attempt) {
			r := do(s, api, prompt(300, 20))
			if r.Outcome != result.Success {
				t.Fatalf("%s: %v/%v %s", api, r.Outcome, r.Reason, r.Err)
			}
			if r.OutputTokens != 20 || r.OutputSource != result.SourceUsage || r.InputTokens != 300 || r.ContentChunks != 20 {
				t.Fatalf("%s: OSL %d (%v) ISL %d chunks %d", api, r.OutputTokens, r.OutputSource, r.InputTokens, r.ContentChunks)
			}
			// TTFT is at least the prefill: 1 ms + 300 x 0.1 ms.
			if r.TTFT < 31*time.Millisecond {
				t.Errorf("%s: TTFT %v is shorter than the prefill", api, r.TTFT)
			}
			// No gap is much shorter than a decode step, unless the client
			// read two chunks at once after a pause of its own.
			gaps := slices.Sorted(slices.Values(r.Gaps))
			if gaps[0] < 4*time.Millisecond {
				a.Errorf("%s: a gap of %v, shorter than the 5 ms decode step", api, gaps[0])
			}
			if med := gaps[len(gaps)/2]; med > 10*time.Millisecond {
				a.Errorf("%s: median gap %v, want about 5 ms", api, med)
			}
		})
	}
}

func TestNonStreamingAndModels(t *testing.T) {
	s := start(t, Config{DecodeBase: time.Millisecond})
	p := prompt(10, 5)
	p.Stream = false
	r := do(s, openai.Chat, p)
	if r.Outcome != result.Success || r.OutputTokens != 5 || r.InputTokens != 10 {
		t.Fatalf("%v %s OSL %d ISL %d", r.Outcome, r.Err, r.OutputTokens, r.InputTokens)
	}
	resp, err := http.Get(s.URL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "tokenprobe-sim" {
		t.Fatalf("models: %+v %v", list, err)
	}
}

// With 2 slots and 6 requests at once, requests run two at a time in
// arrival order: TTFTs fall into three tiers a request's length apart.
func TestQueueing(t *testing.T) {
	s := start(t, Config{Slots: 2, PrefillBase: time.Millisecond, PrefillPerToken: 1, DecodeBase: 10 * time.Millisecond})
	var mu sync.Mutex
	var ttfts []time.Duration
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := do(s, openai.Chat, prompt(1, 10))
			if r.Outcome != result.Success {
				t.Errorf("%v %s", r.Outcome, r.Err)
			}
			mu.Lock()
			ttfts = append(ttfts, r.TTFT)
			mu.Unlock()
		}()
	}
	// Sample the batch while it runs: never more than 2 running.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	maxRunning := 0
	for {
		select {
		case <-done:
			goto checked
		case <-time.After(time.Millisecond):
			running, _, _, _ := s.Stats()
			maxRunning = max(maxRunning, running)
		}
	}
checked:
	if maxRunning != 2 {
		t.Errorf("max running %d, want 2", maxRunning)
	}
	sort.Slice(ttfts, func(i, j int) bool { return ttfts[i] < ttfts[j] })
	// One request takes ~1 ms prefill + 9 x 10 ms decode = ~91 ms.
	if ttfts[1] > 40*time.Millisecond || ttfts[2] < 80*time.Millisecond || ttfts[4] < 160*time.Millisecond {
		t.Errorf("TTFTs %v do not show two-at-a-time service", ttfts)
	}
}

func TestFaults(t *testing.T) {
	cases := []struct {
		name   string
		f      Faults
		reason result.Reason
	}{
		{"500", Faults{Error500: 1}, result.ReasonServerError},
		{"503", Faults{Error503: 1}, result.ReasonServerError},
		{"429", Faults{Error429: 1}, result.ReasonRateLimit},
		{"disconnect", Faults{Disconnect: 1}, result.ReasonStream},
		{"malformed", Faults{Malformed: 1}, result.ReasonStream},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := start(t, Config{DecodeBase: time.Millisecond, Faults: c.f})
			r := do(s, openai.Chat, prompt(5, 10))
			if r.Outcome != result.Error || r.Reason != c.reason {
				t.Fatalf("got %v/%v (%s), want error/%v", r.Outcome, r.Reason, r.Err, c.reason)
			}
			if c.name == "429" && !strings.Contains(r.Err, "Retry-After: 1") {
				t.Errorf("429 without Retry-After: %s", r.Err)
			}
			if _, _, _, faults := s.Stats(); faults != 1 {
				t.Errorf("%d faults counted, want 1", faults)
			}
		})
	}
	t.Run("stall", func(t *testing.T) {
		s := start(t, Config{DecodeBase: time.Millisecond, Faults: Faults{Stall: 1, StallFor: 300 * time.Millisecond}})
		r := do(s, openai.Chat, prompt(5, 10))
		if r.Outcome != result.Success || r.Gaps[4] < 300*time.Millisecond {
			t.Fatalf("stall: %v gaps %v", r.Outcome, r.Gaps)
		}
	})
}

// The same seed gives the same faults in the same order.
func TestFaultsAreSeeded(t *testing.T) {
	outcomes := func() string {
		s := start(t, Config{Seed: 7, DecodeBase: time.Microsecond, Faults: Faults{Error500: 0.3, Malformed: 0.3}})
		var b strings.Builder
		for range 30 {
			r := do(s, openai.Chat, prompt(1, 4))
			b.WriteString(r.Reason.String() + ",")
		}
		return b.String()
	}
	a, b := outcomes(), outcomes()
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "server_error") || !strings.Contains(a, "stream") {
		t.Fatalf("30 requests at 30%% each drew no faults: %s", a)
	}
}

func TestBadRequests(t *testing.T) {
	s := start(t, Config{})
	for _, body := range []string{`{`, `{"model":"m","messages":[]}`} {
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, resp.StatusCode)
		}
	}
	if _, err := NewHandler(Config{Faults: Faults{Stall: 2}}); err == nil {
		t.Error("a probability of 2 was accepted")
	}
}

func TestCountFieldsIsLenOfFields(t *testing.T) {
	pieces := []string{"a", "word", " ", "  ", "\t", "\n", "\v\f\r", "é", "\u00a0", "\u0085", "\u2003", "日本", "\xff", ""}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := countFields(s), len(strings.Fields(s)); got != want {
			t.Fatalf("countFields(%q) = %d, strings.Fields has %d", s, got, want)
		}
	}
}

// BenchmarkCountFields is the simulator's word count of a 20,000-word
// trace prompt (docs/BENCHMARKS.md, trace replay).
func BenchmarkCountFields(b *testing.B) {
	s := strings.Repeat("word ", 20000)
	b.ReportAllocs()
	for b.Loop() {
		countFields(s)
	}
}

// The simulator closes a connection kept idle past its keep-alive, as
// llama.cpp's server and uvicorn (vLLM, SGLang) do after 5 s, so that a
// client's handling of kept connections found closed is tested against
// it; in bench mode it keeps them, as the benchmarks measure the client.
func TestIdleConnectionsAreClosedAsRealServersDo(t *testing.T) {
	if got := idleTimeout(Config{}); got != DefaultKeepAlive || DefaultKeepAlive != 5*time.Second {
		t.Errorf("default keep-alive %v (DefaultKeepAlive %v), want 5s", got, DefaultKeepAlive)
	}
	// idleFor sends one request on a new connection and says how long
	// the connection then stayed open, waiting at most wait.
	idleFor := func(s *Server, wait time.Duration) (time.Duration, bool) {
		t.Helper()
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("status %d, close %v, %v", resp.StatusCode, resp.Close, err)
		}
		idle := time.Now()
		_ = c.SetReadDeadline(idle.Add(wait))
		_, err = c.Read(make([]byte, 1))
		return time.Since(idle), errors.Is(err, io.EOF)
	}
	s := start(t, Config{Slots: 1, DecodeBase: time.Millisecond, KeepAlive: 100 * time.Millisecond})
	if d, closed := idleFor(s, 10*time.Second); !closed || d < 90*time.Millisecond {
		t.Errorf("closed %v after %v idle, want closed after about 100ms", closed, d)
	}
	for _, cfg := range []Config{{Bench: true, DecodeBase: time.Millisecond}, {Slots: 1, DecodeBase: time.Millisecond, KeepAlive: -1}} {
		if d, closed := idleFor(start(t, cfg), 300*time.Millisecond); closed {
			t.Errorf("bench %v, keep-alive %v: closed after %v idle, want kept", cfg.Bench, cfg.KeepAlive, d)
		}
	}
}
