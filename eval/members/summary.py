"""results.csv -> results.md: median of the trials per engine and team size."""
import csv
import statistics
import sys
from collections import defaultdict

rows = list(csv.DictReader(open(sys.argv[1])))
groups = defaultdict(list)
for r in rows:
    groups[(r["engine"], int(r["members"]))].append(r)
print("| engine | members | form the team (s) | s / iteration (iterations 2-5) | wall (s) | same vocabulary | trials |")
print("|---|---|---|---|---|---|---|")
for (engine, n), rs in sorted(groups.items()):
    med = lambda key: statistics.median(float(r[key]) for r in rs)  # noqa: E731
    same = "yes" if all(r["same_vocabulary"] == "yes" for r in rs) else "NO"
    print(f"| {engine} | {n} | {med('form_seconds'):.2f} | {med('seconds_per_iteration'):.3f} | "
          f"{med('wall_seconds'):.1f} | {same} | {len(rs)} |")
