#!/usr/bin/env bash
# Installs Portkey's AI gateway, @portkey-ai/gateway 1.15.2 from npm (a
# gateway nobody on this project wrote: its own error shapes, its own
# retries), once, into $(go env GOPATH)/portkey-gateway-1.15.2, and prints
# the path of its server script: run it with `node SCRIPT --port=N
# --headless`. Its postinstall script (patch-package) is not run: the
# gateway starts without it. About 10 s with the registry reachable.
set -euo pipefail
version=1.15.2
dir="$(go env GOPATH)/portkey-gateway-$version"
script="$dir/node_modules/@portkey-ai/gateway/build/start-server.js"
if [ ! -f "$script" ]; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error "@portkey-ai/gateway@$version") >&2
fi
echo "$script"
