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

	"github.com/tokenprobe/tokenprobe/internal/childproc"
)

// The variables .ci/run sets to the servers it built.
const (
	LlamaServerEnv = "TOKENPROBE_LLAMA_SERVER" // llama-server; the tiny model beside it
	LLMDSimEnv     = "TOKENPROBE_LLMD_SIM"     // llm-d-inference-sim
	PortkeyEnv     = "TOKENPROBE_PORTKEY"      // Portkey's gateway: its start-server.js
	OneAPIEnv      = "TOKENPROBE_ONE_API"      // one-api, an OpenAI-compatible gateway
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
	inner   string   // llm-d-inference-sim only: its address in its namespace
	weights string   // llama-server only: its model file
	health  string   // the path that answers 200 once it is ready (default /health)
	env     []string // added to this process's environment
	relay   *relay   // and the way in, one per start
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logs    *syncWriter
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
	s := &Server{t: t, name: "llama-server", Model: alias, args: args, weights: model}
	s.argv = func(port int) []string {
		return []string{bin, "-m", s.weights, "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--alias", alias,
			"-np", "4", "-c", "4096", "-t", "1", "--metrics", "--no-warmup"}
	}
	s.start(freePort(t))
	return s
}

// OtherWeights is the second tiny llama tools/llamacpp.sh writes: the same
// shape, vocabulary and name, other random weights.
func OtherWeights(t testing.TB) string {
	t.Helper()
	return weights(t, "other")
}

// Precision is the first tiny llama's weights in another precision (f16
// or q8_0), as tools/llamacpp.sh writes them: a redeploy of another
// quantization of the same model.
func Precision(t testing.TB, precision string) string {
	t.Helper()
	return weights(t, precision)
}

func weights(t testing.TB, kind string) string {
	t.Helper()
	bin := binary(t, LlamaServerEnv, "tools/llamacpp.sh")
	path := filepath.Join(filepath.Dir(bin), strings.Replace(filepath.Base(bin), "llama-server-", "tiny-llama-"+kind+"-", 1)+".gguf")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the %s weights: %v (tools/llamacpp.sh writes them)", kind, err)
	}
	return path
}

// Weights is the model file llama-server serves now.
func (s *Server) Weights() string { return s.weights }

// Swap restarts llama-server on the same address and alias with the
// weights at path: a redeploy of another model under the same name.
func (s *Server) Swap(path string) {
	s.t.Helper()
	s.Stop()
	s.weights = path
	s.start(s.port)
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
	// POD_IP names the pod in its KV-cache events; --enable-kvcache
	// refuses to start without it.
	s := &Server{t: t, name: "llm-d-inference-sim", Model: model, args: args, env: []string{"POD_IP=127.0.0.1"}, argv: func(int) []string {
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

// OneAPIToken is the key a request through OneAPI's gateway carries:
// Authorization: Bearer sk-OneAPIToken.
const OneAPIToken = "tokenprobetesttoken0123456789abcdef"

// OneAPI starts one-api v0.6.10 (tools/one-api.sh builds it), a gateway
// that relays OpenAI's API to the servers of its channels, with one
// channel: upstream (a model server's root, http://127.0.0.1:PORT),
// serving models (comma separated). It listens on every interface, with
// no option to bind one, so it runs in a network namespace of its own, as
// llm-d-inference-sim does: reached through a relay on 127.0.0.1, and
// reaching upstream through a relay back out. Its database is a fresh
// SQLite file; requests carry Bearer sk-OneAPIToken.
func OneAPI(t testing.TB, upstream, models string) *Server {
	t.Helper()
	bin := binary(t, OneAPIEnv, "tools/one-api.sh")
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("one-api is kept off the network in a namespace of its own, and unshare -n fails here: %v", err)
		}
		t.Skipf("one-api listens on every interface; keeping it to loopback needs unshare -n, which fails here: %v", err)
	}
	const inner, back = 3000, 9000 // its port inside its namespace, and the way out
	dir := t.TempDir()
	const admin = "tokenprobeadminaccess0123456789"
	s := &Server{t: t, name: "one-api", health: "/api/status", argv: func(int) []string {
		return []string{"unshare", "-n", "--", "sh", "-c", `ip link set lo up && exec "$@"`, "sh",
			bin, "--port", fmt.Sprint(inner), "--log-dir", dir}
	}, env: []string{"SQLITE_PATH=" + filepath.Join(dir, "one-api.db"), "TIKTOKEN_CACHE_DIR=" + bin + ".tiktoken",
		"INITIAL_ROOT_TOKEN=" + OneAPIToken, "INITIAL_ROOT_ACCESS_TOKEN=" + admin, "SESSION_SECRET=tokenprobe-test"}}
	s.inner = fmt.Sprintf("127.0.0.1:%d", inner)
	s.start(freePort(t))
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	b, err := openBackRelay(fmt.Sprintf("/proc/%d/ns/net", pid), fmt.Sprintf("127.0.0.1:%d", back), strings.TrimPrefix(upstream, "http://"))
	if err != nil {
		t.Fatalf("one-api: the relay to its upstream: %v", err)
	}
	t.Cleanup(b.close)
	body := fmt.Sprintf(`{"type":1,"key":"sk-upstream","name":"upstream","base_url":"http://127.0.0.1:%d","models":%q,"group":"default"}`, back, models)
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/channel/", strings.NewReader(body))
	req.Header.Set("Authorization", admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := oneShot.Do(req)
	if err != nil {
		t.Fatalf("one-api: adding its channel: %v\n%s", err, s.Logs())
	}
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"success":true`)) {
		t.Fatalf("one-api: adding its channel: HTTP %d %s", resp.StatusCode, got)
	}
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
	// One writer for both streams: two, each with a lock of its own, wrote
	// the one buffer at once (the race detector caught it with Portkey's
	// gateway, which writes both).
	out := &syncWriter{w: logs}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	// Killed with this process, whichever of its threads ends first
	// (childproc: one-api was killed mid-test, 3 starts in 60, when a
	// relay's goroutine ended on the thread that had started it).
	wait, err := childproc.Start(cmd)
	if err != nil {
		s.t.Fatalf("%s: %v", s.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.logs, s.stopped = cmd, exited, out, false
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
		resp, err := oneShot.Get(health)
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

// Name is the server's name (llama-server, llm-d-inference-sim), for a
// test's messages.
func (s *Server) Name() string { return s.name }

// Logs is what the server printed so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

// String is what was written so far.
func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
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

// oneShot is the client of the harness's own calls (readiness, set-up):
// a connection each, bounded in time.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}

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

// SlowPrefill is llama-server with one slot of 4096 tokens prefilling in
// batches of 32: a prefix of 1,024 words takes about 0.3 s cold (a tenth
// of that in its default batches), so that a probe that is not starved
// beside a busy host's other tests can tell it apart from a warm one (a
// 20 ms TTFT starved the probe under the race detector: its own delay
// p99 was over a tenth of it, and the verdicts were rightly withheld).
// One slot: two endpoints on one server would take each other's cached
// prompt.
func SlowPrefill(t testing.TB) *Server {
	return LlamaServer(t, "-np", "1", "-b", "32", "-ub", "32")
}
