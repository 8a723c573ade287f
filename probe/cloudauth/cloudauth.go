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
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
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
	// The credential providers' HTTP calls (the container and instance
	// endpoints, STS) go through a client bounded as Google's is: a
	// credentials endpoint answering 60 MB took a run to 253 MB.
	bounded := awsBoundedClient()
	opts = append(opts, awsconfig.WithHTTPClient(bounded),
		// The container credentials' provider takes no client from the
		// configuration: given here, or it reads an answer whole.
		awsconfig.WithEndpointCredentialOptions(func(o *endpointcreds.Options) { o.HTTPClient = bounded }))
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
	// The SDK's cache shares one fetch among the requests waiting for it
	// and lets each leave when its context ends; the fetch is bounded
	// here, as Google's is.
	fetch, cancel := context.WithTimeout(ctx, TokenTimeout)
	defer cancel()
	creds, err := s.creds.Retrieve(fetch)
	if err != nil {
		return nil, fmt.Errorf("aws_sigv4: no AWS credentials: %w", err)
	}
	if creds.AccessKeyID == "" || creds.SecretAccessKey == "" {
		// A credentials endpoint's answer of other JSON decodes to none.
		return nil, fmt.Errorf("aws_sigv4: the credentials from %s carry no access key", creds.Source)
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

	mu    sync.Mutex
	tok   *oauth2.Token
	fetch *fetch // in progress, shared by every request waiting for it
}

// fetch is one fetch of a token, its result read once done is closed.
type fetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
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
	ctx = context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, boundedClient())
	creds, err := google.FindDefaultCredentials(ctx, scopes...)
	if err != nil {
		return nil, fmt.Errorf("google: no Application Default Credentials: %w", err)
	}
	return &Google{ts: creds.TokenSource}, nil
}

// Sign returns the Authorization header with the current access token:
// the cached one, or one fetched within TokenTimeout. Requests that need
// a token while one is fetched wait for that fetch, each until its own
// context ends: the library's source made them take turns, each fetch
// up to TokenTimeout, and a signal waited for them all.
func (g *Google) Sign(ctx context.Context, _ string, _ http.Header, _ []byte) (http.Header, error) {
	tok, err := g.token(ctx)
	if err != nil {
		return nil, fmt.Errorf("google: no access token: %w", redactToken(err))
	}
	return http.Header{"Authorization": {"Bearer " + tok.AccessToken}}, nil
}

// token is the cached token while it is valid (oauth2's margin before
// its expiry), or the result of the fetch in progress, started if none
// is; ctx's end stops the wait, not the fetch.
func (g *Google) token(ctx context.Context) (*oauth2.Token, error) {
	g.mu.Lock()
	if g.tok.Valid() {
		t := g.tok
		g.mu.Unlock()
		return t, nil
	}
	f := g.fetch
	if f == nil {
		f = &fetch{done: make(chan struct{})}
		g.fetch = f
		go func() {
			t, err := g.ts.Token() // within TokenTimeout: its client's
			g.mu.Lock()
			if err == nil {
				g.tok = t
			}
			g.fetch = nil
			g.mu.Unlock()
			f.tok, f.err = t, err
			close(f.done)
		}()
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// MaxInfraBody bounds what tokenprobe reads from an infrastructure
// endpoint (a token endpoint, the cloud's credentials or metadata
// endpoint): a token answer is a few KB.
const MaxInfraBody = 1 << 20

// boundedClient is the HTTP client of the sign-in libraries: each call
// within TokenTimeout, each answer cut with an error past MaxInfraBody.
func boundedClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	bound(tr)
	return &http.Client{Timeout: TokenTimeout, Transport: tr}
}

// awsBoundedClient is boundedClient as the AWS SDK takes it: its own
// client type, through which it adds a custom CA bundle.
func awsBoundedClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTimeout(TokenTimeout).WithTransportOptions(bound)
}

// bound makes each of tr's connections carry one answer, its reads cut
// past MaxInfraBody and the head's room: the bound lies under every
// library's own reading (the AWS SDK's container credentials read a
// 60 MB answer whole), TLS or not.
func bound(tr *http.Transport) {
	tr.DisableKeepAlives = true
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: TokenTimeout}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &boundedConn{Conn: c, left: MaxInfraBody + 64<<10}, nil
	}
}

// boundedConn fails a read past its bound: a connection of one answer.
type boundedConn struct {
	net.Conn
	left int64
}

// ErrInfraBodyTooLarge is a read past MaxInfraBody.
var ErrInfraBodyTooLarge = fmt.Errorf("the answer is over %d bytes: not a token", MaxInfraBody)

func (c *boundedConn) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, ErrInfraBodyTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.Conn.Read(p)
	c.left -= int64(n)
	return n, err
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
