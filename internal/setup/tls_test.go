package setup

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/config"
	"github.com/tokenprobe/tokenprobe/probe/client"
	"github.com/tokenprobe/tokenprobe/probe/result"
)

// pki is a private CA with a server certificate for gw.internal and a
// client certificate, written as PEM files into a folder.
type pki struct {
	dir        string
	ca         *x509.CertPool
	serverCert tls.Certificate
	caCert     *x509.Certificate
	caKey      *ecdsa.PrivateKey
	serial     int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir()}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tokenprobe test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caKey, p.serial = key, 1
	p.ca = x509.NewCertPool()
	p.ca.AddCert(p.caCert)
	p.write(t, "ca.pem", "CERTIFICATE", der)
	p.serverCert = p.issue(t, "server", "gw.internal", x509.ExtKeyUsageServerAuth)
	p.issue(t, "client", "prober", x509.ExtKeyUsageClientAuth)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue signs a certificate for name and writes name.pem and name-key.pem.
func (p *pki) issue(t *testing.T, file, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	p.write(t, file+".pem", "CERTIFICATE", der)
	p.write(t, file+"-key.pem", "EC PRIVATE KEY", kb)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// An endpoint behind a gateway with a private CA that asks for a client
// certificate (mutual TLS) is reached with the tls block alone, through
// either HTTP client; without the client certificate it is a connect error.
func TestPrivateCAAndMutualTLS(t *testing.T) {
	p := newPKI(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "prober" {
			http.Error(w, "no client certificate", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{p.serverCert}, ClientCAs: p.ca, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	defer srv.Close()

	for _, httpClient := range []string{"tokenprobe", "net/http"} {
		for _, withCert := range []bool{true, false} {
			tlsBlock := "{ca_file: ca.pem, server_name: gw.internal}"
			if withCert {
				tlsBlock = "{ca_file: ca.pem, server_name: gw.internal, cert_file: client.pem, key_file: client-key.pem}"
			}
			yml := fmt.Sprintf("endpoints:\n  - {name: gw, base_url: '%s/v1', model: m, http_client: %s, tls: %s}\nprofiles:\n  - name: p\n",
				srv.URL, httpClient, tlsBlock)
			cfg, err := config.Parse(filepath.Join(p.dir, "tokenprobe.yaml"), []byte(yml))
			if err != nil {
				t.Fatal(err)
			}
			tg, err := OpenEndpoint(cfg.Endpoints[0], nil, Tracing{})
			if err != nil {
				t.Fatal(err)
			}
			var r result.Request
			tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true}, &r)
			_ = tg.Close()
			switch {
			case withCert && r.Outcome != result.Success:
				t.Errorf("%s with a client certificate: %v/%v %s", httpClient, r.Outcome, r.Reason, r.Err)
			case !withCert && (r.Outcome != result.Error || r.Reason != result.ReasonAuth || !strings.Contains(r.Err, "no client certificate")):
				t.Errorf("%s without a client certificate: %v/%v %s", httpClient, r.Outcome, r.Reason, r.Err)
			}
		}
	}
	// Without the CA the certificate is not trusted: a connect error, as before.
	cfg, err := config.Parse("x.yaml", []byte(fmt.Sprintf("endpoints:\n  - {name: gw, base_url: '%s/v1', model: m}\nprofiles:\n  - name: p\n", srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := OpenEndpoint(cfg.Endpoints[0], nil, Tracing{})
	defer tg.Close()
	var r result.Request
	tg.Client.Do(context.Background(), tg.Endpoint, client.Prompt{Text: "x", Stream: true}, &r)
	if r.Reason != result.ReasonConnect {
		t.Errorf("untrusted CA: %v/%v %s", r.Outcome, r.Reason, r.Err)
	}
}
