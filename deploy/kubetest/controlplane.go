// Package kubetest applies tokenprobe's Kubernetes manifests and Helm chart
// to a real API server and reads them back (Check), and starts a control
// plane of its own for the test suite (Start): etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok's fake nodes, built
// from the Go module proxy by tools/kube.sh. There is no kubelet and no
// container runtime: pods are scheduled and marked running (or, a Job's,
// complete) by kwok, never run.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/internal/childproc"
)

// The versions tools/kube.sh builds (and deploy/README.md names): the
// binaries carry them in their names.
const (
	Kubernetes = "v1.37.2"
	Etcd       = "v3.7.3"
	Kwok       = "v0.8.0"
	Helm       = "v3.22.0"
)

// The CRDs' versions, as deploy/go.mod pins their Go types; tools/kube.sh
// copies the CRDs from the same modules into crds-<name>-<version>.
var CRDs = map[string]string{
	"prometheus-operator": "v0.85.0",
	"argo-rollouts":       "v1.10.1",
	"flagger":             "v1.36.1",
}

// Env names the folder tools/kube.sh printed; RequireEnv=1 makes a test
// fail rather than skip without it (.ci/run sets it).
const (
	Env        = "TOKENPROBE_KUBE"
	RequireEnv = "TOKENPROBE_REQUIRE_KUBE"
)

// Nodes are the fake nodes Start registers: GPUNode carries the label the
// chart's DaemonSet selects (nvidia.com/gpu.present=true), PlainNode none.
const (
	GPUNode   = "kwok-gpu-0"
	PlainNode = "kwok-cpu-0"
)

// ControlPlane is a running control plane.
type ControlPlane struct {
	Kubeconfig string // a kubeconfig with a token of system:masters
	Kubectl    string
	Helm       string
	dir        string
	procs      []*proc // in start order
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	wait func() error
	done chan struct{}
	err  error
}

