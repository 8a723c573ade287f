#!/usr/bin/env bash
# Builds llm-d-inference-sim v0.10.2 (a vLLM simulator in Go that nobody on
# this project wrote: its own vllm:* series, its own clock habits) from its
# Go module, once: kept as $(go env GOPATH)/bin/llm-d-inference-sim-v0.10.2,
# and its path printed. The module proxy refuses `go install` for it (no
# version list), so the module is downloaded and built from a writable copy.
# About 7 minutes on two idle cores. Run it with --force-dummy-tokenizer
# (else it reaches for a tokenizer hub at start) and keep it on loopback
# (it listens on every interface and has no bind flag: tests start it in
# its own network namespace or accept that, see e2e/realservers).
set -euo pipefail
version=v0.10.2
out="$(go env GOPATH)/bin/llm-d-inference-sim-$version"
if [ ! -x "$out" ]; then
  GOWORK=off GOFLAGS=-mod=mod go mod download "github.com/llm-d/llm-d-inference-sim@$version"
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  cp -r "$(go env GOMODCACHE)/github.com/llm-d/llm-d-inference-sim@$version/." "$src"
  chmod -R u+w "$src"
  (cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=0 go build -o "$out.tmp" ./cmd/llm-d-inference-sim) >&2
  mv "$out.tmp" "$out"
fi
echo "$out"
