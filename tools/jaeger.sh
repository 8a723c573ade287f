#!/usr/bin/env bash
# Builds Jaeger v2 (the module's v1.76.0, cmd/jaeger) for the end-to-end
# trace test, once: kept as $(go env GOPATH)/bin/jaeger-v1.76.0, its path
# printed. Jaeger's go.mod has replace directives, so `go install` refuses
# it; it is built as a tool of a throwaway module instead. About five
# minutes on two cores with the module downloads, seconds once cached.
set -euo pipefail
version=v1.76.0
out="$(go env GOPATH)/bin/jaeger-$version"
if [ ! -x "$out" ]; then
  mod=$(mktemp -d)
  trap 'rm -rf "$mod"' EXIT
  (cd "$mod" && GOWORK=off go mod init jaegerbuild >/dev/null 2>&1 &&
    GOWORK=off GOFLAGS=-mod=mod go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" &&
    GOWORK=off GOFLAGS=-mod=mod go build -o "$out" github.com/jaegertracing/jaeger/cmd/jaeger) >&2
fi
echo "$out"
