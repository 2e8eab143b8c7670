#!/usr/bin/env python3
"""The table of beside.sh's arms: each arm's mean +- sample sd over the 5 folds, and its gain fold
by fold over the HOG encoding it joins (the rows of eval/accuracy/encodings.csv, the same folds).

usage: python3 eval/descriptors/beside_report.py [ATTRIBUTE]   (default class; prints markdown)
"""
import csv
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOG = "fisher-g128-d64-p2-s8-mirror-patch24"


def read(path, attribute):
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["attribute"] == attribute:
                out.setdefault(r["variant"], {})[int(r["fold"])] = float(r["accuracy"])
    return out


def hog_half(variant):
    """The HOG encoding an arm joins (None for SIFT alone)."""
    if "+" not in variant:
        return None
    half = variant.split("+", 1)[0]
    return HOG if half == "hog" else half


def main():
    attribute = sys.argv[1] if len(sys.argv) > 1 else "class"
    arms = read(HERE / "beside.csv", attribute)
    hog = read(HERE.parent / "accuracy" / "encodings.csv", attribute)
    used = sorted({hog_half(v) for v in arms if hog_half(v)} | {HOG})
    print("| arm | folds | mean ± sd | per fold | gain over its HOG half, per fold (points) | mean gain |")
    print("|---|---|---|---|---|---|")
    rows = [(h, hog.get(h, {})) for h in used] + sorted(arms.items())
    for name, folds in rows:
        if not folds:
            continue
        acc = [folds[f] for f in sorted(folds)]
        sd = statistics.stdev(acc) if len(acc) > 1 else 0.0
        per = ", ".join(f"{100 * a:.1f}" for a in acc)
        base = hog.get(hog_half(name) or "", {})
        if base and all(f in base for f in folds):
            gains = [100 * (folds[f] - base[f]) for f in sorted(folds)]
            gain = ", ".join(f"{g:+.1f}" for g in gains)
            mean_gain = f"{statistics.mean(gains):+.1f}"
        else:
            gain = mean_gain = ""
        print(f"| {name} | {len(acc)} | {100 * statistics.mean(acc):.1f} ± {100 * sd:.1f} | {per} "
              f"| {gain} | {mean_gain} |")


if __name__ == "__main__":
    main()
