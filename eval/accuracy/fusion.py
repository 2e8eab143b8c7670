#!/usr/bin/env python3
"""Late fusion of two encodings' linear SVMs (issue 53), from the predictions encodings.sh keeps.

For each fold and attribute, each held-out photo's decision values (one per model, the columns
`score <class>` of `vocab evaluate`'s predictions.csv) are the weighted mean of the two
variants' values, and the photo goes to the class the fused values choose (the largest; for two
classes, the second class when positive). The weight is fixed before looking (0.5: the plain
mean of the two SVMs' margins); nothing is tuned on the held-out folds.

usage: fusion.py A B [VIEW]   (variant names of encodings.sh; VIEW: single or both, default both:
       a --tta variant's photos scored with their mirror images; a name ending -upF is read from
       work/upF, where encodings.sh's WORK put it)
Prints one line per attribute: mean +- sample std over the folds of A, B and the fusion, and
appends the per-fold rows to fusion.csv (fold,a,b,view,attribute,accuracy).
"""
import csv
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "work" / "encodings"
WEIGHT = 0.5


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    classes = [h[len("score "):] for h in head[3:]]
    # By the path without its extension: an upscaled set's photos are PNGs of the same names.
    return classes, {str(Path(r[0]).with_suffix("")): (r[1], [float(v) for v in r[3:]]) for r in body}


def choose(classes, values, names):
    """The class fused values choose: names are every class (sorted), classes the scored ones."""
    if len(values) == 1:
        return names[1] if values[0] > 0 else names[0]
    return classes[max(range(len(values)), key=lambda k: values[k])]


def predictions(variant, fold, attr, view):
    up = re.search(r"-(up\d+)$", variant)
    work = HERE / "work" / up.group(1) if up else WORK
    model = work / f"model-{fold}-{variant}-{attr}.json"
    single = Path(f"{model}.single.csv")
    if view == "single" and single.exists():
        return read(single)
    return read(Path(f"{model}.predictions.csv"))


def main():
    a, b = sys.argv[1], sys.argv[2]
    view = sys.argv[3] if len(sys.argv) > 3 else "both"
    out = HERE / "fusion.csv"
    new = not out.exists()
    with open(out, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["fold", "a", "b", "view", "attribute", "accuracy_a", "accuracy_b", "accuracy_fused"])
        for attr in ["class", "urbanicity", "elevation"]:
            acc = {"a": [], "b": [], "fused": []}
            for fold in range(5):
                try:
                    ca, pa = predictions(a, fold, attr, view)
                    cb, pb = predictions(b, fold, attr, view)
                except FileNotFoundError:
                    continue
                assert ca == cb and pa.keys() == pb.keys(), (a, b, fold, attr)
                truths = {t for t, _ in pa.values()}
                names = sorted(truths | set(ca)) if len(ca) == 1 else ca
                hits = {"a": 0, "b": 0, "fused": 0}
                for path, (truth, va) in pa.items():
                    vb = pb[path][1]
                    fused = [(1 - WEIGHT) * x + WEIGHT * y for x, y in zip(va, vb)]
                    for key, v in (("a", va), ("b", vb), ("fused", fused)):
                        hits[key] += choose(ca, v, names) == truth
                for key in hits:
                    acc[key].append(hits[key] / len(pa))
                w.writerow([fold, a, b, view, attr] + [f"{acc[k][-1]:.4f}" for k in ("a", "b", "fused")])
            if acc["a"]:
                line = ", ".join(
                    f"{k} {100 * statistics.mean(v):.1f} +- {100 * statistics.stdev(v) if len(v) > 1 else 0:.1f}"
                    for k, v in acc.items()
                )
                print(f"{attr} ({len(acc['a'])} folds, {view}): {line}")


if __name__ == "__main__":
    main()
