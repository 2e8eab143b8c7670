"""Figures of the 5-fold experiment (cv.sh): Figure 10 (accuracy against vocabulary size) and
Figure 11 (held-out photos classified correctly and incorrectly, per attribute).

usage: figures.py PHOTOS_DIR   (reads cv-summary.csv, cv-large-summary.csv if there, and
work/cv/*.predictions.csv beside it; writes figure10.png, figure10.csv, figure11.png)
"""

import csv
import pathlib
import random
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from PIL import Image  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
# The reference pipeline of the issue (held-out set of the same kind), for orientation.
REFERENCE = {
    "urbanicity": {256: 0.971, 1024: 0.972, 4096: 0.967},
    "elevation": {256: 0.936, 1024: 0.940, 4096: 0.943},
    "class": {256: 0.692, 1024: 0.707, 4096: 0.717},
}
COLOURS = {"urbanicity": "tab:blue", "elevation": "tab:green", "class": "tab:red"}


def figure10():
    # K = 16 ... 4,096 (cv.sh's defaults) and, when run, the largest vocabularies
    # (cv-large-summary.csv: TAG=-large KMEANS_ARGS="--assign approx" ENCODE_ARGS="--kernel int8"
    # cv.sh "" 16384 65536); the figure's numbers also go to figure10.csv.
    rows = list(csv.DictReader(open(HERE / "cv-summary.csv")))
    large = HERE / "cv-large-summary.csv"
    if large.exists():
        rows += list(csv.DictReader(open(large)))
    with open(HERE / "figure10.csv", "w", newline="") as out:
        w = csv.writer(out)
        w.writerow(["k", "attribute", "mean_accuracy", "std_accuracy", "folds"])
        for r in sorted(rows, key=lambda r: (r["attribute"], int(r["k"]))):
            w.writerow([r["k"], r["attribute"], r["mean_accuracy"], r["std_accuracy"], r["folds"]])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for attr in ("urbanicity", "elevation", "class"):
        pts = sorted(
            (int(r["k"]), float(r["mean_accuracy"]), float(r["std_accuracy"]))
            for r in rows
            if r["attribute"] == attr
        )
        if not pts:
            continue
        ks, means, stds = zip(*pts)
        label = "15 classes" if attr == "class" else attr
        ax.errorbar(ks, means, yerr=stds, marker="o", capsize=3, color=COLOURS[attr], label=label)
        ref = sorted(REFERENCE[attr].items())
        ax.plot(
            [k for k, _ in ref],
            [a for _, a in ref],
            linestyle=":",
            marker="x",
            color=COLOURS[attr],
            alpha=0.7,
            label=f"{label}, reference pipeline",
        )
    pyr = sorted(
        (int(r["k"]), float(r["mean_accuracy"]))
        for r in rows
        if r["attribute"] == "class+pyramid2"
    )
    if pyr:
        ax.plot(
            [k for k, _ in pyr],
            [a for _, a in pyr],
            marker="s",
            linestyle="--",
            color="tab:purple",
            label="15 classes, 2-level pyramid",
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("vocabulary size K")
    ax.set_ylabel("accuracy (5-fold CV, mean ± sd)")
    ax.set_ylim(0.4, 1.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("scene15-train: accuracy against vocabulary size (cf. paper Figure 10)", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "figure10.png", dpi=120)


def figure11(photos, k=1024, fold=0, per=4, seed=1):
    rng = random.Random(seed)
    attrs = ("urbanicity", "elevation", "class")
    fig, axes = plt.subplots(len(attrs) * 2, per, figsize=(per * 2.2, len(attrs) * 2 * 2.0))
    for a, attr in enumerate(attrs):
        path = HERE / "work" / "cv" / f"model-{fold}-{k}-{attr}.json.predictions.csv"
        rows = list(csv.DictReader(open(path)))
        right = [r for r in rows if r["truth"] == r["predicted"]]
        wrong = [r for r in rows if r["truth"] != r["predicted"]]
        for s, (name, pool) in enumerate((("correct", right), ("incorrect", wrong))):
            picks = rng.sample(pool, min(per, len(pool)))
            for j in range(per):
                ax = axes[a * 2 + s][j]
                ax.axis("off")
                if j >= len(picks):
                    continue
                r = picks[j]
                img = Image.open(pathlib.Path(photos) / r["path"]).convert("RGB")
                img.thumbnail((200, 160))
                ax.imshow(img)
                ax.set_title(
                    f"{r['truth']} -> {r['predicted']}",
                    fontsize=7,
                    color="darkgreen" if name == "correct" else "darkred",
                )
            axes[a * 2 + s][0].text(
                -0.1, 0.5, f"{attr}\n{name}", transform=axes[a * 2 + s][0].transAxes,
                ha="right", va="center", fontsize=8,
            )
    fig.suptitle(f"Held-out photos, K = {k}, fold {fold} (true -> predicted; cf. paper Figure 11)", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "figure11.png", dpi=80)


if __name__ == "__main__":
    figure10()
    figure11(sys.argv[1])
