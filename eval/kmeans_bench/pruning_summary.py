"""Summarises pruning.csv (see pruning.sh) into pruning.md: median seconds per iteration over
the rounds, full pass against pruned, side by side."""
import csv
import statistics
import sys
from collections import defaultdict

src, dst, cores = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(src)))
secs = defaultdict(list)
kept = {}
sizes = {}
for r in rows:
    key = (r["data"], int(r["k"]), r["mode"], int(r["iteration"]))
    secs[key].append(float(r["seconds"]))
    kept[key] = int(r["kept"])
datasets = sorted({(r["data"], int(r["k"])) for r in rows}, key=lambda d: d[0] != "synth")
n = {"synth": 200_000, "hog": 150_000}
lines = [f"Machine: {cores}-core VM; median of {len(secs[next(iter(secs))])} alternating rounds per iteration.", "",
         "| data | k | iteration | full pass s | pruned s | speed-up | labels kept by the global filter |",
         "|---|---|---|---|---|---|---|"]
for data, k in datasets:
    its = sorted({i for (d, kk, _, i) in secs if d == data and kk == k})
    for i in its:
        f = statistics.median(secs[(data, k, "full", i)])
        p = statistics.median(secs[(data, k, "pruned", i)])
        share = kept[(data, k, "pruned", i)] / n.get(data, 1)
        lines.append(f"| {data} | {k} | {i} | {f:.2f} | {p:.2f} | {f / p:.1f}x | {100 * share:.1f}% |")
    late = [i for i in its if i > 5]
    f = sum(statistics.median(secs[(data, k, "full", i)]) for i in late)
    p = sum(statistics.median(secs[(data, k, "pruned", i)]) for i in late)
    lines.append(f"| {data} | {k} | **{late[0]}-{late[-1]}** | **{f:.2f}** | **{p:.2f}** | **{f / p:.1f}x** | |")
open(dst, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
