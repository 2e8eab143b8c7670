"""Markdown summary of experiments.sh auto: broadcast seconds by chain order on an emulated
cluster without rack labels (issue 19), per scenario.

usage: python3 eval/netsim/auto_report.py results/auto-<name>.csv [more.csv ...]
"""
import csv
import statistics
import subprocess
import sys
from collections import defaultdict

cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
flags = next((l.split(":", 1)[1].split() for l in cpu.splitlines() if l.startswith("Flags")), [])
isa = ", ".join(f for f in ("avx2", "fma", "avx512f", "avx512_vnni") if f in flags)
print("# Chains from measured links on an emulated cluster without rack labels")
print()
print(f"Machine: {model}, 2 cores ({isa}). Command: `eval/netsim/experiments.sh auto`")
print("(`AUTO_CORES=100,75,60 AUTO_TAG=fastcores` for the second table). 8 nodes on 3 racks, 50 Mbit/s")
print("node links, 16 MiB chain broadcasts, seconds (mean of 2 runs; random: one run per seed).")
print()
for path in sys.argv[1:]:
    rows = defaultdict(list)
    for r in csv.DictReader(open(path)):
        rows[(r["scenario"], r["order"])].append(float(r["seconds"]))
    print(f"### `{path.split('/')[-1]}`")
    print()
    print("| scenario | auto | rack labels | file order | random: median (min-max, n) | MPI_Bcast | random median / auto | auto / rack |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario in sorted({s for s, _ in rows}):
        get = lambda o: rows.get((scenario, o), [])
        mean = lambda o: statistics.mean(get(o)) if get(o) else float("nan")
        random = get("random")
        med = statistics.median(random) if random else float("nan")
        mpi = f"{mean('mpi'):.2f}" if get("mpi") else "-"
        rand = f"{med:.2f} ({min(random):.2f}-{max(random):.2f}, {len(random)})" if random else "-"
        print(
            f"| {scenario} | {mean('auto'):.2f} | {mean('rack'):.2f} | {mean('none'):.2f} | {rand} | {mpi} "
            f"| {med / mean('auto'):.2f} | {mean('auto') / mean('rack'):.2f} |"
        )
    print()
