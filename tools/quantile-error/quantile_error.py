#!/usr/bin/env python3
"""Classic-bucket quantile error against the exact figures of a run.

Usage: tokenprobe run -c configs/demo.yaml -p staircase -p baseline -p overload --artifacts-dir A
       python3 tools/quantile-error/quantile_error.py A

For every profile and load level it prints TTFT and ITL p50/p95/p99: the exact
figure (numpy's linear interpolation, as the run summary computes it) and what
Prometheus's histogram_quantile reads from the classic buckets of the catalog
(read from docs/METRICS.md), then the worst error of geometric
layouts of ratio 1.05 to 1.25. docs/METRICS.md quotes its output.
"""
import json, glob, math, sys
import os, re
# The classic layouts, as docs/METRICS.md lists them (generated from the catalog).
_docs = open(os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'METRICS.md')).read()
def layout(metric):
    return [float(x) for x in re.search(r"- `%s`: (.*)" % metric, _docs).group(1).split(',')]
TTFT = layout('tokenprobe_time_to_first_token_seconds')
GAP = layout('tokenprobe_inter_token_latency_seconds')
def exact(v,q):
    v=sorted(v); n=len(v); r=q*(n-1); lo=math.floor(r); hi=min(lo+1,n-1); return v[lo]+(v[hi]-v[lo])*(r-lo)
def prom(v,q,b):
    b=b+[float('inf')]; cum=[sum(1 for x in v if x<=u) for u in b]; rank=q*len(v)
    i=next(i for i,c in enumerate(cum) if c>=rank)
    if b[i]==float('inf'): return b[i-1]
    start=0 if i==0 else b[i-1]; cnt=cum[i]-(cum[i-1] if i>0 else 0); prev=cum[i-1] if i>0 else 0
    return start+(b[i]-start)*(rank-prev)/cnt
rows=[]
for f in glob.glob(sys.argv[1] + '/*/*/records.jsonl'):
    for l in open(f):
        r=json.loads(l)
        if r['outcome']=='success': rows.append(r)
levels=sorted(set((r['profile'],r['level']) for r in rows))
worst={}
for p,lv in levels:
    rs=[r for r in rows if r['profile']==p and r['level']==lv]
    for name,key,b in (('TTFT','ttft_ms',TTFT),('ITL','itl_ms',GAP)):
        v=[r[key]/1000 for r in rs if r.get(key) is not None]
        out=[]
        for q in (0.5,0.95,0.99):
            e=exact(v,q); c=prom(v,q,b); err=(c-e)/e*100; out.append(f"p{int(q*100)} {e*1000:.1f}->{c*1000:.1f} ({err:+.0f}%)")
            worst[name]=max(worst.get(name,0),abs(err))
        print(f"{p:10s} {lv:>4} {name:4s} n={len(v):3d} "+"  ".join(out))
print(worst)

def geo(lo,hi,r):
    b=[];x=lo
    while x<hi*1.0001: b.append(round(x,6)); x*=r
    return b
for r in (1.05,1.1,1.15,1.2,1.25):
    worst={}
    bt=geo(0.001,60,r); bg=geo(0.0005,2.5,r)
    for p,lv in levels:
        rs=[x for x in rows if x['profile']==p and x['level']==lv]
        for name,key,b in (('TTFT','ttft_ms',bt),('ITL','itl_ms',bg)):
            v=[x[key]/1000 for x in rs if x.get(key) is not None]
            for q in (0.5,0.95,0.99):
                e=exact(v,q); c=prom(v,q,b); worst[name]=max(worst.get(name,0),abs((c-e)/e*100))
    print(r, len(bt), len(bg), {k: round(v,1) for k,v in worst.items()})
