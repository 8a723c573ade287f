// Package apierror reads what an error answer says into a reason an
// on-call engineer can route: a revoked key, a spent quota, an overloaded
// provider, a content filter, a prompt over the context. It reads the
// status and the error body of every API tokenprobe speaks, as each
// server and provider sends it; docs/MEASUREMENT.md ("Failure reasons")
// lists the shapes, their sources and the captures in testdata/.
package apierror

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tokenprobe/tokenprobe/probe/result"
)

// MaxBody is how much of an error body Reason reads. Azure's content
// filter answer, the longest documented, is about 1 KiB; a body cut at
// the bound is still read for the words it holds.
const MaxBody = 16 << 10

// Reason is why a request failed with status (0: an error event inside a
// stream that began with 200) and body. A stream's error that names none
// of the causes stays result.ReasonStream; an HTTP status always gets a
// reason. It reads body's first MaxBody bytes, once, with encoding/json
// (a nesting depth over 10,000 is refused by it, which is no error here:
// the status alone decides then).
func Reason(status int, body []byte) result.Reason {
	r, _ := Classify(status, body)
	return r
}

// Classify is Reason and Gateway of one reading of body.
func Classify(status int, body []byte) (result.Reason, string) {
	if len(body) > MaxBody {
		body = body[:MaxBody]
	}
	f := read(body)
	return f.reason(status), f.gateway
}

// reason is Reason of what f read.
func (f *fields) reason(status int) result.Reason {
	if r := f.cause(status); r != result.ReasonNone {
		return r
	}
	switch {
	case status == 0:
		return result.ReasonStream
	case status == 401 || status == 403:
		return result.ReasonAuth
	case status == 402:
		return result.ReasonQuota
	case status == 429:
		return result.ReasonRateLimit
	case status == 529:
		return result.ReasonOverloaded
	case status >= 500:
		return result.ReasonServerError
	}
	return result.ReasonBadRequest
}

// fields are the members of an error body that name its cause, from
// every shape documented:
//
//	OpenAI, vLLM, llm-d, llama.cpp: {"error": {"message", "type", "code", "param"}}
//	Azure OpenAI:                   {"error": {"code", "message", "innererror": {"code"}}}
//	Anthropic:                      {"type": "error", "error": {"type", "message", "details": {"error_code"}}}
//	Google (Vertex AI):             {"error": {"code": 429, "message", "status": "RESOURCE_EXHAUSTED"}}, or a list of them
//	vLLM (older), SGLang:           {"object": "error", "message", "type", "code"}
//	TGI:                            {"error": "…", "error_type": "overloaded"}
//	Ollama:                         {"error": "model \"x\" not found, try pulling it first"}
//	Bedrock:                        {"message": "…"} (the cause is in its status)
type fields struct {
	codes   []string // types, codes and statuses, lower case
	message string   // lower case
	param   string
	// raw: the body is no whole JSON (cut at MaxBody, an HTML page):
	// message is all of it, and a code counts where it stands quoted.
	raw bool
	// gateway names the gateway whose own answer the body is (Gateway).
	gateway string
}

func (f *fields) code(v any) {
	switch v := v.(type) {
	case string:
		if v != "" {
			f.codes = append(f.codes, strings.ToLower(v))
		}
	case float64:
		f.codes = append(f.codes, strconv.FormatFloat(v, 'f', -1, 64))
	}
}

func (f *fields) text(v any) {
	if s, ok := v.(string); ok && f.message == "" {
		f.message = strings.ToLower(s)
	}
}

