"""Markdown table of levers.sh: accuracy per variant and attribute, mean +- sd over the folds,
with the encode and SVM seconds per fold.

usage: python3 eval/accuracy/levers_report.py [levers.csv [levers-timings.csv]]
"""
import csv
import statistics
import sys
from collections import defaultdict

here = sys.argv[0].rsplit("/", 1)[0] if "/" in sys.argv[0] else "."
results = sys.argv[1] if len(sys.argv) > 1 else f"{here}/levers.csv"
timings = sys.argv[2] if len(sys.argv) > 2 else results.replace(".csv", "-timings.csv")

acc = defaultdict(list)
order = []
for r in csv.DictReader(open(results)):
    key = (r["variant"], r["attribute"])
    if r["variant"] not in order:
        order.append(r["variant"])
    acc[key].append(100 * float(r["accuracy"]))
seconds = defaultdict(list)
for r in csv.DictReader(open(timings)):
    if r["variant"]:
        # Encoding, and the 15-class SVMs (the binary ones are quick).
        stage = {"encode": "encode", "svm-class": "svm"}.get(r["stage"])
        if stage is None:
            continue
        seconds[(r["variant"], stage)].append(float(r["seconds"]))
known = ("class", "urbanicity", "elevation")
attributes = sorted({a for _, a in acc}, key=lambda a: known.index(a) if a in known else len(known))
print("| variant | " + " | ".join(f"{a} (%)" for a in attributes) + " | folds | encode s / fold | 15-class SVMs s / fold |")
print("|---|" + "---|" * len(attributes) + "---|---|---|")
for v in order:
    cells = []
    for a in attributes:
        xs = acc.get((v, a), [])
        cells.append(f"{statistics.mean(xs):.1f} ± {statistics.stdev(xs):.1f}" if len(xs) > 1 else (f"{xs[0]:.1f}" if xs else "-"))
    folds = max(len(acc.get((v, a), [])) for a in attributes)
    enc = seconds.get((v, "encode"), [])
    svm = seconds.get((v, "svm"), [])
    enc_cell = f"{statistics.mean(enc):.1f}" if enc else "-"
    svm_cell = f"{sum(svm) / folds:.1f}" if svm else "-"
    print(f"| {v} | " + " | ".join(cells) + f" | {folds} | {enc_cell} | {svm_cell} |")
