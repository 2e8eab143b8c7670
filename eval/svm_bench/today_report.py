"""Markdown table of today.csv: per feature set and attribute, each side's seconds (the C its
cross-validation chose, held-out accuracy), LinearSVC's time over vocab's, and per feature set
the stage (the three attributes together).

usage: python3 eval/svm_bench/today_report.py [today.csv]
"""
import csv
import statistics
import sys
from collections import defaultdict

here = sys.argv[0].rsplit("/", 1)[0] if "/" in sys.argv[0] else "."
path = sys.argv[1] if len(sys.argv) > 1 else f"{here}/today.csv"
NAMES = {
    "k1024": "bag of words, K = 1,024, chi2 map",
    "k4096": "bag of words, K = 4,096, chi2 map",
    "vlad64": "VLAD, K = 64",
    "fisher64": "Fisher vectors, 64 Gaussians x 64 dims",
}

runs = defaultdict(list)
info, sets, sides = {}, [], []
for r in csv.DictReader(open(path)):
    key = (r["name"], r["attribute"], r["side"])
    runs[key].append(r)
    info[(r["name"], r["attribute"])] = (int(r["dims"]), int(r["train"]))
    if r["name"] not in sets:
        sets.append(r["name"])
    if r["side"] not in sides:
        sides.append(r["side"])
others = [s for s in sides if s not in ("LinearSVC", "vocab")]


def seconds(name, attr, side):
    rows = runs.get((name, attr, side), [])
    return statistics.median(float(r["seconds"]) for r in rows) if rows else None


def cell(name, attr, side):
    rows = runs.get((name, attr, side), [])
    if not rows:
        return "-"
    r = rows[0]
    return f"{seconds(name, attr, side):.1f} ({r['c']}, {float(r['accuracy']):.3f})"


def ratio(a, b):
    return f"{a / b:.1f}x" if a and b else "-"


head = ["features", "values a photo", "attribute", "training photos", "LinearSVC s (C, acc)",
        "vocab s (C, acc)", "LinearSVC / vocab"]
for o in others:
    head += [f"{o} s (C, acc)", f"{o} / vocab"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for name in sets:
    attrs = [a for a in ("class", "urbanicity", "elevation") if (name, a) in info]
    total = defaultdict(float)
    for attr in attrs:
        dims, train = info[(name, attr)]
        row = [NAMES.get(name, name), f"{dims:,}", attr, str(train)]
        row += [cell(name, attr, "LinearSVC"), cell(name, attr, "vocab"),
                ratio(seconds(name, attr, "LinearSVC"), seconds(name, attr, "vocab"))]
        for o in others:
            row += [cell(name, attr, o), ratio(seconds(name, attr, o), seconds(name, attr, "vocab"))]
        for side in sides:
            total[side] += seconds(name, attr, side) or 0.0
        print("| " + " | ".join(row) + " |")
    row = [NAMES.get(name, name), "", "**the stage (3 attributes)**", "",
           f"**{total['LinearSVC']:.1f}**", f"**{total['vocab']:.1f}**",
           f"**{ratio(total['LinearSVC'], total['vocab'])}**"]
    for o in others:
        row += [f"**{total[o]:.1f}**", f"**{ratio(total[o], total['vocab'])}**"]
    print("| " + " | ".join(row) + " |")
