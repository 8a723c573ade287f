#!/usr/bin/env bash
# The GPU series on a real GPU (issue 49): run on a machine with an NVIDIA
# GPU from the repository root, with a cgo build of tokenprobe in
# bin/tokenprobe (go-nvml and go-dcgm load their libraries at run time, but
# through cgo: a CGO_ENABLED=0 build reports both unavailable). It runs the
# daemon with gpu.source auto beside a PyTorch matrix-multiply load (full,
# then half duty, then idle), reads nvidia-smi at the same moments, and runs
# one profile with `tokenprobe run` for the report's GPU figures. Everything
# lands in $OUT (default ./gpucheck-out); tools/gpucheck/compare.py sets the
# two side by side. About two and a half minutes.
set -u
OUT=${OUT:-$PWD/gpucheck-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
bin=$PWD/bin/tokenprobe
work=$(mktemp -d)

echo "== machine"
date -u +%FT%TZ
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv
ldconfig -p | grep -E 'libnvidia-ml|libdcgm' || echo "no libnvidia-ml or libdcgm in ldconfig's cache"
command -v nv-hostengine dcgmi || echo "no nv-hostengine or dcgmi on PATH"
ldd "$bin" | head -5

cat >"$work/gpu.yaml" <<'YAML'
endpoints:
  - name: sim
    simulator: {slots: 4, decode_base: 10ms, seed: 1}
profiles:
  - name: probe
    endpoints: [sim]
    load: {concurrency: 4, duration: 40s}
    workload: {input_tokens: {mean: 100}, output_tokens: {mean: 32}, seed: 1}
    schedule: {every: 10m}
gpu:
  source: auto
  interval: 1s
YAML

echo "== nvidia-smi every 500 ms; the daemon; its /metrics every second"
q=timestamp,index,uuid,utilization.gpu,utilization.memory,power.draw,memory.used,memory.free,temperature.gpu,clocks.sm,clocks.mem
nvidia-smi --help-query-gpu | grep -q '"power.draw.instant"' && q=$q,power.draw.instant
nvidia-smi --query-gpu=$q --format=csv,nounits -lms 500 >"$OUT/nvidia-smi.csv" &
smi=$!
"$bin" -c "$work/gpu.yaml" --web.listen-address=127.0.0.1:9470 >"$OUT/daemon.log" 2>&1 &
daemon=$!
python3 - "$OUT/scrapes.txt" <<'PY' &
import sys, time, urllib.request
out = open(sys.argv[1], "w")
end = time.time() + 150
while time.time() < end:
    t = time.time()
    try:
        body = urllib.request.urlopen("http://127.0.0.1:9470/metrics", timeout=2).read().decode()
        for line in body.splitlines():
            if line.startswith(("DCGM_", "tokenprobe_gpu_source_up")):
                out.write(f"{t:.3f} {line}\n")
        out.flush()
    except Exception as e:  # the daemon may still be starting
        out.write(f"{t:.3f} # {e}\n")
    time.sleep(max(0, 1 - (time.time() - t)))
PY
poller=$!

echo "== load: 45 s full, 45 s at half duty, then idle"
python3 - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
time.sleep(10)
print("load full", time.time(), flush=True)
end = time.time() + 45
while time.time() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
print("load half", time.time(), flush=True)
end = time.time() + 45
while time.time() < end:
    t = time.time()
    while time.time() - t < 0.1:
        a @ b
        torch.cuda.synchronize()
    time.sleep(0.1)
print("load idle", time.time(), flush=True)
PY
load=$!

sleep 20
echo "== tokenprobe run during the load"
"$bin" run -c "$work/gpu.yaml" -p probe --artifacts-dir "$work/runs"
echo "run exit $?"
curl -s http://127.0.0.1:9470/metrics >"$OUT/exposition.txt" || python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9470/metrics').read().decode())" >"$OUT/exposition.txt"
wait $load
sleep 30
kill $poller $smi 2>/dev/null
kill -TERM $daemon; wait $daemon; echo "daemon exit $?"
find "$work/runs" -name summary.json -exec cp {} "$OUT/summary.json" \;

if ldconfig -p | grep -q libdcgm; then
  echo "== gpu.source: dcgm"
  sed 's/source: auto/source: dcgm/' "$work/gpu.yaml" >"$work/dcgm.yaml"
  "$bin" -c "$work/dcgm.yaml" --web.listen-address=127.0.0.1:9471 &
  d2=$!
  sleep 8
  python3 -c "import urllib.request;print(urllib.request.urlopen('http://127.0.0.1:9471/metrics').read().decode())" >"$OUT/dcgm-exposition.txt"
  kill -TERM $d2; wait $d2
fi
ls -la "$OUT"
