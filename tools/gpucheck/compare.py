#!/usr/bin/env python3
"""Sets tokenprobe's GPU readings beside nvidia-smi's, from tools/gpucheck/run.sh's output.

Usage: compare.py DIR   (DIR holds log.txt, nvidia-smi.csv, scrapes.txt, summary.json)

Prints a Markdown table: utilisation and power averaged over the same
windows (the load's phases, read from the log, and the `tokenprobe run`
window, read from its summary.json), tokenprobe's from its /metrics scraped
every second and from the run report, nvidia-smi's from its 500 ms log; and
the run's energy, tokenprobe's from the driver's energy counter against
nvidia-smi's power integrated over the run.
"""
import csv
import datetime as dt
import json
import re
import sys
from pathlib import Path

d = Path(sys.argv[1])


def smi_rows():
    with open(d / "nvidia-smi.csv") as f:
        r = csv.reader(f, skipinitialspace=True)
        head = next(r)
        for row in r:
            rec = dict(zip(head, row))
            t = dt.datetime.strptime(rec["timestamp"], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
            yield t.timestamp(), float(rec["utilization.gpu [%]"]), float(rec["power.draw [W]"])


smi = list(smi_rows())
tp = {}
for line in open(d / "scrapes.txt"):
    m = re.match(r"(\d+\.\d+) (DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_POWER_USAGE)\{.*\} (\S+)", line)
    if m:
        tp.setdefault(float(m.group(1)), {})[m.group(2)] = float(m.group(3))
tp = sorted((t, v["DCGM_FI_DEV_GPU_UTIL"], v["DCGM_FI_DEV_POWER_USAGE"]) for t, v in tp.items() if len(v) == 2)

marks = {m.group(1): float(m.group(2)) for m in re.finditer(r"load (full|half|idle) (\d+\.\d+)", (d / "log.txt").read_text())}
summary = json.loads((d / "summary.json").read_text())[0]


def ts(s):
    return dt.datetime.fromisoformat(s[:26].rstrip("Z") + "+00:00").timestamp()


start, end = ts(summary["start"]), ts(summary["end"])
# Each phase without its first and last 3 s: the readings of both tools
# average over the last sample period, so a step shows up a second late.
windows = [
    ("idle, before the load", min(t for t, *_ in smi) + 3, marks["full"] - 3),
    ("matrix products, full duty", marks["full"] + 3, marks["half"] - 3),
    ("matrix products, half duty (100 ms on, 100 ms off)", marks["half"] + 3, marks["idle"] - 3),
    ("idle, after the load", marks["idle"] + 3, max(t for t, *_ in tp) - 1),
]


def mean(rows, a, b, i):
    xs = [r[i] for r in rows if a <= r[0] <= b]
    return sum(xs) / len(xs), len(xs)


def pct(a, b):
    return 100 * (a - b) / b if b else 0.0


print("| window | seconds | tokenprobe util % | nvidia-smi util % | diff | tokenprobe power W | nvidia-smi power W | diff |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, a, b in windows:
    (tu, _), (su, _) = mean(tp, a, b, 1), mean(smi, a, b, 1)
    (tw, _), (sw, _) = mean(tp, a, b, 2), mean(smi, a, b, 2)
    print(f"| {name} | {b - a:.0f} | {tu:.1f} | {su:.1f} | {tu - su:+.1f} pt | {tw:.1f} | {sw:.1f} | {pct(tw, sw):+.2f}% |")
g = summary["gpu"]
(su, _), (sw, _) = mean(smi, start, end, 1), mean(smi, start, end, 2)
print(f"| `tokenprobe run`'s report ({g['samples']} readings) | {end - start:.0f} | {g['gpu_util_avg_percent']:.1f} | {su:.1f} | "
      f"{g['gpu_util_avg_percent'] - su:+.1f} pt | {g['power_avg_watts']:.1f} | {sw:.1f} | {pct(g['power_avg_watts'], sw):+.2f}% |")
# nvidia-smi's power integrated over the run (trapezoids over its 500 ms log).
pts = [(t, w) for t, _, w in smi if start <= t <= end]
joules = sum((t2 - t1) * (w1 + w2) / 2 for (t1, w1), (t2, w2) in zip(pts, pts[1:]))
joules *= (end - start) / (pts[-1][0] - pts[0][0])
print()
print(f"Energy over the run: tokenprobe {g['energy_joules']:.0f} J (the driver's energy counter), "
      f"nvidia-smi's power.draw integrated {joules:.0f} J ({pct(g['energy_joules'], joules):+.2f}%); "
      f"{g['joules_per_output_token']:.3f} J per output token over {summary['output_tokens']} output tokens.")
