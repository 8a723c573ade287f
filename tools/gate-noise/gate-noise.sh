#!/usr/bin/env bash
# The README's gate on pairs of runs, beside busy loops (docs/MEASUREMENT.md,
# "The gate on a busy host"):
#
#   tools/gate-noise/gate-noise.sh [PAIRS] [BURNERS]     # default 20 pairs, 8 busy loops
#
# Starts two `tokenprobe sim` servers, one 20% slower at every step (prefill
# and decode), runs the README's command line against them in pairs (each
# pair: the normal server twice, then the normal and the slower one), and
# gates each pair with the README's `compare --fail-on`. The busy loops run
# at the same priority as tokenprobe (not niced). Prints one line per pair
# and a tally; the runs' artifacts stay under $OUT (default a new temporary
# folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
pairs=${1:-20}
burners=${2:-8}
out=${OUT:-$(mktemp -d)}
gate='ttft.p95>+10%,goodput<-5%'
go build -o "$out/tokenprobe" ./cmd/tokenprobe
tp="$out/tokenprobe"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
normal=$(port) slower=$(port)
"$tp" sim --listen 127.0.0.1:$normal --slots 8 --prefill-base 5ms --prefill-per-token 100us --decode-base 5ms --log.level=warn & sims=($!)
"$tp" sim --listen 127.0.0.1:$slower --slots 8 --prefill-base 6ms --prefill-per-token 120us --decode-base 6ms --log.level=warn & sims+=($!)
busy=()
for _ in $(seq "$burners"); do sh -c 'while :; do :; done' & busy+=($!); done
trap 'kill "${sims[@]}" "${busy[@]}" 2>/dev/null' EXIT
sleep 1
# The README's command line, its URL this host's simulator.
run() { # PORT DIR
  "$tp" run --url "http://127.0.0.1:$1/v1" --model tokenprobe-sim --concurrency 8 --requests 200 \
    --input-tokens 512,50 --output-tokens 128 --goodput 'ttft:500ms itl:50ms' --objective 0.9 \
    --progress-interval 0 --artifacts-dir "$2" >/dev/null 2>&1 || true
}
starved() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))[0]; p=s.get("probe",{}); print("starved" if p.get("starved") else "prompt", "delay-p99=%.1fms" % p.get("delay_p99_ms",0))' "$(ls "$1"/*/summary.json | head -1)"; }
declare -A tally
for i in $(seq "$pairs"); do
  for kind in same slower; do
    a="$out/$i-$kind-base" b="$out/$i-$kind-new"
    run $normal "$a"
    if [ $kind = same ]; then run $normal "$b"; else run $slower "$b"; fi
    set +e
    res=$("$tp" compare "$a" "$b" --fail-on "$gate" 2>&1); code=$?
    set -e
    tally[$kind-$code]=$(( ${tally[$kind-$code]:-0} + 1 ))
    echo "pair $i $kind: exit $code; base $(starved "$a"), new $(starved "$b")"
    echo "$res" | grep -E '^(FAILED|NOT ENOUGH|passed)' | sed 's/^/    /'
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in "${!tally[@]}"; do echo "$k: ${tally[$k]}"; done | sort
echo "artifacts: $out"
