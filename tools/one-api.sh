#!/usr/bin/env bash
# Builds one-api v0.6.10 (an OpenAI-compatible gateway in Go that nobody on
# this project wrote: it relays streams chunk by chunk) from its Go module,
# once: kept as $(go env GOPATH)/bin/one-api-v0.6.10, and its path printed.
# As for llm-d-inference-sim, the module is downloaded and built from a
# writable copy, with cgo for its SQLite. A few minutes on two idle cores. It listens on every
# interface with no option to bind one: tests run it in a network
# namespace of their own (internal/realserver).
set -euo pipefail
version=v0.6.10
out="$(go env GOPATH)/bin/one-api-$version"
if [ ! -x "$out" ]; then
  GOWORK=off GOFLAGS=-mod=mod go mod download "github.com/songquanpeng/one-api@$version"
  src=$(mktemp -d)
  trap 'rm -rf "$src"' EXIT
  cp -r "$(go env GOMODCACHE)/github.com/songquanpeng/one-api@$version/." "$src"
  chmod -R u+w "$src"
  (cd "$src" && GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=1 go build -o "$out.tmp" .) >&2
  mv "$out.tmp" "$out"
fi
# It loads tiktoken's encodings from the internet at start, or from
# TIKTOKEN_CACHE_DIR where a file named by the sha1 of the URL holds each:
# filled here from the module that ships them (pkoukk/tiktoken-go-loader),
# beside the binary, where internal/realserver points the variable.
cache="$out.tiktoken"
if [ ! -d "$cache" ]; then
  GOWORK=off GOFLAGS=-mod=mod go mod download github.com/pkoukk/tiktoken-go-loader@v0.0.2
  assets="$(go env GOMODCACHE)/github.com/pkoukk/tiktoken-go-loader@v0.0.2/assets"
  mkdir -p "$cache.tmp"
  for enc in cl100k_base o200k_base p50k_base r50k_base; do
    key=$(printf '%s' "https://openaipublic.blob.core.windows.net/encodings/$enc.tiktoken" | sha1sum | cut -d' ' -f1)
    cp "$assets/$enc.tiktoken" "$cache.tmp/$key"
  done
  chmod -R u+w "$cache.tmp"
  mv "$cache.tmp" "$cache"
fi
echo "$out"
