#!/usr/bin/env python3
"""vocab's linear SVM stage against scikit-learn's LinearSVC on today's features (issue 39).

usage: eval/.venv/bin/python eval/svm_bench/today.py NAME HISTOGRAMS LABELS SPLIT [--map chi2]
       [--attributes class,urbanicity,elevation] [--repeats N] [--vocab PATH]
       [--side NAME=PATH ...] [--out CSV]

Both sides get the same photos, the same training half (SPLIT, `path,split`), the same C grid
{0.01, 0.1, 1, 10, 100} chosen by 5-fold stratified cross-validation on the training half, a
final fit at the chosen C on the whole training half, and prediction of the held-out half.
With --map chi2 both train on the chi-squared kernel map of order 3 (Vedaldi and Zisserman;
numpy here computes the same values vocab's `KernelMap::apply` does: f64, rounded to f32).
scikit-learn: GridSearchCV(LinearSVC(), n_jobs=2) on arrays in memory, as liblinear takes them
best: mapped histograms (mostly zeros) as a float64 CSR matrix, dense vectors (VLAD, Fisher) as a
float64 array (its time: fit and predict only; the map, the conversion and the reading are not
counted). vocab: the `vocab train` and
`vocab evaluate` processes, whole (reading the file, mapping, CV, final fit, scoring); each
--side adds another vocab binary (e.g. an older commit's) under its own name, run the same way.
Each side runs REPEATS times, interleaved; one row a run goes to CSV (today.csv; appended).
"""
import argparse
import csv
import pathlib
import subprocess
import sys
import time

import numpy as np
import scipy.sparse
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import LinearSVC

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GRID = [0.01, 0.1, 1, 10, 100]


def histograms(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dims, count = int(raw[12:16].view("<u4")[0]), int(raw[16:24].view("<u8")[0])
    rec = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])
    recs = raw[32:].view(rec)[:count]
    paths = {int(r["picture_id"]): r["path"] for r in csv.DictReader(open(f"{path}.images.csv"))}
    return [paths[int(i)] for i in recs["id"]], np.asarray(recs["v"])


def chi2_map(x, order=3):
    """The map of the non-zero values only, as a float64 CSR matrix (a bin's 2n+1 values side by
    side, as vocab lays them out)."""
    period = 5.86 * np.sqrt(order) + 3.65
    step = 2 * np.pi / period
    j = np.arange(order + 1)
    scale = np.sqrt(np.where(j == 0, 1.0, 2.0) * step / np.cosh(np.pi * j * step))
    rows, cols = np.nonzero(x)
    v = x[rows, cols].astype(np.float64)
    root, log = np.sqrt(np.abs(v)), np.log(np.abs(v))
    sign = np.sign(v)
    width = 2 * order + 1
    vals = np.empty((v.size, width))
    vals[:, 0] = sign * root * scale[0]
    for k in range(1, order + 1):
        vals[:, 2 * k - 1] = sign * root * scale[k] * np.cos(k * step * log)
        vals[:, 2 * k] = sign * root * scale[k] * np.sin(k * step * log)
    vals = vals.astype(np.float32).astype(np.float64)
    r = np.repeat(rows, width)
    c = (cols[:, None] * width + np.arange(width)).reshape(-1)
    return scipy.sparse.csr_matrix((vals.reshape(-1), (r, c)), shape=(x.shape[0], x.shape[1] * width))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("histograms")
    ap.add_argument("labels")
    ap.add_argument("split")
    ap.add_argument("--map", default="none")
    ap.add_argument("--attributes", default="class")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--vocab", default=str(ROOT / "target" / "release" / "vocab"))
    ap.add_argument("--side", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--out", default=str(HERE / "today.csv"))
    a = ap.parse_args()
    sides = [("vocab", a.vocab)] + [tuple(s.split("=", 1)) for s in a.side]
    split = {r["path"]: r["split"] == "train" for r in csv.DictReader(open(a.split))}
    labels = list(csv.DictReader(open(a.labels)))
    paths, x = histograms(a.histograms)
    if a.map == "chi2":
        x = chi2_map(x)
    index = {p: i for i, p in enumerate(paths)}
    out = pathlib.Path(a.out)
    new = not out.exists()
    with open(out, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["name", "attribute", "map", "dims", "train", "held_out", "side", "repeat",
                        "seconds", "c", "accuracy"])
        for attr in a.attributes.split(","):
            lab = [(index[r["path"]], r[attr]) for r in labels if r.get(attr) and r["path"] in index]
            tr = [(i, y) for i, y in lab if split.get(paths[i])]
            te = [(i, y) for i, y in lab if split.get(paths[i]) is False]
            xtr, ytr = x[[i for i, _ in tr]], [y for _, y in tr]
            xte, yte = x[[i for i, _ in te]], np.array([y for _, y in te])
            if a.map == "none":
                xtr, xte = xtr.astype(np.float64), xte.astype(np.float64)
            for rep in range(a.repeats):
                t = time.perf_counter()
                search = GridSearchCV(LinearSVC(), {"C": GRID},
                                      cv=StratifiedKFold(5, shuffle=True, random_state=1), n_jobs=2)
                search.fit(xtr, ytr)
                acc = float(np.mean(search.predict(xte) == yte))
                secs = time.perf_counter() - t
                w.writerow([a.name, attr, a.map, x.shape[1], len(tr), len(te), "LinearSVC", rep,
                            f"{secs:.3f}", search.best_params_["C"], f"{acc:.4f}"])
                f.flush()
                print(f"{a.name} {attr} LinearSVC {secs:.2f} s C={search.best_params_['C']} acc={acc:.4f}",
                      file=sys.stderr)
                for side, vocab in sides:
                    model = HERE / "work" / f"{a.name}-{attr}-{side}.json"
                    model.parent.mkdir(exist_ok=True)
                    t = time.perf_counter()
                    cmd = [vocab, "--quiet", "train", "--histograms", a.histograms, "--labels",
                           a.labels, "--attribute", attr, "--split", a.split, "--cv", "5", "--out",
                           str(model)]
                    if a.map != "none":
                        cmd += ["--kernel-map", a.map]
                    trained = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                    ev = subprocess.run([vocab, "evaluate", "--model", str(model), "--histograms",
                                         a.histograms, "--labels", a.labels, "--held-out"],
                                        check=True, capture_output=True, text=True).stdout
                    secs = time.perf_counter() - t
                    acc = next(l.split()[1] for l in ev.splitlines() if l.startswith("accuracy "))
                    c = trained.split("C = ")[1].split()[0]
                    w.writerow([a.name, attr, a.map, x.shape[1], len(tr), len(te), side, rep,
                                f"{secs:.3f}", c, acc])
                    f.flush()
                    print(f"{a.name} {attr} {side} {secs:.2f} s C={c} acc={acc}", file=sys.stderr)

if __name__ == "__main__":
    main()
