package sim

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Auth makes the simulator check a cloud's sign-in on every completion
// request, as Bedrock and Vertex AI do, so that tokenprobe's signing is
// tried end to end without the internet.
type Auth struct {
	// SigV4, when set, checks an AWS Signature Version 4 against this
	// key, with aws-sdk-go-v2's own signer: a request it does not sign
	// the same way gets Bedrock's 403.
	SigV4 *SigV4Key
	// TokenLifetime, when above 0, serves an OAuth2 token endpoint at
	// /token (the refresh-token and JWT-bearer grants, as Google's) whose
	// access tokens last this long, and accepts only those as bearer
	// tokens: Vertex AI's 401 otherwise.
	TokenLifetime time.Duration
}

// SigV4Key is the one key the simulator's SigV4 check knows.
type SigV4Key struct {
	AccessKeyID, SecretAccessKey, Region, Service string
}

// maxSignedBody bounds the body read to check a signature: what the
// completion handlers read at most.
const maxSignedBody = 64 << 20

// tokens are the access tokens the simulator's token endpoint issued.
type tokens struct {
	mu     sync.Mutex
	issued map[string]time.Time // token: expiry
	n      int
}

// TokensIssued is how many access tokens the token endpoint has issued.
func (h *Handler) TokensIssued() int {
	h.tokens.mu.Lock()
	defer h.tokens.mu.Unlock()
	return h.tokens.n
}

// token serves the OAuth2 token endpoint: any refresh token or JWT
// assertion gets a new access token (the simulator holds no accounts;
// what it tests is that the client asks, uses and renews).
func (h *Handler) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer":
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	h.tokens.mu.Lock()
	if h.tokens.issued == nil {
		h.tokens.issued = map[string]time.Time{}
	}
	h.tokens.n++
	tok := "sim-access-token-" + strconv.Itoa(h.tokens.n)
	now := time.Now()
	for t, exp := range h.tokens.issued { // bounded: expired ones go
		if now.After(exp) {
			delete(h.tokens.issued, t)
		}
	}
	h.tokens.issued[tok] = now.Add(h.cfg.Auth.TokenLifetime)
	h.tokens.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(h.cfg.Auth.TokenLifetime.Seconds())})
}

// signedIn wraps a completion handler with the sign-in check.
func (h *Handler) signedIn(next http.HandlerFunc) http.HandlerFunc {
	a := h.cfg.Auth
	if a.SigV4 == nil && a.TokenLifetime <= 0 {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if a.TokenLifetime > 0 && !h.validToken(r.Header.Get("Authorization")) {
			// Google's documented 401 (https://cloud.google.com/apis/design/errors).
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.","status":"UNAUTHENTICATED"}}`)
			return
		}
		if a.SigV4 != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, maxSignedBody))
			if err != nil {
				return
			}
			if err := checkSigV4(r, body, a.SigV4, time.Now()); err != nil {
				// Bedrock's 403 (https://docs.aws.amazon.com/bedrock/latest/APIReference/CommonErrors.html).
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
				w.WriteHeader(http.StatusForbidden)
				_, _ = fmt.Fprintf(w, `{"message":%q}`, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. ("+err.Error()+")")
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next(w, r)
	}
}

func (h *Handler) validToken(authz string) bool {
	tok, ok := strings.CutPrefix(authz, "Bearer ")
	if !ok {
		return false
	}
	h.tokens.mu.Lock()
	defer h.tokens.mu.Unlock()
	exp, ok := h.tokens.issued[tok]
	return ok && time.Now().Before(exp)
}

// checkSigV4 signs again what r says it signed, with the known key and
// aws-sdk-go-v2's signer, and compares. The time is the request's own
// X-Amz-Date, within 5 minutes of now as AWS allows.
func checkSigV4(r *http.Request, body []byte, key *SigV4Key, now time.Time) error {
	authz := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(authz, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("no AWS4-HMAC-SHA256 signature")
	}
	var credential, signed string
	for _, part := range strings.Split(rest, ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		}
	}
	if id, _, _ := strings.Cut(credential, "/"); id != key.AccessKeyID {
		return fmt.Errorf("unknown access key %q", id)
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("no X-Amz-Date")
	}
	if d := now.Sub(at); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("signed at %s, more than 5 minutes from now", at.Format(time.RFC3339))
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for _, name := range strings.Split(signed, ";") {
		if name != "host" {
			again.Header.Set(name, r.Header.Get(name))
		}
	}
	again.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.SecretAccessKey, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, hex.EncodeToString(sum[:]), key.Service, key.Region, at); err != nil {
		return err
	}
	if subtle.ConstantTimeCompare([]byte(again.Header.Get("Authorization")), []byte(authz)) != 1 {
		return fmt.Errorf("signature mismatch")
	}
	return nil
}
