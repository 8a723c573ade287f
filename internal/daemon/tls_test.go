package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCA writes a fresh self-signed CA certificate to path.
func writeCA(t *testing.T, path string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
}

// A rotated CA file (as cert-manager rotates a mounted secret) reopens the
// endpoint at the next reload, with the configuration unchanged; an
// unchanged one keeps the endpoint and its connections.
func TestReloadReopensAnEndpointWhoseCertificateRotated(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeCA(t, ca)
	d, _, _ := start(t, "endpoints:\n  - {name: gw, base_url: 'https://127.0.0.1:1/v1', model: m, tls: {ca_file: "+ca+"}}\nprofiles:\n"+profile("p", "{concurrency: 1, requests: 1}"))
	opened := func() any {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.targets["gw"].t
	}
	first := opened()
	if err := d.Reload(); err != nil || opened() != first {
		t.Fatalf("an unchanged reload reopened the endpoint (%v)", err)
	}
	writeCA(t, ca)
	if err := os.Chtimes(ca, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err != nil || opened() == first {
		t.Fatalf("the rotated CA was not picked up (%v)", err)
	}
}
