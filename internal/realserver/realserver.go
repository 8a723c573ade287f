// Package realserver starts inference servers nobody on this project
// wrote, for tests of the verdicts that depend on their habits: llama.cpp's
// llama-server (tools/llamacpp.sh builds it and a random-weight tiny llama)
// and llm-d-inference-sim (tools/llmd-sim.sh). Our own simulator imitates
// only the habits someone described to it; these are the first real peers
// every verdict meets. .ci/run builds both and requires them
// (TOKENPROBE_REQUIRE_REAL_SERVERS); elsewhere a test skips, saying how to
// build what is missing.
package realserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The variables .ci/run sets to the servers it built.
const (
	LlamaServerEnv = "TOKENPROBE_LLAMA_SERVER" // llama-server; the tiny model beside it
	LLMDSimEnv     = "TOKENPROBE_LLMD_SIM"     // llm-d-inference-sim
	PortkeyEnv     = "TOKENPROBE_PORTKEY"      // Portkey's gateway: its start-server.js
	RequireEnv     = "TOKENPROBE_REQUIRE_REAL_SERVERS"
)

// Server is a real server a test started, on a loopback address.
type Server struct {
	// URL is its root (http://127.0.0.1:port): the API under /v1, its
	// metrics at /metrics.
	URL string
	// Model is the name its answers give.
	Model string

	t       testing.TB
	name    string
	argv    func(port int) []string // the command, args appended
	args    []string
	port    int
	inner   string // llm-d-inference-sim only: its address in its namespace
	health  string // the path that answers 200 once it is ready (default /health)
	relay   *relay // and the way in, one per start
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logs    *bytes.Buffer
	stopped bool
}

// binary finds the server's binary through env, or skips the test (fails
// it where RequireEnv is set).
func binary(t testing.TB, env, build string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("%s is set and %s names no binary (%s builds it)", RequireEnv, env, build)
		}
		t.Skipf("no real server: %s is unset (%s builds it and prints its path)", env, build)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	return path
}

// LlamaServer starts llama.cpp's llama-server on the tiny model, bound to
// 127.0.0.1, with args after its defaults (-np 4, a 4,096-token context,
// one thread, --metrics). Its answers name the model by its --alias,
// "tiny-llama" unless args start with --alias NAME, whatever the request
// asked for.
func LlamaServer(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := binary(t, LlamaServerEnv, "tools/llamacpp.sh")
	model := filepath.Join(filepath.Dir(bin), strings.Replace(filepath.Base(bin), "llama-server-", "tiny-llama-", 1)+".gguf")
	if m := os.Getenv("TOKENPROBE_LLAMA_MODEL"); m != "" {
		model = m
	}
	alias := "tiny-llama"
	if len(args) > 1 && args[0] == "--alias" {
		alias, args = args[1], args[2:]
	}
	s := &Server{t: t, name: "llama-server", Model: alias, args: args, argv: func(port int) []string {
		return []string{bin, "-m", model, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--alias", alias,
			"-np", "4", "-c", "4096", "-t", "1", "--metrics", "--no-warmup"}
	}}
	s.start(freePort(t))
	return s
}

// LLMDSim starts llm-d-inference-sim v0.10.2 serving model, with args
// after --model and --port. It listens on every interface and has no flag
// to bind one, so it runs in a network namespace of its own (unshare -n)
// and is reached through a relay on 127.0.0.1: nothing of it is open
// beyond this host. That needs the right to create a namespace (root, as
// in CI); without it the test skips.
func LLMDSim(t testing.TB, model string, args ...string) *Server {
	t.Helper()
	bin := binary(t, LLMDSimEnv, "tools/llmd-sim.sh")
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("llm-d-inference-sim is kept off the network in a namespace of its own, and unshare -n fails here: %v", err)
		}
		t.Skipf("llm-d-inference-sim listens on every interface; keeping it to loopback needs unshare -n, which fails here: %v", err)
	}
	const inner = 8000 // its port inside its own namespace
	s := &Server{t: t, name: "llm-d-inference-sim", Model: model, args: args, argv: func(int) []string {
		return []string{"unshare", "-n", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh",
			bin, "--model", model, "--port", fmt.Sprint(inner), "--force-dummy-tokenizer"}
	}}
	s.inner = fmt.Sprintf("127.0.0.1:%d", inner)
	s.start(freePort(t))
	return s
}

