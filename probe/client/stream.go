package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"strings"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/apierror"
	"github.com/tokenprobe/tokenprobe/probe/openai"
	"github.com/tokenprobe/tokenprobe/probe/result"
	"github.com/tokenprobe/tokenprobe/probe/sse"
)

// streamReader is what reading one stream reuses: the SSE reader, and the
// chunk an API's reader fills. The chunk lives here, not on readStream's
// stack: passed to a reader through its Protocol (a function value), it
// would move to the heap, an allocation per request.
//
// The SSE reader lives here by value as well, and bounds the body itself
// (sse.Reader.Bound): at wide levels a stream's objects and stack frames
// have gone cold in the seconds between its chunks, and each separate one
// a chunk passes through is a cache miss of its own (docs/BENCHMARKS.md,
// issue 48's ninth and fifteenth rounds).
type streamReader struct {
	sse   sse.Reader
	chunk openai.Chunk
}

// readStream reads a streamed answer from body, bounded to c.maxBody bytes.
func (c *Client) readStream(q call, api *openai.Protocol, body io.Reader, r *result.Request, p Prompt) {
	sr := c.readers.Get().(*streamReader)
	rd, chunk := &sr.sse, &sr.chunk
	rd.Reset(body)
	rd.Bound(c.maxBody, errBodyTooLarge)
	defer func() {
		rd.Reset(nil) // no body held by the pool
		c.readers.Put(sr)
	}()

	if p.MaxTokens > 0 && cap(r.Gaps) == 0 {
		r.Gaps = make([]time.Duration, 0, min(p.MaxTokens, 8192))
	}
	var (
		first, last            time.Time
		done, finished, served bool
		usage                  openai.Chunk
		limit                  = chunkLimit(p.MaxTokens)
		// What each chunk updates of the record, kept here and written
		// back when the stream ends (flush): at wide levels the record
		// has gone cold in the seconds between a stream's chunks, and
		// the load of r.ContentChunks was the first cache miss of each
		// chunk (docs/BENCHMARKS.md, how to read the figures).
		n, gaps, hasTTFO = r.ContentChunks, r.Gaps, r.HasTTFO
	)
	flush := func() { r.ContentChunks, r.Gaps = n, gaps }
	// end ends a stream that broke off, keeping what it measured before.
	end := func(err error) {
		flush()
		c.endStream(q, r, last, err)
	}
	for {
		ev, err := rd.Next()
		// Stamp before anything else: this is the moment the chunk reached us.
		now := time.Now()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			end(err)
			return
		}
		if string(ev.Name) == "error" {
			end(fmt.Errorf("error event in stream: %s", c.secrets.Excerpt(ev.Data, 200)))
			r.Reason = streamReason(r, ev.Data)
			return
		}
		if bytes.Equal(ev.Data, doneMarker) {
			done = true
			break
		}
		if perr := api.Event(ev.Data, chunk); perr != nil {
			end(fmt.Errorf("%w: %s", perr, c.secrets.Excerpt(ev.Data, 200)))
			return
		}
		if chunk.Error {
			end(fmt.Errorf("error in stream: %s", c.secrets.Excerpt(ev.Data, 200)))
			r.Reason = streamReason(r, ev.Data)
			return
		}
		if chunk.Usage {
			// Merged: the Messages API counts the prompt in message_start
			// and the answer in message_delta; an API whose counts add
			// (CountsAdd) counts each event's own.
			usage.Usage = true
			if api.CountsAdd {
				// An untrusted count (openai.Untrusted, a fraction) makes
				// the sum untrusted, never a term of it: 1.5 four times
				// and 40 added up to 36, taken as a count.
				usage.PromptTokens = addCount(usage.PromptTokens, chunk.PromptTokens)
				usage.CompletionTokens = addCount(usage.CompletionTokens, chunk.CompletionTokens)
			} else {
				if chunk.PromptTokens != 0 {
					usage.PromptTokens = chunk.PromptTokens
				}
				if chunk.CompletionTokens != 0 {
					usage.CompletionTokens = chunk.CompletionTokens
				}
			}
			if chunk.CachedTokens != 0 {
				usage.CachedTokens = chunk.CachedTokens
			}
		}
		// As answered does, with the model's first sight kept here: a
		// look at r.ServedModel each chunk touches a cache line of the
		// record that nothing else of a chunk does, and at wide levels
		// the record has gone cold in the seconds between chunks.
		if !served && len(chunk.Model) > 0 {
			served = true
			if r.ServedModel == "" {
				servedModel(r, chunk.Model)
			}
		}
		finishReason(r, chunk)
		finished = finished || chunk.Finished
		if !chunk.Content && !chunk.Reasoning {
			if chunk.End { // message_delta's stop_reason, response.completed: the stream's [DONE]
				done = true
				break
			}
			continue
		}
		switch n {
		case 0:
			first = now
			r.TTFT = now.Sub(r.Start)
		case 1:
			r.TTST = now.Sub(first)
			gaps = append(gaps, now.Sub(last))
		default:
			gaps = append(gaps, now.Sub(last))
		}
		if chunk.Content && !hasTTFO {
			hasTTFO = true
			r.TTFO, r.HasTTFO = now.Sub(r.Start), true
		}
		last = now
		n++
		if n > limit {
			// Far more than asked for: a server that streams without end
			// would grow the gaps kept without bound.
			end(fmt.Errorf("the server sent more than %d content chunks for max_tokens %d: the stream was ended", limit, p.MaxTokens))
			return
		}
		if p.KeepText { // as it came: read as text after the request, off its clock
			keep(r, ev.Data, p.KeepLimit)
		}
		if c.onChunk != nil {
			c.onChunk(ev.Data, now)
		}
		if chunk.End { // a generate response with text and its finish reason: the last
			done = true
			break
		}
	}
	flush()
	if !done && !finished && !api.EndsAtEOF {
		c.endStream(q, r, last, errors.New("stream ended without [DONE] or finish_reason"))
		return
	}
	c.tokens(r, usage, p.MaxTokens)
	if r.ContentChunks == 0 {
		r.End = time.Now()
		r.Outcome, r.Reason, r.Err = result.Error, result.ReasonEmpty, "stream carried no content"
		return
	}
	r.End = last
	r.E2E = last.Sub(r.Start)
	r.Outcome = result.Success
}

