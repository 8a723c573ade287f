#!/usr/bin/env bash
# Builds llama.cpp's llama-server on CPU from the llama.cpp tree that npm's
# node-llama-cpp 3.22.1 ships (a git bundle of llama.cpp de3ff81), and writes
# a random-weight tiny llama with that tree's own gguf-py (tinyllama.py beside
# this script), a second one of other weights under the same name, and the
# first one's weights in F16 and in Q8_0, once: all are kept in
# $(go env GOPATH)/bin as llama-server-de3ff81, tiny-llama-de3ff81.gguf,
# tiny-llama-other-de3ff81.gguf, tiny-llama-f16-de3ff81.gguf and
# tiny-llama-q8_0-de3ff81.gguf, and the
# server's path is printed. No GPU, no curl, no OpenSSL, no tests or examples. About 10 minutes
# on two idle cores. Needs npm, cmake, g++ and python3 with numpy (Debian's
# cmake, g++, python3-numpy).
set -euo pipefail
pkg=node-llama-cpp@3.22.1
commit=de3ff81
bin="$(go env GOPATH)/bin"
out="$bin/llama-server-$commit"
model="$bin/tiny-llama-$commit.gguf"
other="$bin/tiny-llama-other-$commit.gguf"
f16="$bin/tiny-llama-f16-$commit.gguf"
q8="$bin/tiny-llama-q8_0-$commit.gguf"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if [ ! -x "$out" ] || [ ! -s "$model" ] || [ ! -s "$other" ] || [ ! -s "$f16" ] || [ ! -s "$q8" ]; then
  mkdir -p "$bin"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "$pkg" >/dev/null &&
    tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle &&
    git clone -q package/llama/gitRelease.bundle llama.cpp 2>/dev/null) >&2
  got=$(git -C "$work/llama.cpp" rev-parse --short=7 HEAD)
  if [ "$got" != "$commit" ]; then echo "$pkg ships llama.cpp $got, not $commit" >&2; exit 1; fi
  if [ ! -x "$out" ]; then
    (cd "$work/llama.cpp" &&
      cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_SERVER=ON >/dev/null &&
      cmake --build build --target llama-server -j "$(nproc)" >/dev/null) >&2
    cp "$work/llama.cpp/build/bin/llama-server" "$out.tmp" && mv "$out.tmp" "$out"
  fi
  if [ ! -s "$model" ]; then
    "$py" "$(dirname "$0")/llamacpp/tinyllama.py" "$work/llama.cpp" "$model.tmp" >/dev/null
    mv "$model.tmp" "$model"
  fi
  "$py" "$(dirname "$0")/llamacpp/tinyllama.py" "$work/llama.cpp" "$other.tmp" 2 >/dev/null
  mv "$other.tmp" "$other"
  # The first model's weights (its seed) in two other precisions.
  "$py" "$(dirname "$0")/llamacpp/tinyllama.py" "$work/llama.cpp" "$f16.tmp" 20261126 f16 >/dev/null
  mv "$f16.tmp" "$f16"
  "$py" "$(dirname "$0")/llamacpp/tinyllama.py" "$work/llama.cpp" "$q8.tmp" 20261126 q8_0 >/dev/null
  mv "$q8.tmp" "$q8"
fi
echo "$out"
