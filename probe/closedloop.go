package probe

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/workload"
)

// closedLoop keeps the stage's concurrency in flight. A concurrency ramp
// has one worker per request of its highest level, worker k sending only
// while the level in force is above k; without a ramp that is every worker
// all the time.
// Prompts come ready from prompts (nil for sessions, built as they go).
func (r *Run) closedLoop(stop, reqCtx context.Context, index int, st Stage, warmup bool, out chan<- *result.Request, prompts <-chan client.Prompt) {
	limit := st.Requests
	var issued atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	workers := int(math.Round(max(st.Level(), st.RampTo)))
	for k := range workers {
		wg.Go(func() {
			var idle *time.Ticker // made only for a worker the ramp has not reached
			bo := backoff{p: &r.Failure}
			var wait time.Duration // before this worker's next request
			defer func() {
				if idle != nil {
					idle.Stop()
				}
			}()
			// Both contexts are checked: a cancelled parent closes its own
			// Done before it cancels stop, its child, so a request that
			// ended on reqCtx could otherwise see stop still open and send
			// one more request, cancelled at once.
			for stop.Err() == nil && reqCtx.Err() == nil {
				if st.RampTo != 0 && st.LevelAt(time.Since(start)) <= float64(k) {
					if idle == nil {
						idle = time.NewTicker(rampPoll)
					}
					select {
					case <-idle.C:
					case <-stop.Done():
					}
					continue
				}
				// Waits are intended: the next request is scheduled after
				// them, so they are in no latency figure nor dispatch lag.
				// A worker with no request left to send does not wait.
				if wait > 0 {
					if limit > 0 && issued.Load() >= int64(limit) {
						return
					}
					r.pause(stop, wait)
					wait = 0
					continue
				}
				// A Retry-After another worker or run heard holds this one
				// too.
				if d := r.Endpoint.HeldFor(time.Now()); d > 0 {
					wait = d
					continue
				}
				if limit > 0 && issued.Add(1) > int64(limit) {
					return
				}
				last := r.next(stop, reqCtx, index, st, time.Now(), warmup, out, prompts)
				wait = bo.after(last)
			}
		})
	}
	wg.Wait()
}

// next sends the workload's next request, or its next whole session, and
// returns the last request it sent (nil when a session sent none).
// A prompt that is not ready at the scheduled time makes the request late
// by the wait: the probe's own lateness, in dispatch lag.
func (r *Run) next(stop, ctx context.Context, index int, st Stage, scheduled time.Time, warmup bool, out chan<- *result.Request, prompts <-chan client.Prompt) *result.Request {
	if r.Sessions != nil {
		return r.session(stop, ctx, index, st, scheduled, r.Sessions.NextSession(), warmup, out)
	}
	if r.PrefixCache != nil {
		return r.triple(stop, ctx, index, st, scheduled, r.PrefixCache.NextTriple(), warmup, out)
	}
	var p client.Prompt
	select {
	case p = <-prompts:
	case <-stop.Done():
		return nil
	}
	res := r.one(ctx, index, st, scheduled, p, warmup)
	out <- res
	return res
}

// triple sends a prefix-cache probe's three requests one after the other,
// each as soon as the one before it has ended: the warm one finds its
// prefix as fresh in the server's cache as it can be. All three are
// encoded before the first is sent. A request that fails ends the triple
// (its TTFTs cannot be compared); so does the end of the stage. It returns
// the last request it sent.
func (r *Run) triple(stop, ctx context.Context, index int, st Stage, scheduled time.Time, ps [3]client.Prompt, warmup bool, out chan<- *result.Request) (last *result.Request) {
	for i := range ps {
		ps[i].Extra = r.Extra
		_ = client.Encode(r.Endpoint, &ps[i]) // on error Do encodes again and reports it
	}
	for i, p := range ps {
		if i > 0 {
			if stop.Err() != nil || ctx.Err() != nil {
				return last
			}
			scheduled = time.Now()
		}
		res := r.one(ctx, index, st, scheduled, p, warmup)
		out <- res
		last = res
		if !res.Measured() {
			return last
		}
	}
	return last
}

// session sends a session's turns one after the other, each after its
// delay and with the conversation so far: the user's earlier turns and,
// as the assistant's, text of the length each answer had (the probe keeps
// facts, not answers). A turn that fails ends the session, as it would a
// user's; so does the end of the stage, between turns. It returns the last
// turn it sent.
func (r *Run) session(stop, ctx context.Context, index int, st Stage, scheduled time.Time, s workload.Session, warmup bool, out chan<- *result.Request) (last *result.Request) {
	var history []openai.Message
	var words int
	for i, t := range s.Turns {
		if i > 0 {
			scheduled = time.Now().Add(t.Delay)
			if t.Delay > 0 {
				timer := time.NewTimer(t.Delay)
				select {
				case <-timer.C:
				case <-stop.Done():
				}
				timer.Stop()
			}
			if stop.Err() != nil || ctx.Err() != nil {
				return last
			}
		}
		n := len(strings.Fields(t.Text))
		p := client.Prompt{Text: t.Text, History: history, InputTokens: words + n, MaxTokens: t.OutputTokens, Stream: r.Sessions.Streaming(), Expect: t.Expect}
		res := r.one(ctx, index, st, scheduled, p, warmup)
		res.Session, res.Turn = s.ID, i
		out <- res
		last = res
		if !res.Measured() {
			return last
		}
		history = append(history,
			openai.Message{Role: "user", Content: t.Text},
			openai.Message{Role: "assistant", Content: workload.Words(res.ID, res.OutputTokens)})
		words += n + res.OutputTokens
	}
	return last
}