var doneMarker = []byte("[DONE]")

// streamReason is the reason of a stream that a server ended with an
// error event (Anthropic's "overloaded_error", vLLM's error object): the
// cause it names, or stream. A request cancelled meanwhile keeps the
// reason endStream gave it.
func streamReason(r *result.Request, data []byte) result.Reason {
	if r.Reason != result.ReasonStream {
		return r.Reason
	}
	return apierror.Reason(0, data)
}

// endStream classifies a stream that broke off. What was measured before
// the break stays in r for debugging, but the outcome is an error.
func (c *Client) endStream(q call, r *result.Request, last time.Time, err error) {
	reason := result.ReasonStream
	if q.over() {
		reason = c.classify(q, err)
	}
	c.fail(r, reason, err)
	if r.ContentChunks > 0 {
		r.E2E = last.Sub(r.Start)
	}
}

func (c *Client) readWhole(q call, api *openai.Protocol, body io.Reader, r *result.Request, p Prompt) {
	if api.Read != nil {
		c.readAsItComes(q, api, body, r, p)
		return
	}
	data, err := io.ReadAll(body)
	if err != nil {
		c.failRead(q, r, err)
		return
	}
	r.End = time.Now()
	var chunk openai.Chunk
	if err := api.Whole(data, &chunk); err != nil {
		c.fail(r, result.ReasonStream, fmt.Errorf("%w: %s", err, c.secrets.Excerpt(data, 200)))
		return
	}
	c.answeredWhole(api, r, p, &chunk, data)
	if p.KeepText && r.Outcome == result.Success {
		keep(r, data, p.KeepLimit)
	}
}

