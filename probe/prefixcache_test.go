package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/stats"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// cachingServer streams a one-word answer after a long wait for a prompt
// whose first 200 bytes it has not seen, a short one for a prompt it has:
// a prefix cache as a test double. The request numbered failOn (from 1)
// gets a 500.
func cachingServer(t *testing.T, cold, warm time.Duration, failOn int64) *httptest.Server {
	var mu sync.Mutex
	seen := map[string]bool{}
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if n.Add(1) == failOn {
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
			return
		}
		text := body.Messages[len(body.Messages)-1].Content
		prefix := text[:min(200, len(text))]
		mu.Lock()
		hit := seen[prefix]
		seen[prefix] = true
		mu.Unlock()
		if hit {
			time.Sleep(warm)
		} else {
			time.Sleep(cold)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word\"}}]}\n\n")
		fmt.Fprint(w, "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A prefix-cache run sends each triple's three requests one after the
// other (cold, warm, fresh, one id), and judges the cache by their TTFTs;
// a failed request ends its triple, which is then left out.
func TestPrefixCacheRun(t *testing.T) {
	srv := cachingServer(t, 40*time.Millisecond, 2*time.Millisecond, 2)
	run := runAgainst(t, srv.URL+"/v1", Plan{Stages: []Stage{{Concurrency: 1, Requests: 5}}}, Failure{})
	run.PrefixCache = workload.NewPrefixCache(64, workload.Lengths{Mean: 1}, true, 1.25)
	rec := &recorder{}
	run.Sinks = []Sink{rec}
	s, err := run.Execute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The first triple: cold, then its warm request fails; no fresh.
	if len(rec.seen) != 2+3*4 {
		t.Fatalf("%d requests, want 14 (a triple cut at its failed warm request, four whole)", len(rec.seen))
	}
	phases := []result.CachePhase{result.CacheCold, result.CacheWarm, result.CacheCold, result.CacheWarm, result.CacheFresh}
	for i, r := range rec.seen[:5] {
		if r.CachePhase != phases[i] {
			t.Fatalf("request %d is %s, want %s", i, r.CachePhase, phases[i])
		}
	}
	for i := 2; i < len(rec.seen); i += 3 {
		a, b, c := rec.seen[i], rec.seen[i+1], rec.seen[i+2]
		if a.CacheTriple != b.CacheTriple || b.CacheTriple != c.CacheTriple || a.CacheTriple == rec.seen[0].CacheTriple {
			t.Fatalf("triple ids %d %d %d (the cut one's %d)", a.CacheTriple, b.CacheTriple, c.CacheTriple, rec.seen[0].CacheTriple)
		}
		if !b.Start.After(a.End) || !c.Start.After(b.End) {
			t.Fatal("a triple's requests overlap: each must wait for the one before it")
		}
	}
	pc := s.PrefixCache
	if pc == nil || pc.Triples != 4 || pc.Verdict != stats.CacheWorking || pc.WarmTTFT >= pc.ColdTTFT {
		t.Fatalf("prefix cache %+v: want 4 triples, working", pc)
	}
}
