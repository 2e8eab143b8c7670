#!/usr/bin/env python3
"""Upscales a photo set by FACTOR (bilinear, OpenCV), so vocab's 40-px HOG patches cover
40 / FACTOR px of the photos as they were (issue 53: are smaller patches a lever?).

usage: upscale.py SRC DST FACTOR   (SRC: a dataset folder with labels.csv; DST gets PNGs, lossless,
       and labels.csv with the same rows, paths ending .png)
"""
import csv
import sys
from pathlib import Path

import cv2


def main():
    src, dst, factor = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    with open(src / "labels.csv", newline="") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:]
    out = []
    for row in body:
        photo = cv2.imread(str(src / row[0]), cv2.IMREAD_GRAYSCALE)
        if photo is None:
            sys.exit(f"upscale.py: cannot read {src / row[0]}")
        h, w = photo.shape
        big = cv2.resize(photo, (round(w * factor), round(h * factor)), interpolation=cv2.INTER_LINEAR)
        name = str(Path(row[0]).with_suffix(".png"))
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(dst / name), big)
        out.append([name] + row[1:])
    with open(dst / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows([head] + out)
    print(f"{len(out)} photos upscaled {factor}x into {dst}")


if __name__ == "__main__":
    main()
