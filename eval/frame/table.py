#!/usr/bin/env python3
"""Writes results.md from the CSVs run.sh made: before and after side by side, with ratios."""
import csv
import sys
from collections import defaultdict
from pathlib import Path

here = Path(sys.argv[1])
rows = lambda name: list(csv.DictReader(open(here / name)))
out = ["# The frame, before and after (issue 35)", ""]
out += ["Machine and versions: `machine.txt`. Command: `eval/frame/run.sh`.", ""]

out += ["## k-means, k = 16,384, int8, 201,000 HOG vectors, 3 iterations", ""]
out += ["| backend | before s/iter | after s/iter | after / before | same vocabulary |",
        "|---|---|---|---|---|"]
km = defaultdict(dict)
for r in rows("kmeans.csv"):
    km[r["backend"]][r["version"]] = r
for backend, v in km.items():
    b, a = float(v["before"]["seconds_per_iteration"]), float(v["after"]["seconds_per_iteration"])
    same = v["before"]["vocabulary_sha256"] == v["after"]["vocabulary_sha256"]
    out.append(f"| {backend} | {b:.3f} | {a:.3f} | {a / b:.3f} | {'yes' if same else 'NO'} |")

out += ["", "## Quickstart outputs", ""]
qs = defaultdict(dict)
for r in rows("quickstart.csv"):
    qs[r["file"]][r["version"]] = r["sha256"]
differ = [f for f, v in qs.items() if v.get("before") != v.get("after")]
out.append(f"{len(qs)} files (vocabularies, histograms, encoding records, models, metrics, "
           f"accuracies); "
           f"{len(qs) - len(differ)} byte for byte the same" +
           (f"; differ: {', '.join(differ)}" if differ else "."))

out += ["", "## `vocab run configs/scene15.toml`, seconds per stage", ""]
out += ["| stage | before | after | after / before |", "|---|---|---|---|"]
s15 = defaultdict(dict)
for r in rows("scene15.csv"):
    s15[r["stage"]][r["version"]] = float(r["seconds"])
order = ["dataset", "features", "partition", "kmeans", "encode", "svm", "report"]
total = {"before": 0.0, "after": 0.0}
for stage in sorted(s15, key=lambda s: order.index(s) if s in order else 99):
    b, a = s15[stage].get("before", 0.0), s15[stage].get("after", 0.0)
    total["before"] += b
    total["after"] += a
    ratio = f"{a / b:.3f}" if b > 0 else "-"
    out.append(f"| {stage} | {b:.1f} | {a:.1f} | {ratio} |")
out.append(f"| total | {total['before']:.1f} | {total['after']:.1f} | "
           f"{total['after'] / max(total['before'], 1e-9):.3f} |")
(here / "results.md").write_text("\n".join(out) + "\n")
print("\n".join(out))
