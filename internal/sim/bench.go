package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// benchStream streams maxTokens content chunks DecodeBase apart, each
// stamped with its send time. Chunks follow an absolute schedule from the
// first one, so a late wake-up does not push every later chunk back: the
// client is measured against when each chunk was really written.
func (h *Handler) benchStream(ctx context.Context, w http.ResponseWriter, chat bool, seq uint64, maxTokens int) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	a := streamArgs{chat: chat, id: fmt.Sprintf("sim-%d", seq), model: h.cfg.Model}
	// The chunk after the stamp is the same for every token: built once.
	tail := appendChunk(nil, a, 1, " token", "")
	tail = tail[len("data: {"):]
	buf := make([]byte, 0, len(tail)+48)
	timer := timerPool.Get().(*time.Timer)
	defer func() { timer.Stop(); timerPool.Put(timer) }()
	// The first chunk waits a random part of one interval, as a request
	// joins a running batch at a random step. Without it, streams started
	// together would stay in phase and every interval would bring all of
	// their chunks at once: a burst whose last chunk waits behind all the
	// others in any client, however fast.
	start := time.Now().Add(time.Duration(rand.Int64N(int64(h.cfg.DecodeBase) + 1)))
	for i := range maxTokens {
		if d := time.Until(start.Add(time.Duration(i) * h.cfg.DecodeBase)); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		buf = append(buf[:0], `data: {"ts":`...)
		buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
		buf = append(buf, ',')
		buf = append(buf, tail...)
		if _, err := w.Write(buf); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
	buf = appendChunk(buf[:0], a, -1, "", "length")
	buf = append(buf, "data: [DONE]\n\n"...)
	_, _ = w.Write(buf)
	if fl != nil {
		fl.Flush()
	}
}

// StampOf returns the send time a bench-mode chunk carries, or false when
// data does not start with one.
func StampOf(data []byte) (time.Time, bool) {
	const prefix = `{"ts":`
	if len(data) < len(prefix) || string(data[:len(prefix)]) != prefix {
		return time.Time{}, false
	}
	var ns int64
	i := len(prefix)
	for ; i < len(data) && data[i] >= '0' && data[i] <= '9'; i++ {
		ns = ns*10 + int64(data[i]-'0')
	}
	if i == len(prefix) {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
