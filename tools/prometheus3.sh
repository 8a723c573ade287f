#!/usr/bin/env bash
# Builds Prometheus 3.16 and its promtool from their Go module (v0.316.0)
# for the end-to-end test and the rules' unit tests, once: the binaries are
# kept as $(go env GOPATH)/bin/prometheus-v0.316.0 and promtool-v0.316.0
# beside it, and the server's path printed. No web UI is built (the test uses the HTTP API) and
# no service discovery but static targets (-tags remove_all_sd). About a
# minute and a half on two cores, and the module downloads.
set -euo pipefail
version=v0.316.0 # the module's version of Prometheus 3.16.0
out="$(go env GOPATH)/bin/prometheus-$version"
tool="$(go env GOPATH)/bin/promtool-$version"
if [ ! -x "$out" ] || [ ! -x "$tool" ]; then
  GOWORK=off go mod download "github.com/prometheus/prometheus@$version"
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  cp -r "$(go env GOMODCACHE)/github.com/prometheus/prometheus@$version/." "$src"
  chmod -R u+w "$src"
  (cd "$src" && GOWORK=off GOFLAGS=-mod=mod go build -tags remove_all_sd \
    -ldflags "-X github.com/prometheus/common/version.Version=3.16.0" -o "$out" ./cmd/prometheus &&
    GOWORK=off GOFLAGS=-mod=mod go build -tags remove_all_sd \
    -ldflags "-X github.com/prometheus/common/version.Version=3.16.0" -o "$tool" ./cmd/promtool) >&2
fi
echo "$out"
