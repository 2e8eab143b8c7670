"""Summarises kernels.csv (see kernels.sh) into kernels.md: per data set and k, the median
seconds of each iteration over the rounds for the f32 and int8 kernels, their ratio, the
effective GFLOP/s (2 n k d per iteration, d = 512), and whether the vocabularies matched."""
import csv
import statistics
import sys
from collections import defaultdict

src, identical_file, dst, cores = sys.argv[1:5]
rows = list(csv.DictReader(open(src)))
identical = {(d, int(k)): same for d, k, same in csv.reader(open(identical_file))}
secs = defaultdict(list)
inertia = {}
size = {}
for r in rows:
    key = (r["data"], int(r["k"]), r["kernel"], int(r["iteration"]))
    secs[key].append(float(r["seconds"]))
    inertia[key] = float(r["inertia"])
    size[(r["data"], int(r["k"]))] = int(r["n"])
rounds = len(next(iter(secs.values())))
lines = [f"Machine: {cores}-core VM; median of {rounds} alternating rounds per iteration "
         "(iteration 1 of int8 includes quantising the rows).", "",
         "| data | n | k | iteration | f32 s | int8 s | int8 / f32 | f32 GFLOP/s | int8 GFLOP/s |",
         "|---|---|---|---|---|---|---|---|---|"]
notes = []
for data, k in sorted(size, key=lambda d: (d[0] != "synth", d[1])):
    n = size[(data, k)]
    flop = 2 * n * k * 512 / 1e9
    its = sorted({i for (d, kk, _, i) in secs if (d, kk) == (data, k)})
    tf = ti = 0.0
    for i in its:
        f = statistics.median(secs[(data, k, "f32", i)])
        q = statistics.median(secs[(data, k, "int8", i)])
        tf, ti = tf + f, ti + q
        lines.append(f"| {data} | {n} | {k} | {i} | {f:.2f} | {q:.2f} | {q / f:.2f} | {flop / f:.0f} | {flop / q:.0f} |")
    lines.append(f"| {data} | {n} | {k} | **all** | **{tf:.2f}** | **{ti:.2f}** | **{ti / tf:.2f}** | "
                 f"{flop * len(its) / tf:.0f} | {flop * len(its) / ti:.0f} |")
    last = its[-1]
    a, b = inertia[(data, k, "f32", last)], inertia[(data, k, "int8", last)]
    notes.append(f"- {data}, k = {k}: vocabularies byte-identical: {identical.get((data, k), '?')}; "
                 f"inertia after iteration {last}: f32 {a:.9e}, int8 {b:.9e} ({abs(a - b) / a:.1e} relative)")
open(dst, "w").write("\n".join(lines + [""] + notes) + "\n")
print("\n".join(lines + [""] + notes))
