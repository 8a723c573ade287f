// Command deploy-test applies tokenprobe's Kubernetes objects (the Helm
// chart with each values file, the plain manifests, the alert and canary
// files) to the cluster a kubeconfig names, in namespaces of its own
// (tokenprobe-test-*, Pod Security restricted), by server-side apply with
// strict field validation; reads each back and compares it field by field
// with what was sent; lists every object and deletes the namespaces.
// It exits 1 when anything was refused, dropped, changed or warned of.
//
//	make deploy-test KUBECONFIG=~/.kube/config
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tokenprobe/tokenprobe/deploy/kubetest"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "the cluster's kubeconfig (default $KUBECONFIG)")
	kubectl := flag.String("kubectl", "", "the kubectl binary (default: $"+kubetest.Env+"/kubectl-"+kubetest.Kubernetes+" where set, else kubectl on PATH)")
	root := flag.String("root", "..", "the repository's root")
	installCRDs := flag.Bool("install-crds", false, "apply the pinned CRDs of prometheus-operator, Argo Rollouts and Flagger from $"+kubetest.Env+" first, replacing the cluster's: for a test cluster only")
	helm := flag.String("helm", "", "also install the chart with deploy/helm/example-values.yaml by this helm binary and compare what it stored")
	keep := flag.Bool("keep", false, "leave the namespaces and their objects in place")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "deploy-test: no kubeconfig: give -kubeconfig or set KUBECONFIG (make deploy-test KUBECONFIG=...)")
		os.Exit(2)
	}
	if *kubectl == "" {
		if dir := os.Getenv(kubetest.Env); dir != "" {
			*kubectl = filepath.Join(dir, "kubectl-"+kubetest.Kubernetes)
		} else if p, err := exec.LookPath("kubectl"); err == nil {
			*kubectl = p
		} else {
			fmt.Fprintln(os.Stderr, "deploy-test: no kubectl on PATH: give -kubectl (tools/kube.sh builds one)")
			os.Exit(2)
		}
	}
	opts := kubetest.Options{Helm: *helm, Keep: *keep, Progress: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "deploy-test: "+format+"\n", args...)
	}}
	if *installCRDs {
		dir := os.Getenv(kubetest.Env)
		if dir == "" {
			fmt.Fprintln(os.Stderr, "deploy-test: -install-crds reads the CRDs tools/kube.sh keeps: set "+kubetest.Env+" to the folder it prints")
			os.Exit(2)
		}
		for name, version := range kubetest.CRDs {
			opts.InstallCRDs = append(opts.InstallCRDs, filepath.Join(dir, "crds-"+name+"-"+version))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := kubetest.Check(ctx, kubetest.Kubectl{Path: *kubectl, Kubeconfig: *kubeconfig}, *root, opts)
	rep.Print(func(format string, args ...any) { fmt.Printf(format+"\n", args...) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy-test:", err)
		os.Exit(1)
	}
	if rep.Failed() {
		os.Exit(1)
	}
}
