"""Markdown summary of experiments.sh auto: broadcast seconds by chain order on an emulated
cluster without rack labels (issue 19), per scenario.

usage: python3 eval/netsim/auto_report.py results/auto-<name>.csv [more.csv ...]
"""
import csv
import statistics
import sys
from collections import defaultdict

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