// Start starts a control plane from the binaries in bin, keeping its
// state, certificates and logs under dir, and returns once the API server
// is ready, the controllers and the scheduler run and both fake nodes are
// Ready; ctx bounds the wait. Stop ends it.
func Start(ctx context.Context, bin, dir string) (_ *ControlPlane, err error) {
	cp := &ControlPlane{dir: dir, Kubectl: filepath.Join(bin, "kubectl-"+Kubernetes), Helm: filepath.Join(bin, "helm-"+Helm)}
	for _, b := range []string{"etcd-" + Etcd, "kube-apiserver-" + Kubernetes, "kube-controller-manager-" + Kubernetes, "kube-scheduler-" + Kubernetes, "kubectl-" + Kubernetes, "kwok-" + Kwok, "helm-" + Helm} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s: %w (tools/kube.sh builds it)", b, err)
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, cp.Logs(2000))
			cp.Stop()
		}
	}()
	if err := writeCertificates(dir); err != nil {
		return nil, err
	}
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	tok := hex.EncodeToString(token)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tok+`,tokenprobe-test,tokenprobe-test,"system:masters"`+"\n"), 0o600); err != nil {
		return nil, err
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, cmPort, schedPort, kwokPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	cp.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, []byte(kubeconfig(server, filepath.Join(dir, "ca.crt"), tok)), 0o600); err != nil {
		return nil, err
	}
	p := func(name string) string { return filepath.Join(dir, name) }

	if err := cp.start(filepath.Join(bin, "etcd-"+Etcd), "etcd",
		"--name=default", "--data-dir="+p("etcd"), "--unsafe-no-fsync",
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdClient), fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdClient),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", etcdPeer), fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", etcdPeer)); err != nil {
		return nil, err
	}
	if err := cp.start(filepath.Join(bin, "kube-apiserver-"+Kubernetes), "kube-apiserver",
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdClient),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort), "--cert-dir="+p("apiserver-certs"),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"), "--client-ca-file="+p("ca.crt"),
		"--token-auth-file="+p("tokens.csv"), "--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		// On loopback the reconciler would publish 127.0.0.1 as the
		// kubernetes Service's endpoint, which the API refuses.
		"--endpoint-reconciler-type=none"); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, server+"/readyz", tok); err != nil {
		return nil, err
	}
	if err := cp.start(filepath.Join(bin, "kube-controller-manager-"+Kubernetes), "kube-controller-manager",
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(cmPort), "--leader-elect=false",
		"--service-account-private-key-file="+p("sa.key"), "--root-ca-file="+p("ca.crt"),
		"--cluster-cidr=10.244.0.0/16", "--service-cluster-ip-range=10.96.0.0/16"); err != nil {
		return nil, err
	}
	if err := cp.start(filepath.Join(bin, "kube-scheduler-"+Kubernetes), "kube-scheduler",
		"--kubeconfig="+cp.Kubeconfig, "--authentication-kubeconfig="+cp.Kubeconfig, "--authorization-kubeconfig="+cp.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort), "--leader-elect=false"); err != nil {
		return nil, err
	}
	// kwok gives pods addresses from its CIDR: one out of the service range.
	// Its stages (nodes Ready with a heartbeat; pods Running, a Job's
	// then Succeeded) are the files of its module that tools/kube.sh keeps.
	stages, _ := filepath.Glob(filepath.Join(bin, "kwok-"+Kwok+"-stages", "*.yaml"))
	if len(stages) == 0 {
		return nil, fmt.Errorf("no kwok stage files in %s (tools/kube.sh copies them)", filepath.Join(bin, "kwok-"+Kwok+"-stages"))
	}
	kwokArgs := []string{"--kubeconfig=" + cp.Kubeconfig, "--manage-all-nodes=true", "--cidr=10.244.0.1/24", "--node-ip=127.0.0.1",
		fmt.Sprintf("--server-address=127.0.0.1:%d", kwokPort)}
	for _, f := range stages {
		kwokArgs = append(kwokArgs, "--config="+f)
	}
	if err := cp.start(filepath.Join(bin, "kwok-"+Kwok), "kwok", kwokArgs...); err != nil {
		return nil, err
	}
	if _, err := cp.Run(ctx, []byte(nodes), "apply", "--server-side", "-f", "-"); err != nil {
		return nil, err
	}
	for _, n := range []string{GPUNode, PlainNode} {
		if err := cp.WaitFor(ctx, "node/"+n+" Ready", "True", "get", "node", n, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`); err != nil {
			return nil, err
		}
	}
	// The default service account is the controller-manager's to make;
	// pods cannot be created in a namespace before it.
	if err := cp.WaitFor(ctx, "the default service account", "default", "get", "serviceaccount", "default", "-n", "default", "-o", "jsonpath={.metadata.name}", "--ignore-not-found"); err != nil {
		return nil, err
	}
	return cp, nil
}

// WaitFor runs kubectl with args until its output is want, a process of
// the control plane exits (its log's tail is the error), or ctx ends
// (the last output is the error).
func (cp *ControlPlane) WaitFor(ctx context.Context, what, want string, args ...string) error {
	var last string
	for {
		if err := cp.exited(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		out, err := cp.Run(ctx, nil, args...)
		if err == nil && strings.TrimSpace(string(out)) == want {
			return nil
		}
		last = strings.TrimSpace(string(out))
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s (last: %q): %w", what, last, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Run runs kubectl against the control plane with stdin, returning its
// standard output; an error carries its standard error.
func (cp *ControlPlane) Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return Kubectl{Path: cp.Kubectl, Kubeconfig: cp.Kubeconfig}.Run(ctx, stdin, args...)
}

func (cp *ControlPlane) start(path, name string, args ...string) error {
	logPath := filepath.Join(cp.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	wait, err := childproc.Start(cmd)
	if err != nil {
		_ = f.Close()
		return err
	}
	pr := &proc{name: name, cmd: cmd, log: logPath, wait: wait, done: make(chan struct{})}
	go func() {
		pr.err = pr.wait()
		_ = f.Close()
		close(pr.done)
	}()
	cp.procs = append(cp.procs, pr)
	return nil
}

// waitReady polls url until it answers 200, a process of the control
// plane exits (its log's tail is the error), or ctx ends.
func (cp *ControlPlane) waitReady(ctx context.Context, url, token string) error {
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(cp.dir, "ca.crt"))
	if err != nil {
		return err
	}
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	var last string
	for {
		if err := cp.exited(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (last answer: %s): %w", url, last, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exited says which process of the control plane has ended, with its
// log's tail.
func (cp *ControlPlane) exited() error {
	for _, p := range cp.procs {
		select {
		case <-p.done:
			why := p.err
			if why == nil {
				why = errors.New("exit status 0")
			}
			return fmt.Errorf("%s exited (%w); its log ends:\n%s", p.name, why, tail(p.log, 3000))
		default:
		}
	}
	return nil
}

// Logs returns the tail of every process's log, for a failed test.
func (cp *ControlPlane) Logs(n int) string {
	var b strings.Builder
	for _, p := range cp.procs {
		fmt.Fprintf(&b, "=== %s\n%s\n", p.name, tail(p.log, n))
	}
	return b.String()
}

// Stop ends the processes in the reverse order of their start: SIGTERM,
// a second one after 5 s (the API server has been seen to outlive the
// first), SIGKILL after 15.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		p := cp.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			continue
		case <-time.After(5 * time.Second):
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	cp.procs = nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func kubeconfig(server, ca, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tokenprobe-test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: tokenprobe-test
  user: {token: %q}
contexts:
- name: tokenprobe-test
  context: {cluster: tokenprobe-test, user: tokenprobe-test}
current-context: tokenprobe-test
`, server, ca, token)
}

// nodes are the fake nodes: kwok manages every node (--manage-all-nodes)
// and makes them Ready. One carries the label NVIDIA's GPU operator puts on
// a GPU node, which the chart's DaemonSet selects.
const nodes = `apiVersion: v1
kind: Node
metadata:
  name: ` + GPUNode + `
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: ` + GPUNode + `, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok, nvidia.com/gpu.present: "true"}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata:
  name: ` + PlainNode + `
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: ` + PlainNode + `, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
`

// Kubectl runs a kubectl binary against a kubeconfig.
type Kubectl struct {
	Path       string
	Kubeconfig string
	// Stderr, when set, receives kubectl's standard error (warnings
	// included) of every successful call.
	Stderr func(args []string, stderr []byte)
}

// Run runs kubectl with stdin and returns its standard output; an error
// carries its standard error, cut to 4 KiB.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.Path, append([]string{"--kubeconfig=" + k.Kubeconfig}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := errb.Bytes()
		if len(msg) > 4096 {
			msg = msg[:4096]
		}
		return out.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(msg))
	}
	if k.Stderr != nil {
		k.Stderr(args, errb.Bytes())
	}
	return out.Bytes(), nil
}
