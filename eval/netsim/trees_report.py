"""Markdown summary of experiments.sh trees: mst broadcasts and stage-3 gathers with trees built
from measured links against fixed trees, random orders and Open MPI, per scenario (issue 19),
with the model's predictions and the Monte Carlo check read from the calibration log.

usage: python3 eval/netsim/trees_report.py results/trees-<tag>.csv results/trees-<tag>-calibration.txt
"""
import csv
import re
import statistics
import subprocess
import sys
from collections import defaultdict

table, log = sys.argv[1], sys.argv[2]
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
flags = next((l.split(":", 1)[1].split() for l in cpu.splitlines() if l.startswith("Flags")), [])
isa = ", ".join(f for f in ("avx2", "fma", "avx512f", "avx512_vnni") if f in flags)

rows = defaultdict(list)
for r in csv.DictReader(open(table)):
    rows[(r["scenario"], r["collective"], r["order"])].append(float(r["seconds"]))

# Calibrations by (scenario, collective): seconds measuring, and the model's lines.
calibrations = {}
key = None
number = r"([0-9.]+) ms"
for line in open(log):
    head = re.match(r"== (\w+) (\w+) (\w+)", line)
    if head:
        scenario, collective, order = head.groups()
        key = (scenario, "broadcast" if collective == "mst" else "gather") if order == "auto" else None
        continue
    if key is None:
        continue
    c = calibrations.setdefault(key, {})
    m = re.match(r"calibration: (\d+) members in ([0-9.]+) s", line)
    if m:
        c["seconds"] = float(m.group(2))
    tree = "broadcast tree" if key[1] == "broadcast" else "gather tree"
    if line.startswith(tree):
        m = re.search(
            rf"model: {number}; 1,000 random trees: median {number}, best {number}, ([0-9.]+)% "
            rf"slower than this one; (binomial|direct) {number}",
            line,
        )
        if m:
            c.update(
                model=float(m.group(1)) / 1e3,
                median=float(m.group(2)) / 1e3,
                best=float(m.group(3)) / 1e3,
                beats=float(m.group(4)),
                fixed=float(m.group(6)) / 1e3,
            )
        c["tree"] = line.split(":", 1)[1].split(" (model")[0].strip()


def mean(values):
    return statistics.mean(values) if values else float("nan")


def cell(values):
    return f"{mean(values):.2f}" if values else "-"


print("# Trees from measured links on an emulated cluster without rack labels")
print()
print(f"Machine: {model}, 2 cores ({isa}). Command: `eval/netsim/experiments.sh trees`.")
print("8 nodes on 3 racks (core uplinks 40/30/25 Mbit/s, node links 50 Mbit/s; `slow`: n4's")
print("upload at 10 Mbit/s), no rack labels in the cluster file. Seconds, mean of 2 runs (random: one")
print("run per seed). mst broadcasts of 16 MiB; gathers of 2 MiB from each of the 8 workers.")
print()
print("## mst broadcast (Algorithm 3)")
print()
print("| scenario | auto (measured tree) | binomial, rack-label chain | binomial, file order | binomial, random orders: median (min-max, n) | MPI_Bcast | random median / auto | auto / rack |")
print("|---|---|---|---|---|---|---|---|")
scenarios = sorted({s for s, _, _ in rows})
for s in scenarios:
    get = lambda o: rows.get((s, "broadcast", o), [])
    random = get("random")
    med = statistics.median(random) if random else float("nan")
    rand = f"{med:.2f} ({min(random):.2f}-{max(random):.2f}, {len(random)})" if random else "-"
    print(
        f"| {s} | {cell(get('auto'))} | {cell(get('rack'))} | {cell(get('none'))} | {rand} "
        f"| {cell(get('mpi'))} | {med / mean(get('auto')):.2f} | {mean(get('auto')) / mean(get('rack')):.2f} |"
    )
print()
print("## Stage-3 gather (Algorithm 4)")
print()
print("| scenario | auto (gather tree or direct, as the model chose) | direct (every worker to the driver) | MPI_Gather | auto / direct |")
print("|---|---|---|---|---|")
for s in scenarios:
    get = lambda o: rows.get((s, "gather", o), [])
    print(
        f"| {s} | {cell(get('auto'))} | {cell(get('rack'))} | {cell(get('mpi'))} "
        f"| {mean(get('auto')) / mean(get('rack')):.2f} |"
    )
print()
print("## The model and the Monte Carlo check (1,000 random trees under the cost model)")
print()
print("| scenario | collective | tree chosen | predicted | measured | fixed tree predicted (binomial / direct) | random trees: median, best | chosen beats | calibration s | calibration / time saved against the median random order |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (s, collective), c in sorted(calibrations.items()):
    if "model" not in c:
        continue
    measured = mean(rows.get((s, collective, "auto"), []))
    random = rows.get((s, collective, "random"), []) or rows.get((s, collective, "rack"), [])
    saved = (statistics.median(random) if random else float("nan")) - measured
    payback = f"{c.get('seconds', float('nan')) / saved:.1f}" if saved > 0 else "never"
    print(
        f"| {s} | {collective} | `{c.get('tree', '?')}` | {c['model']:.2f} | {measured:.2f} | {c['fixed']:.2f} "
        f"| {c['median']:.2f}, {c['best']:.2f} | {c['beats']:.1f}% | {c.get('seconds', float('nan')):.1f} | {payback} |"
    )
print()
print("The last column is how many broadcasts (or gathers) the measuring costs, against the median")
print("random order for broadcasts and against the direct gather for gathers; a k-means run pays it")
print("once per job (links are saved and reused) plus once per re-measurement.")
