package sim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Providers are the hosted APIs whose error answers the simulator can
// give (Config.Provider), so that every failure reason tokenprobe routes
// by is tried end to end without the internet. "" is the simulator's own
// shape for its 500, 503 and 429, and OpenAI's for the rest.
var Providers = []string{"", "openai", "azure", "anthropic"}

// cause is what an injected error answer says went wrong.
type cause uint8

const (
	causeNone cause = iota
	cause500
	cause503
	causeRateLimit
	causeAuth
	causeQuota
	causeOverloaded
	causeContentFilter
	causeContextLength
	causeModelNotFound
)

type errorAnswer struct {
	status int
	body   string
}

// providerErrors are each provider's error answers, as its API reference
// documents them; probe/apierror/testdata holds the same bodies with
// their sources, and its tests read them. A cause a provider documents
// no body of takes OpenAI's.
var providerErrors = map[string]map[cause]errorAnswer{
	"openai": {
		cause500:           {500, `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`},
		cause503:           {503, `{"error":{"message":"The server is currently unavailable. Please try again later.","type":"server_error","param":null,"code":null}}`},
		causeRateLimit:     {429, `{"error":{"message":"Rate limit reached for {model} in organization org-sim on tokens per min (TPM): Limit 200000, Used 199800, Requested 512. Please try again in 93ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`},
		causeAuth:          {401, `{"error":{"message":"Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
		causeQuota:         {429, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
		causeOverloaded:    {503, `{"error":{"message":"The engine is currently overloaded, please try again later.","type":"server_error","param":null,"code":null}}`},
		causeContentFilter: {400, `{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`},
		causeContextLength: {400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
		causeModelNotFound: {404, "{\"error\":{\"message\":\"The model `{model}` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}"},
	},
	"azure": {
		cause500:           {500, `{"error":{"code":"InternalServerError","message":"The server had an error while processing your request."}}`},
		cause503:           {503, `{"error":{"code":"ServiceUnavailable","message":"The service is temporarily unable to process your request. Please try again later."}}`},
		causeRateLimit:     {429, `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}`},
		causeAuth:          {401, `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}`},
		causeContentFilter: {400, `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":true,"severity":"medium"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}}}`},
		causeModelNotFound: {404, `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`},
	},
	"anthropic": {
		cause500:           {500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":"req_sim"}`},
		cause503:           {503, `{"type":"error","error":{"type":"api_error","message":"Service unavailable"},"request_id":"req_sim"}`},
		causeRateLimit:     {429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 50,000 input tokens per minute."},"request_id":"req_sim"}`},
		causeAuth:          {401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_sim"}`},
		causeQuota:         {402, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."},"request_id":"req_sim"}`},
		causeOverloaded:    {529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_sim"}`},
		causeContextLength: {400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 212343 tokens > 200000 maximum"},"request_id":"req_sim"}`},
		causeModelNotFound: {404, `{"type":"error","error":{"type":"not_found_error","message":"model: {model}"},"request_id":"req_sim"}`},
	},
}

// validProvider reports whether p is one of Providers.
func validProvider(p string) bool { return slices.Contains(Providers, p) }

// errorFor is the status and body of an injected error of cause c, as
// the configured provider answers it.
func (h *Handler) errorFor(c cause) (int, string, bool) {
	p := h.cfg.Provider
	if p == "" && (c == cause500 || c == cause503 || c == causeRateLimit) {
		return [...]int{cause500: 500, cause503: 503, causeRateLimit: 429}[c], "", false
	}
	status, body := h.providerError(p, c)
	return status, body, true
}

// providerError is provider's answer to cause, OpenAI's where it
// documents none.
func (h *Handler) providerError(provider string, c cause) (int, string) {
	a, ok := providerErrors[provider][c]
	if !ok {
		a = providerErrors["openai"][c]
	}
	name, _ := json.Marshal(h.cfg.Model)
	return a.status, strings.ReplaceAll(a.body, "{model}", string(name[1:len(name)-1]))
}

// RateLimit makes the simulator meter requests and tokens as a hosted
// API does: a fixed window (a minute by default) allows Requests requests
// and Tokens tokens (a request's prompt and its max_tokens, counted when
// it is admitted, as OpenAI counts them); every answer carries what
// remains in Provider's headers, and a request over either gets a 429
// whose Retry-After is the window's end. 0 turns a limit off.
type RateLimit struct {
	Requests, Tokens int
	Window           time.Duration
}

// limiter is the simulator's fixed window.
type limiter struct {
	mu         sync.Mutex
	start      time.Time
	reqs, toks int
	cfg        RateLimit
}

// admit counts a request of tokens at now, and writes the rate-limit
// headers of provider; false when the request is over a limit.
func (l *limiter) admit(h http.Header, provider string, tokens int, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	win := l.cfg.Window
	if win <= 0 {
		win = time.Minute
	}
	if l.start.IsZero() || now.Sub(l.start) >= win {
		l.start, l.reqs, l.toks = now, 0, 0
	}
	reset := l.start.Add(win).Sub(now)
	ok = (l.cfg.Requests <= 0 || l.reqs < l.cfg.Requests) && (l.cfg.Tokens <= 0 || l.toks+tokens <= l.cfg.Tokens)
	if ok {
		l.reqs++
		l.toks += tokens
	}
	put := func(kind string, limit, used int) {
		if limit <= 0 {
			return
		}
		remaining := strconv.Itoa(max(limit-used, 0))
		switch provider {
		case "anthropic": // https://docs.anthropic.com/en/api/rate-limits
			h.Set("anthropic-ratelimit-"+kind+"-limit", strconv.Itoa(limit))
			h.Set("anthropic-ratelimit-"+kind+"-remaining", remaining)
			h.Set("anthropic-ratelimit-"+kind+"-reset", l.start.Add(win).UTC().Format(time.RFC3339))
		case "azure": // https://learn.microsoft.com/azure/ai-services/openai/how-to/quota
			h.Set("x-ratelimit-remaining-"+kind, remaining)
		default: // https://platform.openai.com/docs/guides/rate-limits
			h.Set("x-ratelimit-limit-"+kind, strconv.Itoa(limit))
			h.Set("x-ratelimit-remaining-"+kind, remaining)
			h.Set("x-ratelimit-reset-"+kind, reset.Round(time.Millisecond).String())
		}
	}
	put("requests", l.cfg.Requests, l.reqs)
	put("tokens", l.cfg.Tokens, l.toks)
	if !ok {
		h.Set("retry-after-ms", strconv.FormatInt(reset.Milliseconds(), 10))
	}
	return ok, reset
}
