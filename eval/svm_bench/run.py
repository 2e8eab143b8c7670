"""vocab's linear SVM vs scikit-learn LinearSVC on the same histograms, split and C grid.

usage: $(eval/setup-venv.sh) eval/svm_bench/run.py   (after eval/accuracy/run.sh made its work/)
Both choose C by 5-fold stratified CV on the training half over {0.01, 0.1, 1, 10, 100}, train on
the training half, and are scored on the held-out half. Wall time covers CV, the final fit and
prediction (vocab: its train + evaluate commands; scikit-learn: GridSearchCV with n_jobs=2); each
side runs REPEATS times, interleaved, and the median is reported with the range.
Second table (same_c.csv): both trained with the same fixed C on the same training half, so the
solvers are compared on the same optimisation problem, without the choice of C in between.
"""
import csv
import json
import pathlib
import subprocess
import time

import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import LinearSVC

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = ROOT / "eval" / "accuracy" / "work"
LABELS = ROOT.parent / "shared" / "datasets" / "scene15-train" / "labels.csv"
VOCAB = ROOT / "target" / "release" / "vocab"
GRID = [0.01, 0.1, 1, 10, 100]
REPEATS = 3


def histograms(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dims, count = int(raw[12:16].view("<u4")[0]), int(raw[16:24].view("<u8")[0])
    rec = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])
    recs = raw[32:].view(rec)[:count]
    paths = {int(r["picture_id"]): r["path"] for r in csv.DictReader(open(f"{path}.images.csv"))}
    return [paths[int(i)] for i in recs["id"]], np.asarray(recs["v"], dtype=np.float64)


def main():
    split = {r["path"]: r["split"] == "train" for r in csv.DictReader(open(WORK / "split.csv"))}
    labels = list(csv.DictReader(open(LABELS)))
    rows, same_c = [], []
    for k in (256, 1024):
        hist = WORK / f"hist-{k}.bin"
        paths, x = histograms(hist)
        index = {p: i for i, p in enumerate(paths)}
        for attr in ("urbanicity", "elevation", "class"):
            lab = [(index[r["path"]], r[attr]) for r in labels if r[attr] and r["path"] in index]
            tr = [(i, y) for i, y in lab if split[paths[i]]]
            te = [(i, y) for i, y in lab if not split[paths[i]]]
            xtr, ytr = x[[i for i, _ in tr]], [y for _, y in tr]
            xte, yte = x[[i for i, _ in te]], np.array([y for _, y in te])
            model = WORK / f"bench-{k}-{attr}.json"
            sk_times, vocab_times = [], []
            for _ in range(REPEATS):
                t = time.perf_counter()
                search = GridSearchCV(LinearSVC(), {"C": GRID}, cv=StratifiedKFold(5, shuffle=True, random_state=1), n_jobs=2)
                search.fit(xtr, ytr)
                acc = float(np.mean(search.predict(xte) == yte))
                sk_times.append(time.perf_counter() - t)
                t = time.perf_counter()
                vocab_acc, vocab_c = vocab_fit(hist, attr, model, ["--cv", "5"])
                vocab_times.append(time.perf_counter() - t)
            rows.append(dict(k=k, attribute=attr, held_out=len(te), vocab_accuracy=round(vocab_acc, 4),
                             sklearn_accuracy=round(acc, 4), vocab_c=vocab_c, sklearn_c=search.best_params_["C"],
                             vocab_seconds=round(float(np.median(vocab_times)), 3),
                             sklearn_seconds=round(float(np.median(sk_times)), 3),
                             vocab_range=f"{min(vocab_times):.2f}-{max(vocab_times):.2f}",
                             sklearn_range=f"{min(sk_times):.2f}-{max(sk_times):.2f}"))
            print(rows[-1], flush=True)
            for c in GRID:
                sk = LinearSVC(C=c).fit(xtr, ytr)
                sk_acc = float(np.mean(sk.predict(xte) == yte))
                v_acc, _ = vocab_fit(hist, attr, model, ["--c", str(c)])
                same_c.append(dict(k=k, attribute=attr, c=c, held_out=len(te), vocab_accuracy=round(v_acc, 4),
                                   sklearn_accuracy=round(sk_acc, 4)))
                print(same_c[-1], flush=True)
    write_csv(HERE / "same_c.csv", same_c)
    write_csv(HERE / "results.csv", rows)
    lines = ["| K | attribute | held out | vocab acc (C) | LinearSVC acc (C) | diff (points) | vocab s (range) "
             "| LinearSVC s (range) | speed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['k']} | {r['attribute']} | {r['held_out']} | {r['vocab_accuracy']:.4f} ({r['vocab_c']:g}) "
                     f"| {r['sklearn_accuracy']:.4f} ({r['sklearn_c']:g}) "
                     f"| {100 * (r['vocab_accuracy'] - r['sklearn_accuracy']):+.1f} | {r['vocab_seconds']:.2f} ({r['vocab_range']}) "
                     f"| {r['sklearn_seconds']:.2f} ({r['sklearn_range']}) | {r['sklearn_seconds'] / r['vocab_seconds']:.2f}x |")
    lines += ["", "The CV rows' accuracy differences come from the C each side's folds chose; at vocab's C, "
              "LinearSVC scores:", "", "| K | attribute | vocab's C | vocab acc | LinearSVC acc at that C |", "|---|---|---|---|---|"]
    for r in rows:
        at = next(s for s in same_c if s["k"] == r["k"] and s["attribute"] == r["attribute"] and s["c"] == r["vocab_c"])
        lines.append(f"| {r['k']} | {r['attribute']} | {r['vocab_c']:g} | {r['vocab_accuracy']:.4f} | {at['sklearn_accuracy']:.4f} |")
    lines += ["", "Same C, same training half (`same_c.csv`): largest difference in held-out accuracy per row.", "",
              "| K | attribute | held out | max abs diff (points) over C in grid | C of the largest |", "|---|---|---|---|---|"]
    for k in (256, 1024):
        for attr in ("urbanicity", "elevation", "class"):
            group = [r for r in same_c if r["k"] == k and r["attribute"] == attr]
            worst = max(group, key=lambda r: abs(r["vocab_accuracy"] - r["sklearn_accuracy"]))
            diff = 100 * abs(worst["vocab_accuracy"] - worst["sklearn_accuracy"])
            lines.append(f"| {k} | {attr} | {worst['held_out']} | {diff:.1f} | {worst['c']:g} |")
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def vocab_fit(hist, attr, model, how):
    """Trains and evaluates with vocab's commands; returns (held-out accuracy, C used)."""
    subprocess.run([VOCAB, "train", "--histograms", hist, "--labels", LABELS, "--attribute", attr,
                    "--split", WORK / "split.csv", *how, "--out", model], check=True, capture_output=True)
    out = subprocess.run([VOCAB, "evaluate", "--model", model, "--histograms", hist, "--labels", LABELS, "--held-out"],
                         check=True, capture_output=True, text=True).stdout
    c = json.loads(pathlib.Path(model).read_text())["classifier"]["c"]
    return float(out.split()[1]), c


if __name__ == "__main__":
    main()
