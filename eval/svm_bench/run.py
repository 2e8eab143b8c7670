"""vocab's linear SVM vs scikit-learn LinearSVC on the same histograms, split and C grid.

usage: $(eval/setup-venv.sh) eval/svm_bench/run.py   (after eval/accuracy/run.sh made its work/)
Both choose C by 5-fold stratified CV on the training half over {0.01, 0.1, 1, 10, 100}, train on
the training half, and are scored on the held-out half. Wall time covers CV, the final fit and
prediction (vocab: its train + evaluate commands; scikit-learn: GridSearchCV with n_jobs=2).
"""
import csv
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
    rows = []
    for k in (256, 1024):
        hist = WORK / f"hist-{k}.bin"
        paths, x = histograms(hist)
        index = {p: i for i, p in enumerate(paths)}
        for attr in ("urbanicity", "elevation", "class"):
            lab = [(index[r["path"]], r[attr]) for r in labels if r[attr] and r["path"] in index]
            tr = [(i, y) for i, y in lab if split[paths[i]]]
            te = [(i, y) for i, y in lab if not split[paths[i]]]
            t = time.perf_counter()
            search = GridSearchCV(LinearSVC(), {"C": GRID}, cv=StratifiedKFold(5, shuffle=True, random_state=1), n_jobs=2)
            search.fit(x[[i for i, _ in tr]], [y for _, y in tr])
            acc = float(np.mean(search.predict(x[[i for i, _ in te]]) == np.array([y for _, y in te])))
            sk_time = time.perf_counter() - t
            model = WORK / f"bench-{k}-{attr}.json"
            t = time.perf_counter()
            subprocess.run([VOCAB, "train", "--histograms", hist, "--labels", LABELS, "--attribute", attr,
                            "--split", WORK / "split.csv", "--cv", "5", "--out", model], check=True, capture_output=True)
            out = subprocess.run([VOCAB, "evaluate", "--model", model, "--histograms", hist, "--labels", LABELS],
                                 check=True, capture_output=True, text=True).stdout
            vocab_time = time.perf_counter() - t
            vocab_acc = float(out.split()[1])
            rows.append(dict(k=k, attribute=attr, held_out=len(te), vocab_accuracy=round(vocab_acc, 4),
                             sklearn_accuracy=round(acc, 4), sklearn_c=search.best_params_["C"],
                             vocab_seconds=round(vocab_time, 2), sklearn_seconds=round(sk_time, 2)))
            print(rows[-1], flush=True)
    with open(HERE / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| K | attribute | held out | vocab acc | LinearSVC acc | diff (points) | vocab s | LinearSVC s | speed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['k']} | {r['attribute']} | {r['held_out']} | {r['vocab_accuracy']:.4f} | {r['sklearn_accuracy']:.4f} "
                     f"| {100 * (r['vocab_accuracy'] - r['sklearn_accuracy']):+.1f} | {r['vocab_seconds']:.1f} "
                     f"| {r['sklearn_seconds']:.1f} | {r['sklearn_seconds'] / r['vocab_seconds']:.2f}x |")
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
