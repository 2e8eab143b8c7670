"""Tables (markdown) and figures (PNG) from eval/netsim/results/*.csv.

usage: $(eval/setup-venv.sh) eval/netsim/report.py
"""
import csv
import pathlib
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
RES = HERE / "results"
LINK_MBIT = 200


def rows(name):
    path = RES / name
    return list(csv.DictReader(open(path))) if path.exists() else []


def mean(xs):
    return sum(xs) / len(xs)


out = ["# Broadcast on the emulated cluster", ""]
t7 = rows("table7.csv")
if t7:
    groups = defaultdict(list)
    for r in t7:
        groups[(int(r["bytes"]), r["algorithm"], int(r["nodes"]))].append(float(r["seconds"]))
    out += ["## Table 7 analogue: chain vs simple (node links 200 Mbit/s)", "",
            "| bytes | nodes | chain s | simple s | chain / single-link bound | simple / chain |", "|---|---|---|---|---|---|"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, size in zip(axes, sorted({k[0] for k in groups})):
        bound = size * 8 / (LINK_MBIT * 1e6)
        ns = sorted({k[2] for k in groups if k[0] == size})
        for alg in ("chain", "simple"):
            ax.plot(ns, [mean(groups[(size, alg, n)]) for n in ns], marker="o", label=alg)
        ax.axhline(bound, color="gray", linestyle="--", label="single-link bound")
        ax.set_title(f"{size >> 20} MiB")
        ax.set_xlabel("nodes")
        ax.set_ylabel("seconds")
        ax.legend()
        for n in ns:
            c, s = mean(groups[(size, "chain", n)]), mean(groups[(size, "simple", n)])
            out.append(f"| {size >> 20} MiB | {n} | {c:.3f} | {s:.3f} | {c / bound:.2f}x | {s / c:.2f}x |")
    fig.tight_layout()
    fig.savefig(RES / "table7.png", dpi=100)
    out.append("")
f8 = rows("figure8.csv")
if f8:
    by = defaultdict(list)
    for r in f8:
        by[r["order"]].append(float(r["seconds"]))
    out += ["## Figure 8 analogue: rack-ordered vs random chain (6 nodes, 3 racks, core 100 Mbit/s)", "",
            "| order | runs | mean s | min s | max s |", "|---|---|---|---|---|"]
    for order, xs in sorted(by.items()):
        out.append(f"| {order} | {len(xs)} | {mean(xs):.3f} | {min(xs):.3f} | {max(xs):.3f} |")
    plt.figure(figsize=(4, 3.5))
    plt.bar(list(by), [mean(v) for v in by.values()])
    plt.ylabel("seconds (16 MiB)")
    plt.tight_layout()
    plt.savefig(RES / "figure8.png", dpi=100)
    out.append("")
t8 = rows("table8.csv")
if t8:
    by = defaultdict(list)
    for r in t8:
        by[int(r["socket_buffer"])].append(float(r["seconds"]))
    out += ["## Table 8 analogue: socket buffer size (chain, 4 nodes, 16 MiB)", "",
            "| socket buffer | mean s |", "|---|---|"]
    for b, xs in sorted(by.items()):
        out.append(f"| {b >> 10} KiB | {mean(xs):.3f} |")
    out.append("")
mpi = rows("mpi.csv")
if mpi and t7:
    m = defaultdict(list)
    for r in mpi:
        m[(int(r["bytes"]), int(r["nodes"]))].append(float(r["seconds"]))
    out += ["## Chain vs Open MPI MPI_Bcast (same emulated cluster, 200 Mbit/s)", "",
            "| bytes | nodes | chain s | MPI_Bcast s | chain / MPI |", "|---|---|---|---|---|"]
    for (size, n), xs in sorted(m.items()):
        c = groups.get((size, "chain", n))
        if c:
            out.append(f"| {size >> 20} MiB | {n} | {mean(c):.3f} | {mean(xs):.3f} | {mean(c) / mean(xs):.2f}x |")
    out.append("")
c50 = rows("chain50.csv")
if c50:
    by = defaultdict(list)
    for r in c50:
        by[(int(r["bytes"]), int(r["nodes"]))].append(float(r["seconds"]))
    out += ["## Chain on 50 Mbit/s links (within what the 2-core host can emulate)", "",
            "| bytes | nodes | chain s | single-link bound s | ratio |", "|---|---|---|---|---|"]
    for (size, n), xs in sorted(by.items()):
        bound = size * 8 / 50e6
        out.append(f"| {size >> 20} MiB | {n} | {mean(xs):.3f} | {bound:.3f} | {mean(xs) / bound:.2f}x |")
    out.append("")
(RES / "results.md").write_text("\n".join(out) + "\n")
print("\n".join(out))
