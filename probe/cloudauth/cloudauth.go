// Package cloudauth signs requests to cloud-hosted models with the
// providers' own libraries: AWS Signature Version 4 for Bedrock with
// aws-sdk-go-v2's signer and default credential chain, and OAuth2 access
// tokens for Vertex AI from Google's Application Default Credentials with
// golang.org/x/oauth2/google. Nothing here writes a signature or a token
// exchange of its own.
//
// A Signer is asked once per request (probe/client's Endpoint.Signer):
// the chain's credentials are cached by the libraries and refreshed
// before they expire; what a request carries is a fresh signature, or the
// cached token.
package cloudauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// SigV4 signs with AWS Signature Version 4.
type SigV4 struct {
	Region, Service string
	creds           aws.CredentialsProvider
	signer          *v4.Signer
}

// NewSigV4 loads the AWS default credential chain (the environment, the
// shared config and credentials files and their profile, web identity in
// Kubernetes, the container and instance roles), for service in region.
// It reads files and may ask the instance metadata service, within ctx;
// credentials themselves are fetched at the first request, and cached.
func NewSigV4(ctx context.Context, region, service, profile string) (*SigV4, error) {
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}
	if profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(profile))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("aws_sigv4: the AWS default credential chain: %w", err)
	}
	return &SigV4{Region: region, Service: service, creds: cfg.Credentials, signer: v4.NewSigner()}, nil
}

// signedHeaders are the headers a request's signature covers besides
// Host and the X-Amz ones: what probe/client sends the same way on every
// request. Others it sends (Accept, X-Request-Id, traceparent, the
// User-Agent) are left out, so a proxy that adds or changes them breaks
// no signature.
var signedHeaders = []string{"Content-Type"}

// Sign returns the Authorization, X-Amz-Date and, with temporary
// credentials, X-Amz-Security-Token headers of a POST of body to url
// carrying header.
func (s *SigV4) Sign(ctx context.Context, url string, header http.Header, body []byte) (http.Header, error) {
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws_sigv4: no AWS credentials: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	for _, k := range signedHeaders {
		if v := header.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	sum := sha256.Sum256(body)
	if err := s.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), s.Service, s.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("aws_sigv4: %w", err)
	}
	out := http.Header{}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := req.Header.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out, nil
}

// Google gives requests an OAuth2 access token of Application Default
// Credentials.
type Google struct {
	ts oauth2.TokenSource
}

// DefaultScope is what a Vertex AI call needs.
const DefaultScope = "https://www.googleapis.com/auth/cloud-platform"

// TokenTimeout bounds one fetch of an access token from the token
// endpoint (or the metadata server).
const TokenTimeout = 10 * time.Second

// NewGoogle finds Application Default Credentials (GOOGLE_APPLICATION_
// CREDENTIALS, gcloud's file, the metadata server on GCP and GKE's
// workload identity) for scopes. The token source the library returns
// caches its token and fetches a new one shortly before it expires (10 s
// before, oauth2's margin), each fetch within TokenTimeout.
func NewGoogle(ctx context.Context, scopes ...string) (*Google, error) {
	if len(scopes) == 0 {
		scopes = []string{DefaultScope}
	}
	// The library keeps this context for every later refresh: no
	// cancellation of the caller's, and a client with a timeout.
	ctx = context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, &http.Client{Timeout: TokenTimeout})
	creds, err := google.FindDefaultCredentials(ctx, scopes...)
	if err != nil {
		return nil, fmt.Errorf("google: no Application Default Credentials: %w", err)
	}
	return &Google{ts: creds.TokenSource}, nil
}

// Sign returns the Authorization header with the current access token:
// the cached one, or one fetched within TokenTimeout.
func (g *Google) Sign(context.Context, string, http.Header, []byte) (http.Header, error) {
	tok, err := g.ts.Token()
	if err != nil {
		return nil, fmt.Errorf("google: no access token: %w", redactToken(err))
	}
	return http.Header{"Authorization": {"Bearer " + tok.AccessToken}}, nil
}

// redactToken keeps a token endpoint's error and drops its body, which
// may quote what was sent.
func redactToken(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := re.ErrorCode
		if re.Response != nil {
			msg = strings.TrimSpace(re.Response.Status + " " + msg)
		}
		return errors.New("token endpoint answered " + msg)
	}
	return err
}
