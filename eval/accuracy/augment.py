#!/usr/bin/env python3
"""Crops as more training views (issue 53: mirror images gained 1.7 points; do crops add more?).

Writes DST: every photo of SRC as it is (the same JPEG bytes), and for each photo two crops of
FRACTION of its width and height (PNG, lossless, grey as vocab reads it): `-c1` anchored at the
top left, `-c2` at the bottom right. DST/labels.csv lists them all with the labels of the photo
they come from. For each fold of WORK (folds.py's split-<f>.csv), it also writes
  WORK/aug-split-<f>.csv   the fold's split, and the crops of its training photos as training
  WORK/aug-encode-<f>.csv  what is encoded: every photo, and the crops of the training photos
  WORK/aug-train-<f>.csv   the training photos and their crops (encoded mirrored too)
Crops of held-out photos are written but never used.

usage: augment.py SRC DST WORK FRACTION FOLDS
"""
import csv
import shutil
import sys
from pathlib import Path

import cv2

VIEWS = ("c1", "c2")


def crops(photo, fraction):
    h, w = photo.shape
    ch, cw = round(h * fraction), round(w * fraction)
    return {"c1": photo[:ch, :cw], "c2": photo[h - ch:, w - cw:]}


def crop_path(path, view):
    p = Path(path)
    return str(p.with_name(f"{p.stem}-{view}.png"))


def main():
    src, dst, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    fraction, folds = float(sys.argv[4]), int(sys.argv[5])
    with open(src / "labels.csv", newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    out = []
    for row in body:
        (dst / row[0]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / row[0], dst / row[0])
        out.append(row)
        photo = cv2.imread(str(src / row[0]), cv2.IMREAD_GRAYSCALE)
        if photo is None:
            sys.exit(f"augment.py: cannot read {src / row[0]}")
        for view, crop in crops(photo, fraction).items():
            name = crop_path(row[0], view)
            cv2.imwrite(str(dst / name), crop)
            out.append([name] + row[1:])
    with open(dst / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows([head] + out)
    for fold in range(folds):
        with open(work / f"split-{fold}.csv", newline="") as f:
            split = [(r["path"], r["split"]) for r in csv.DictReader(f)]
        train = [p for p, s in split if s == "train"]
        extra = [crop_path(p, v) for p in train for v in VIEWS]
        with open(work / f"aug-split-{fold}.csv", "w") as f:
            f.write("path,split\n" + "".join(f"{p},{s}\n" for p, s in split)
                    + "".join(f"{p},train\n" for p in extra))
        with open(work / f"aug-encode-{fold}.csv", "w") as f:
            f.write("path\n" + "".join(f"{p}\n" for p, _ in split) + "".join(f"{p}\n" for p in extra))
        with open(work / f"aug-train-{fold}.csv", "w") as f:
            f.write("path\n" + "".join(f"{p}\n" for p in train + extra))
    print(f"{len(body)} photos and {len(out) - len(body)} crops of {fraction} into {dst}")


if __name__ == "__main__":
    main()
