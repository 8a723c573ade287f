package workload

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tokenprobe/tokenprobe/probe/client"
)

// BlockTokens is the size of one prefix block of a Mooncake trace.
const BlockTokens = 512

// TraceRow is one request of a Mooncake trace.
type TraceRow struct {
	Timestamp    time.Duration // since the trace's start
	InputTokens  int
	OutputTokens int
	// HashIDs name the prompt's 512-token blocks; equal ids are equal
	// blocks, which a server's prefix cache can reuse.
	HashIDs []int
}

type mooncakeLine struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int    `json:"hash_ids"`
}

// ReadMooncake reads a Mooncake trace (JSON lines of timestamp in ms,
// input_length, output_length, hash_ids). Errors name the file and line.
func ReadMooncake(path string) ([]TraceRow, error) {
	var rows []TraceRow
	var last time.Duration
	err := eachLine(path, func(text string) error {
		var m mooncakeLine
		if err := decodeStrict(text, &m); err != nil {
			return err
		}
		switch {
		case m.Timestamp == nil || m.InputLength == nil || m.OutputLength == nil:
			return fmt.Errorf("timestamp, input_length and output_length are required")
		case *m.InputLength < 1 || *m.OutputLength < 1 || *m.Timestamp < 0:
			return fmt.Errorf("lengths must be at least 1 and the timestamp not negative")
		case len(m.HashIDs) > 0 && (len(m.HashIDs)-1)*BlockTokens >= *m.InputLength:
			return fmt.Errorf("%d hash_ids of %d tokens do not fit input_length %d", len(m.HashIDs), BlockTokens, *m.InputLength)
		}
		ts := time.Duration(*m.Timestamp * float64(time.Millisecond))
		if ts < last {
			return fmt.Errorf("timestamps go backwards (%v after %v)", ts, last)
		}
		last = ts
		rows = append(rows, TraceRow{Timestamp: ts, InputTokens: *m.InputLength, OutputTokens: *m.OutputLength, HashIDs: m.HashIDs})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no requests", path)
	}
	return rows, nil
}

// Window keeps the rows with from <= timestamp < to (to = 0: to the end)
// and returns their send offsets: timestamps from the window's start,
// divided by speedup.
func Window(rows []TraceRow, from, to time.Duration, speedup float64) ([]TraceRow, []time.Duration) {
	if speedup <= 0 {
		speedup = 1
	}
	var kept []TraceRow
	var offsets []time.Duration
	for _, r := range rows {
		if r.Timestamp < from || to > 0 && r.Timestamp >= to {
			continue
		}
		kept = append(kept, r)
		offsets = append(offsets, time.Duration(float64(r.Timestamp-from)/speedup))
	}
	return kept, offsets
}

// Replay hands out a trace's requests in order. Prompts are built so that
// equal hash_ids give byte-identical blocks: request prefixes shared in
// production are shared here, and a server's prefix cache behaves as it
// did there.
type Replay struct {
	rows   []TraceRow
	stream bool
	salt   uint64
	mu     sync.Mutex
	next   int
	// blocks caches whole blocks' text by hash id: the trace's prefixes
	// repeat, and building a block is most of building a prompt.
	blocks map[uint64]string
}

// maxCachedBlocks bounds the block cache (about 2.5 KB a block).
const maxCachedBlocks = 8192

// NewReplay replays rows; salt changes every block's text (0 reproduces
// the same prompts run after run, so caches warm as in production).
func NewReplay(rows []TraceRow, stream bool, salt uint64) *Replay {
	return &Replay{rows: rows, stream: stream, salt: salt}
}

// Next returns the next row's prompt; past the end it wraps around.
func (r *Replay) Next() client.Prompt {
	r.mu.Lock()
	row := r.rows[r.next%len(r.rows)]
	r.next++
	r.mu.Unlock()
	return client.Prompt{Parts: traceParts(row, r.salt, r.block), InputTokens: row.InputTokens, MaxTokens: row.OutputTokens, Stream: r.stream}
}

// block is blockWords through the cache, for whole blocks.
func (r *Replay) block(id uint64, n int) string {
	if n != BlockTokens {
		return blockWords(id, n)
	}
	r.mu.Lock()
	text, ok := r.blocks[id]
	r.mu.Unlock()
	if ok {
		return text
	}
	text = blockWords(id, n)
	r.mu.Lock()
	if r.blocks == nil || len(r.blocks) >= maxCachedBlocks {
		r.blocks = make(map[uint64]string, 1024)
	}
	r.blocks[id] = text
	r.mu.Unlock()
	return text
}

// TracePrompt builds a row's prompt: one block of BlockTokens words per
// hash id, the last cut to input_length.
func TracePrompt(row TraceRow, salt uint64) string {
	return strings.Join(traceParts(row, salt, blockWords), " ")
}

// traceParts is a row's prompt as its blocks' texts, in order, to be
// joined by spaces. Whole blocks come from block (a cache, in a replay)
// and are shared, not copied: the request body is the one copy.
func traceParts(row TraceRow, salt uint64, block func(id uint64, n int) string) []string {
	parts := make([]string, 0, len(row.HashIDs)+1)
	left := row.InputTokens
	for _, id := range row.HashIDs {
		n := min(BlockTokens, left)
		parts = append(parts, block(uint64(id)^salt, n))
		left -= n
		// Building a block is tens of microseconds of CPU; yield between
		// blocks so the goroutine sending requests on schedule is never
		// kept waiting for a processor.
		runtime.Gosched()
	}
	if left > 0 { // no hash ids: an unshared prompt
		parts = append(parts, Words(uint64(row.Timestamp)^salt^0x5eed, left))
	}
	return parts
}

// blockWords is the first n words of a block: a block cut short is a
// prefix of the same block whole.
func blockWords(id uint64, n int) string {
	return Words(id*0x9e3779b97f4a7c15+1, n)
}