// Portkey starts Portkey's AI gateway (@portkey-ai/gateway, installed
// by tools/portkey.sh) on a loopback port, with node: every listen of its
// process is bound to 127.0.0.1 by tools/portkey/loopback.cjs, preloaded
// (the gateway listens on every interface, with no option to bind one).
// Requests reach a model server through it with x-portkey-provider:
// openai and x-portkey-custom-host: that server's /v1.
func Portkey(t testing.TB) *Server {
	t.Helper()
	script := binary(t, PortkeyEnv, "tools/portkey.sh")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("Portkey's gateway runs on Node.js: %v", err)
	}
	preload, err := filepath.Abs(filepath.Join(moduleRoot(t), "tools", "portkey", "loopback.cjs"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, name: "portkey-gateway", health: "/", argv: func(port int) []string {
		return []string{node, "--require", preload, script, fmt.Sprintf("--port=%d", port), "--headless"}
	}}
	s.start(freePort(t))
	return s
}

// moduleRoot is the folder of this module's go.mod, found upwards from
// the test's working directory.
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// start runs the server at port and waits until it answers.
func (s *Server) start(port int) {
	s.t.Helper()
	s.port = port
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	argv := append(s.argv(port), s.args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &syncWriter{w: logs}, &syncWriter{w: logs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.logs, s.stopped = cmd, exited, logs, false
	s.mu.Unlock()
	s.t.Cleanup(s.Stop)
	if s.inner != "" {
		r, err := openRelay(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid), s.inner, port, exited)
		if err != nil {
			s.Stop()
			s.t.Fatalf("%s: its relay: %v", s.name, err)
		}
		s.mu.Lock()
		s.relay = r
		s.mu.Unlock()
	}
	s.waitReady(exited)
}

// waitReady polls the server's health until it answers 200, it exits, or
// a minute passes (llama-server loads its model; both start in well under
// a second here).
func (s *Server) waitReady(exited <-chan struct{}) {
	s.t.Helper()
	health := s.URL + "/health"
	if s.health != "" {
		health = s.URL + s.health
	}
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(health)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			s.t.Fatalf("%s exited before it answered: %s", s.name, s.Logs())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			why := fmt.Sprint(err)
			s.mu.Lock()
			if s.relay != nil && s.relay.err() != "" {
				why += "; its relay's last dial: " + s.relay.err()
			}
			s.mu.Unlock()
			s.Stop()
			s.t.Fatalf("%s did not answer %s within a minute (last: %s): %s", s.name, health, why, s.Logs())
		}
	}
}

// Stop kills the server and waits for it; the address then refuses
// connections.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited, stopped, r := s.cmd, s.exited, s.stopped, s.relay
	s.stopped, s.relay = true, nil
	s.mu.Unlock()
	if cmd == nil || stopped {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
	if r != nil {
		r.close()
	}
}

// Restart stops the server and starts it again on the same address, with
// args in place of the ones it was started with when any are given: a
// fresh process, its counters from zero.
func (s *Server) Restart(args ...string) {
	s.t.Helper()
	s.Stop()
	if len(args) > 0 {
		s.args = args
	}
	s.start(s.port)
}

// Logs is what the server printed so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

// Get fetches path from the server, failing the test on error.
func (s *Server) Get(path string) []byte {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", s.name, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		s.t.Fatalf("%s %s: %v", s.name, path, err)
	}
	return b
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w.Len() > 1<<20 { // a chatty server's log is kept to its first MiB
		return len(p), nil
	}
	return w.w.Write(p)
}
