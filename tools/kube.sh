#!/usr/bin/env bash
# Builds a Kubernetes control plane for deploy/cluster's test from the Go
# module proxy alone (no images, no container runtime), once: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok
# (fake nodes) and helm, kept in $(go env GOPATH)/bin with their versions in
# their names, and that folder printed. Also kept there: kwok's stage files
# (kwok-v0.8.0-stages/) and the CRDs of prometheus-operator, Argo Rollouts
# and Flagger at the versions deploy/go.mod names (crds-*/).
#
# Cold, on two cores: 14 min 20 s for everything, the module downloads
# included (2026-12-07, niced beside light work). Each binary is built in a
# fixed folder under $(go env GOPATH)/src/tokenprobe-kube so that a rebuild
# after a lost binary reuses Go's build cache. Set KUBE_BUILD_JOBS=2 to
# build etcd, kwok and helm beside Kubernetes.
set -euo pipefail
export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=${GOTOOLCHAIN:-local}
k8s=v1.37.2 staging=v0.37.2 etcd=v3.7.3 kwok=v0.8.0 helm=v3.22.0
promop=v0.85.0 rollouts=v1.10.1 flagger=v1.36.1
bin="$(go env GOPATH)/bin"
work="$(go env GOPATH)/src/tokenprobe-kube"
mkdir -p "$bin" "$work"
cache="$(go env GOMODCACHE)"

# moddir downloads a module and prints its folder in the module cache;
# it fails, saying so, where the module cannot be had.
moddir() { # module version
  local dir
  # go mod download -json says why in its output, not its exit alone.
  dir=$(go mod download -json "$1@$2" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || true
  if [ -z "$dir" ]; then echo "kube.sh: $1@$2 could not be downloaded" >&2; return 1; fi
  echo "$dir"
}

# copyout copies a module out of the (read-only) module cache into a fixed,
# writable folder; a folder already there is kept (its build cache entries
# stay valid).
copyout() { # module version folder
  local dir="$work/$3"
  if [ ! -f "$dir/.copied" ]; then
    local src
    src=$(moddir "$1" "$2")
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$src/." "$dir"
    chmod -R u+w "$dir"
    touch "$dir/.copied"
  fi
  echo "$dir"
}

build_etcd() {
  local out="$bin/etcd-$etcd"
  [ -x "$out" ] && return
  local dir="$work/etcd-$etcd"
  mkdir -p "$dir"
  # etcd's own main sits in a module with relative replaces: a two-line
  # main of our own calls the same entry point.
  cat >"$dir/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  if [ ! -f "$dir/go.mod" ]; then
    (cd "$dir" && go mod init tokenprobe-kube/etcd >&2 && go mod edit -require="go.etcd.io/etcd/server/v3@$etcd" && go mod tidy >&2)
  fi
  (cd "$dir" && CGO_ENABLED=0 go build -o "$out.tmp" . >&2)
  mv "$out.tmp" "$out"
}

build_kubernetes() {
  local dir missing=0
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$bin/$b-$k8s" ] || missing=1
  done
  [ "$missing" = 0 ] && return
  dir=$(copyout k8s.io/kubernetes "$k8s" "kubernetes-$k8s")
  if [ ! -f "$dir/.edited" ]; then
    # The module's zip has no staging/ folder: every ./staging replace is
    # dropped for the published k8s.io module of the same release.
    # (A staging module the tree does not require, such as
    # k8s.io/sample-cli-plugin, is not served: its replace just goes.)
    local edits=() json
    json=$(cd "$dir" && go mod edit -json)
    for m in $(echo "$json" | tr -d ' \t\n' | grep -o '"Old":{"Path":"k8s.io/[^"]*"},"New":{"Path":"./staging/' | sed 's/"Old":{"Path":"\([^"]*\)".*/\1/'); do
      edits+=("-dropreplace=$m")
      if echo "$json" | tr -d ' \t\n' | grep -q "{\"Path\":\"$m\",\"Version\""; then
        edits+=("-require=$m@$staging")
      fi
    done
    echo "kube.sh: ${#edits[@]} edits of k8s.io/kubernetes' go.mod" >&2
    (cd "$dir" && go mod edit "${edits[@]}" && rm -f go.work go.work.sum)
    touch "$dir/.edited"
  fi
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$bin/$b-$k8s" ] && continue
    (cd "$dir" && CGO_ENABLED=0 go build -o "$bin/$b-$k8s.tmp" \
      -ldflags "-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=${k8s:1:1} -X k8s.io/component-base/version.gitMinor=$(echo "$k8s" | cut -d. -f2)" \
      "./cmd/$b" >&2)
    mv "$bin/$b-$k8s.tmp" "$bin/$b-$k8s"
  done
}

build_kwok() {
  local dir
  dir=$(copyout sigs.k8s.io/kwok "$kwok" "kwok-$kwok")
  if [ ! -x "$bin/kwok-$kwok" ]; then
    (cd "$dir" && CGO_ENABLED=0 go build -o "$bin/kwok-$kwok.tmp" ./cmd/kwok >&2)
    mv "$bin/kwok-$kwok.tmp" "$bin/kwok-$kwok"
  fi
  if [ ! -d "$bin/kwok-$kwok-stages" ]; then
    rm -rf "$bin/kwok-$kwok-stages.tmp"
    mkdir -p "$bin/kwok-$kwok-stages.tmp"
    # The fast node and pod stages: nodes ready, pods running then, for a
    # Job's pods, complete.
    for f in "$dir"/kustomize/stage/{node/fast,node/heartbeat-with-lease,pod/fast}/*.yaml; do
      [ "$(basename "$f")" = kustomization.yaml ] || cp "$f" "$bin/kwok-$kwok-stages.tmp/"
    done
    mv "$bin/kwok-$kwok-stages.tmp" "$bin/kwok-$kwok-stages"
  fi
}

build_helm() {
  [ -x "$bin/helm-$helm" ] && return
  local dir
  dir=$(copyout helm.sh/helm/v3 "$helm" "helm-$helm")
  (cd "$dir" && CGO_ENABLED=0 go build -o "$bin/helm-$helm.tmp" \
    -ldflags "-X helm.sh/helm/v3/internal/version.version=$helm" ./cmd/helm >&2)
  mv "$bin/helm-$helm.tmp" "$bin/helm-$helm"
}

# crds copies the CRDs shipped in a module's zip.
crds() { # module version glob name
  local out="$bin/crds-$4-$2"
  [ -d "$out" ] && return
  local dir
  dir=$(moddir "$1" "$2")
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  # shellcheck disable=SC2086 # the glob is meant to expand
  cp "$dir"/$3 "$out.tmp/"
  chmod -R u+w "$out.tmp"
  mv "$out.tmp" "$out"
}

crds github.com/prometheus-operator/prometheus-operator "$promop" 'example/prometheus-operator-crd/monitoring.coreos.com_*.yaml' prometheus-operator
crds github.com/argoproj/argo-rollouts "$rollouts" 'manifests/crds/*-crd.yaml' argo-rollouts
crds github.com/fluxcd/flagger "$flagger" artifacts/flagger/crd.yaml flagger
if [ "${KUBE_BUILD_JOBS:-1}" -gt 1 ]; then
  build_etcd & e=$!
  build_kwok & w=$!
  build_helm & h=$!
  build_kubernetes
  wait $e; wait $w; wait $h
else
  build_etcd
  build_kwok
  build_helm
  build_kubernetes
fi
echo "$bin"
