package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// selfSigned writes a certificate and key for 127.0.0.1 into dir.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tokenprobe-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// --web.config.file puts every endpoint behind TLS and basic auth: a
// request without credentials is refused, plain HTTP gets nowhere.
func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(dir, "web.yml")
	_ = os.WriteFile(webCfg, []byte("tls_server_config:\n  cert_file: "+cert+"\n  key_file: "+key+"\nbasic_auth_users:\n  prober: "+string(hash)+"\n"), 0o600)
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, "endpoints:\n  - {name: sim, simulator: {}}\nprofiles:\n  - {name: p, schedule: {every: 1h}}\n")
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()

	exit := make(chan int, 1)
	go func() {
		exit <- run([]string{"serve", "-c", cfg, "--web.listen-address=" + addr, "--web.config.file=" + webCfg, "--log.level=error"})
	}()
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	status := func(user, pass string) int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := tlsClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "the TLS listener", func() bool { return status("prober", "s3cret") == 200 })
	if code := status("", ""); code != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", code)
	}
	if code := status("prober", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", code)
	}
	for _, path := range []string{"/", "/config", "/api/v1/runs", "/-/ready"} {
		resp, err := tlsClient.Get("https://" + addr + path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s without credentials: %d", path, resp.StatusCode)
			}
		}
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP was served")
		}
	}
	tlsClient.CloseIdleConnections()
	_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// A web configuration file that is empty, or sets neither TLS nor users,
// is refused at start: the daemon must not fail open into plain HTTP
// without authentication because a secret mount came up empty.
func TestWebConfigThatWouldFailOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tokenprobe.yaml")
	writeFile(t, cfg, "endpoints:\n  - {name: sim, simulator: {}}\nprofiles:\n  - {name: p, schedule: {every: 1h}}\n")
	for name, content := range map[string]string{
		"empty":     "",
		"comments":  "# tls_server_config and basic_auth_users to come\n",
		"http only": "http_server_config:\n  http2: false\n",
		"empty tls": "tls_server_config: {}\n",
		"no users":  "basic_auth_users: {}\n",
	} {
		web := filepath.Join(dir, "web.yml")
		_ = os.WriteFile(web, []byte(content), 0o600)
		done := make(chan int, 1)
		go func() {
			done <- run([]string{"serve", "-c", cfg, "--web.listen-address=127.0.0.1:0", "--web.config.file=" + web, "--log.level=error"})
		}()
		select {
		case code := <-done:
			if code != 2 {
				t.Errorf("%s: exit %d, want 2", name, code)
			}
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
			<-done
			t.Fatalf("%s: the daemon started", name)
		}
	}
}