// readAsItComes reads a response as it arrives (an embeddings response),
// keeping its head alone: enough to quote in an error and to read an error body by,
// or the answer itself up to its limit for the checks that read it. A
// response of 60 MB of vectors costs the reader's 64 KiB window.
func (c *Client) readAsItComes(q call, api *openai.Protocol, body io.Reader, r *result.Request, p Prompt) {
	h := head{max: apierror.MaxBody}
	if p.KeepText {
		h.max = math.MaxInt // the body limit bounds it
		if p.KeepLimit > 0 {
			h.max = max(apierror.MaxBody, p.KeepLimit+1)
		}
	}
	var chunk openai.Chunk
	err := api.Read(io.TeeReader(body, &h), &chunk)
	switch {
	case errors.Is(err, openai.ErrMalformed) || errors.Is(err, openai.ErrTooDeep) || errors.Is(err, openai.ErrMemberTooLarge):
		c.fail(r, result.ReasonStream, fmt.Errorf("%w: %s", err, c.secrets.Excerpt(h.b, 200)))
		return
	case err != nil:
		c.failRead(q, r, err)
		return
	}
	r.End = time.Now()
	c.answeredWhole(api, r, p, &chunk, h.b)
	switch {
	case !p.KeepText || r.Outcome != result.Success:
	case h.n <= len(h.b):
		keep(r, h.b, p.KeepLimit)
	default: // past KeepLimit: counted, not kept
		r.AnswerBytes += h.n + 1
		r.AnswerCut = true
	}
}

// head keeps the first max bytes written to it, and counts them all.
type head struct {
	b      []byte
	n, max int
}

