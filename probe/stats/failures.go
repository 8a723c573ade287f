package stats

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// Failure is the errors of one reason in a run.
type Failure struct {
	Reason string `json:"reason"`
	Count  int    `json:"count"`
	// Statuses counts the HTTP status codes of these errors, when the
	// server answered.
	Statuses map[string]int `json:"statuses,omitempty"`
	// Message is the most frequent error text (its first MaxMessage
	// characters; secrets were taken out when it was recorded), and
	// MessageCount how many errors had it.
	Message      string `json:"message"`
	MessageCount int    `json:"message_count"`
	// Hint names the likely mistake, when the error is a common one.
	Hint string `json:"hint,omitempty"`
}

// MaxMessage is how much of an error's text a summary keeps.
const MaxMessage = 200

// maxMessages bounds the distinct texts counted per reason: a server that
// puts a request id in every error must not grow a summary without end.
const maxMessages = 64

type failureGroup struct {
	count    int
	statuses map[int]int
	messages map[string]int
	url      string
}

// ephemeralPort is a connection's local address in a network error.
var ephemeralPort = regexp.MustCompile(`((?:\d{1,3}\.){3}\d{1,3}|\[[0-9a-fA-F:]+\]):\d+->`)

func (a *Aggregator) addFailure(r *result.Request) {
	if a.failures == nil {
		a.failures = map[result.Reason]*failureGroup{}
	}
	g := a.failures[r.Reason]
	if g == nil {
		g = &failureGroup{statuses: map[int]int{}, messages: map[string]int{}, url: r.URL}
		a.failures[r.Reason] = g
	}
	g.count++
	if r.HTTPStatus != 0 {
		g.statuses[r.HTTPStatus]++
	}
	// Grouped with the ephemeral ports masked: "read tcp
	// 127.0.0.1:51234->10.0.0.7:8000: connection reset" is one message
	// whatever port the connection had.
	msg := cut(ephemeralPort.ReplaceAllString(r.Err, "${1}:*->"), MaxMessage)
	if _, ok := g.messages[msg]; ok || len(g.messages) < maxMessages {
		g.messages[msg]++
	}
}

func (a *Aggregator) failureSummary() []Failure {
	var out []Failure
	for _, reason := range result.Reasons {
		g := a.failures[reason]
		if g == nil {
			continue
		}
		f := Failure{Reason: reason.String(), Count: g.count}
		for code, n := range g.statuses {
			if f.Statuses == nil {
				f.Statuses = map[string]int{}
			}
			f.Statuses[strconv.Itoa(code)] = n
		}
		// The most frequent message; of equals, the first in order, so
		// the summary does not change from one computation to the next.
		msgs := make([]string, 0, len(g.messages))
		for m := range g.messages {
			msgs = append(msgs, m)
		}
		slices.Sort(msgs)
		for _, m := range msgs {
			if g.messages[m] > f.MessageCount {
				f.Message, f.MessageCount = m, g.messages[m]
			}
		}
		top := 0
		for code, n := range g.statuses {
			if n > g.statuses[top] || (n == g.statuses[top] && code < top) {
				top = code
			}
		}
		f.Hint = Hint(reason, top, f.Message, g.url)
		out = append(out, f)
	}
	return out
}

// Hint names the likely cause of a common failure, for the console, the
// status page and the summary; "" when there is no better guess than the
// message itself.
func Hint(reason result.Reason, status int, msg, baseURL string) string {
	lower := strings.ToLower(msg)
	switch {
	case reason == result.ReasonModelNotFound:
		return "no such model or deployment: check the endpoint's model (or deployment) name"
	case status == 404 && !hasV1(baseURL):
		return "404 from a base_url without /v1: OpenAI-compatible servers answer under /v1 (base_url: http://host:port/v1)"
	case status == 404:
		return "404: the server has no such route or model; check the endpoint's api (chat or completions) and model"
	case reason == result.ReasonAuth:
		return "the API key is missing, wrong or revoked: check the endpoint's api_key (file or env), auth and headers"
	case reason == result.ReasonQuota:
		return "the account's quota, credit or spend limit is spent: waiting will not help; raise it with the provider"
	case reason == result.ReasonRateLimit:
		return "rate limited: the load (the probe's and everyone's on this key) is over the key's limit; lower it, or raise the limit"
	case reason == result.ReasonOverloaded:
		return "the provider or server is overloaded and shedding load: not this key's limit; wait, or fail over"
	case reason == result.ReasonContentFilter:
		return "a content policy refused the prompt or cut the answer: check the profile's prompts against the provider's filter"
	case reason == result.ReasonContextLength:
		return "the prompt and max_tokens exceed the model's context: shorten the workload's prompts or max_tokens"
	case status == 400 || status == 422:
		return "the server refused the request: check the model name, max_tokens against its context, and extra_body"
	case reason == result.ReasonServerError:
		return "the server failed the request: its own log says why"
	case reason == result.ReasonConnect && strings.Contains(lower, "refused"):
		return "connection refused: nothing listens at the base_url's host and port; is the server up, and the port right?"
	case reason == result.ReasonConnect && strings.Contains(lower, "no such host"):
		return "the base_url's host name does not resolve"
	case reason == result.ReasonConnect && (strings.Contains(lower, "tls") || strings.Contains(lower, "x509") || strings.Contains(lower, "certificate")):
		return "TLS failed: https:// to a plain-HTTP server, or a certificate not trusted (set the endpoint's tls.ca_file)"
	case reason == result.ReasonTimeout:
		return "no answer within the endpoint's timeout: the server is overloaded or stuck, or the timeout is too short for the workload"
	}
	return ""
}

func hasV1(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return true // no guess on a URL that does not parse
	}
	return strings.Contains(u.Path+"/", "/v1/")
}

// cut keeps s's first n characters (runes), marking a cut with "…".
func cut(s string, n int) string {
	s = escapeControls(s)
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}

// escapeControls shows a server's control characters as escapes (\n,
// \r, \x1b): a message is printed on terminals and pages, where a newline
// would forge a log line and an escape sequence clear the screen.
func escapeControls(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
