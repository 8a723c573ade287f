package result

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
)

// idPrefix starts every X-Request-Id this process sends: a tag of the
// process, so that two probes against one server (the replicas of a
// daemon, whose request ids count alike) never send it the same id while
// both are in flight; vLLM, for one, refuses a request whose id is running.
var idPrefix = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "tp-" + hex.EncodeToString(b) + "-"
}()

// RequestIDPrefix is what comes before the request's number in its
// X-Request-Id.
func RequestIDPrefix() string { return idPrefix }

// XRequestID is the X-Request-Id the request was sent with: the process's
// prefix and its ID, the id of its record and exemplars.
func (r *Request) XRequestID() string {
	if r.ID == 0 {
		return ""
	}
	return idPrefix + strconv.FormatUint(r.ID, 10)
}