func (h *head) Write(p []byte) (int, error) {
	h.n += len(p)
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// failRead fails a request whose body could not be read to its end.
func (c *Client) failRead(q call, r *result.Request, err error) {
	reason := result.ReasonStream
	if q.over() {
		reason = c.classify(q, err)
	}
	c.fail(r, reason, err)
}

// answeredWhole settles a response read whole into chunk; data is its
// body, or the body's head, to quote.
func (c *Client) answeredWhole(api *openai.Protocol, r *result.Request, p Prompt, chunk *openai.Chunk, data []byte) {
	if chunk.Error {
		c.fail(r, apierror.Reason(0, data), fmt.Errorf("error in response: %s", c.secrets.Excerpt(data, 200)))
		return
	}
	answered(r, chunk)
	if !chunk.Content && !chunk.Reasoning {
		c.fail(r, result.ReasonEmpty, errors.New("response carried no content"))
		return
	}
	r.ContentChunks = 1
	c.tokens(r, *chunk, p.MaxTokens)
	if api.Vectors {
		// Vectors, not tokens, come back: the check "embeddings" holds
		// their count and length to the inputs sent.
		r.Vectors, r.Dimensions = chunk.Vectors, chunk.Dimensions
		r.OutputTokens, r.OutputSource = 0, result.SourceUsage
	}
	r.E2E = r.End.Sub(r.Start)
	r.Outcome = result.Success
}

// tokens settles ISL and OSL from the server's usage when it sent one.
// Counts that are no counts, or far past what maxTokens allowed, are not
// believed: the chunks are counted instead, and the anomaly noted.
func (c *Client) tokens(r *result.Request, usage openai.Chunk, maxTokens int) {
	if usage.Usage && (usage.PromptTokens < 0 || usage.CompletionTokens < 0 ||
		maxTokens > 0 && usage.CompletionTokens > implausible*maxTokens+implausibleSlack) {
		usage.Usage = false
		r.Anomaly = result.AnomalyUsage
	}
	if usage.Usage && usage.PromptTokens > 0 {
		r.InputTokens, r.InputSource = usage.PromptTokens, result.SourceUsage
		r.CachedInputTokens = min(max(usage.CachedTokens, 0), usage.PromptTokens)
	}
	if usage.Usage && usage.CompletionTokens > 0 {
		r.OutputTokens, r.OutputSource = usage.CompletionTokens, result.SourceUsage
	} else {
		r.OutputTokens, r.OutputSource = r.ContentChunks, result.SourceChunks
	}
}

// A completion count over implausible times max_tokens, plus the slack
// of servers that count special tokens or reasoning apart, is untrue; so
// is a stream of more content chunks than that, which is ended.
const (
	implausible      = 4
	implausibleSlack = 64
	// MaxChunks bounds the content chunks of an answer that sets no
	// max_tokens (the server's default applies): 262,144, past any
	// answer a model gives in one stream.
	MaxChunks = 1 << 18
)

// chunkLimit is how many content chunks an answer may carry.
func chunkLimit(maxTokens int) int {
	if maxTokens <= 0 {
		return MaxChunks
	}
	return min(implausible*maxTokens+implausibleSlack, MaxChunks)
}

func isEventStream(ct []byte) bool {
	ct = bytes.TrimSpace(ct)
	if len(ct) == 0 {
		return true // some servers omit it; the stream itself will tell
	}
	const want = "text/event-stream"
	if len(ct) >= len(want) && bytes.EqualFold(ct[:len(want)], []byte(want)) &&
		(len(ct) == len(want) || ct[len(want)] == ';' || ct[len(want)] == ' ') {
		return true // the common case, without the allocations of a full parse
	}
	mt, _, err := mime.ParseMediaType(string(ct))
	return err == nil && mt == want
}

// limitReader bounds a response body and says so when the bound is hit,
// where io.LimitReader would end quietly and hide the cause.
type limitReader struct {
	r io.Reader
	n int64
}

var errBodyTooLarge = errors.New("response body exceeds the size limit")

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// answered keeps what a chunk says of the answer: the model that served it
// and its finish reason. The usual values cost no allocation: the model
// asked for, and the finish reasons servers send.
func answered(r *result.Request, chunk *openai.Chunk) {
	if len(chunk.Model) > 0 && r.ServedModel == "" {
		servedModel(r, chunk.Model)
	}
	finishReason(r, chunk)
}

// servedModel keeps the model a chunk names as the one that served r,
// the first MaxServedModel bytes of it: a server's string, kept in every
// record (a 100 KB name was).
func servedModel(r *result.Request, m []byte) {
	if string(m) == r.Model {
		r.ServedModel = r.Model
		return
	}
	name := openai.Unescape(m)
	if len(name) > MaxServedModel {
		name = strings.ToValidUTF8(name[:MaxServedModel], "")
	}
	r.ServedModel = name
}

// MaxServedModel bounds the model name kept from an answer: real names
// are tens of bytes (a Hugging Face path, a deployment's ARN).
const MaxServedModel = 256

// finishReason keeps the finish reason a chunk gives, if it gives one.
func finishReason(r *result.Request, chunk *openai.Chunk) {
	if fr := chunk.FinishReason; len(fr) > 0 {
		switch string(fr) {
		case "stop":
			r.FinishReason = "stop"
		case "length":
			r.FinishReason = "length"
		case "tool_calls":
			r.FinishReason = "tool_calls"
		default:
			r.FinishReason = openai.Unescape(fr)
		}
	}
}

// keep adds a chunk of the answer to r.Answer, followed by a 0 byte, while
// the whole stays within limit (none when 0): past it the answer is cut
// and only counted, so that a server's 60 MB answer is not held for the
// checks at several times its size.
func keep(r *result.Request, data []byte, limit int) {
	r.AnswerBytes += len(data) + 1
	if r.AnswerCut {
		return
	}
	if limit > 0 && len(r.Answer)+len(data)+1 > limit {
		r.AnswerCut = true
		return
	}
	r.Answer = append(append(r.Answer, data...), 0)
}

// addCount adds a streamed event's token count to the sum so far, an
// untrusted one on either side making the sum untrusted.
func addCount(sum, n int) int {
	if sum == openai.Untrusted || n == openai.Untrusted {
		return openai.Untrusted
	}
	return sum + n
}