func read(body []byte) fields {
	var f fields
	var v any
	if err := json.Unmarshal(bytes.TrimSpace(body), &v); err != nil {
		// Not JSON, or cut at MaxBody: its words still count.
		f.message, f.raw = strings.ToLower(string(body)), true
		return f
	}
	if list, ok := v.([]any); ok && len(list) > 0 { // Google's OpenAI-compatible endpoint
		v = list[0]
	}
	top, _ := v.(map[string]any)
	if top == nil {
		return f
	}
	_, message := top["message"].(string)
	if _, hooks := top["hook_results"]; top["status"] == "failure" && message || hooks {
		f.gateway = "the Portkey gateway"
	}
	if t, _ := top["type"].(string); t != "error" { // Anthropic's envelope names no cause
		f.code(t)
	}
	f.code(top["code"])
	f.code(top["error_type"])
	f.code(top["status"])
	f.text(top["message"])
	switch e := top["error"].(type) {
	case string:
		f.text(e)
	case map[string]any:
		f.code(e["type"])
		f.code(e["code"])
		f.code(e["status"])
		f.text(e["message"])
		f.param, _ = e["param"].(string)
		if in, ok := e["innererror"].(map[string]any); ok {
			f.code(in["code"])
		}
		if d, ok := e["details"].(map[string]any); ok {
			f.code(d["error_code"])
		}
	}
	return f
}

func (f *fields) has(codes ...string) bool {
	if f.raw {
		for _, w := range codes {
			if strings.Contains(f.message, `"`+w+`"`) {
				return true
			}
		}
	}
	for _, c := range f.codes {
		for _, w := range codes {
			if c == w {
				return true
			}
		}
	}
	return false
}

func (f *fields) says(phrases ...string) bool {
	for _, p := range phrases {
		if strings.Contains(f.message, p) {
			return true
		}
	}
	return false
}

// cause is the reason the body names, in order from the most specific:
// a spent quota comes as a 429 and must not read as a rate limit, a
// content filter as a 400 or 403, a model not found as a 404 that a
// wrong path also gets. ReasonNone when it names none.
func (f *fields) cause(status int) result.Reason {
	refused := status == 0 || status == 400 || status == 404 || status == 413 || status == 422
	switch {
	case f.has("insufficient_quota", "billing_error", "billing_hard_limit_reached", "enforced_spend_limit_reached", "insufficientquota", "quota_exceeded") ||
		f.says("exceeded your current quota", "credit balance is too low", "spend limit", "usage limits"):
		return result.ReasonQuota
	case f.has("content_filter", "content_policy_violation", "responsibleaipolicyviolation", "hooks_failed"):
		return result.ReasonContentFilter
	case f.has("context_length_exceeded", "exceed_context_size_error") ||
		refused && f.says("maximum context length", "context length", "context size", "context window", "prompt is too long", "`max_new_tokens` must be <="):
		return result.ReasonContextLength
	case f.has("authentication_error", "permission_error", "invalid_api_key", "unauthenticated", "permission_denied", "authenticationerror", "permissiondeniederror", "accessdeniedexception"):
		return result.ReasonAuth
	case f.has("model_not_found", "deploymentnotfound") ||
		(status == 404 || f.has("not_found_error", "notfounderror", "not_found")) && (f.param == "model" || f.says("model", "deployment")):
		return result.ReasonModelNotFound
	case status == 529 || f.has("overloaded_error", "overloaded", "server_overloaded") ||
		(status == 503 || status == 0) && f.says("overloaded"):
		return result.ReasonOverloaded
	case f.has("rate_limit_error", "rate_limit_exceeded", "ratelimiterror", "resource_exhausted", "throttlingexception", "too_many_requests"):
		return result.ReasonRateLimit
	}
	return result.ReasonNone
}

// Gateway names the gateway whose own answer body is, or "": an error a
// gateway made itself (its validation, its own failure, its guardrail),
// not one it passed on from the model server.
//
//	Portkey (@portkey-ai/gateway): {"status": "failure", "message": "…"}
//	for its validation (400) and its own exceptions (500, with
//	x-portkey-gateway-exception: true); {"error": {"type": "hooks_failed", …},
//	"hook_results": …} for a guardrail's deny (446).
func Gateway(body []byte) string {
	_, gw := Classify(0, body)
	return gw
}
