#!/usr/bin/env python3
"""vocab's dense HOG as descriptors made elsewhere, with each patch's place appended (spatial
Fisher vectors, Krapac et al. ICCV 2011: the normalised x, y of a descriptor join it before the
mixture), in the layout `vocab --from DIR` reads.

Reads a feature file of vocab's dense patches (`vocab features --sampling dense --stride S`,
binary) and its `.images.csv` (every photo's width and height), and writes for each photo
OUT/<photo path with .npy>: rows x, y, size (the patch's centre and side, 40 px), the 512 HOG
values, then, with --weight W > 0, W * (x / width - 0.5) and W * (y / height - 0.5) (float32).

usage: make_hog_xy.py FEATURES OUT [--weight W]
"""
import argparse
import csv
import os

import numpy as np

SIDE = 40
HEADER = 32


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("out")
    ap.add_argument("--weight", type=float, default=0.0)
    args = ap.parse_args()
    head = np.fromfile(args.features, dtype=np.uint8, count=HEADER)
    dims = int(np.frombuffer(head[12:16].tobytes(), dtype="<u4")[0])
    assert head[:8].tobytes() == b"VOCABFEA", "not a vocab feature file"
    record = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])
    rows = np.memmap(args.features, dtype=record, mode="r", offset=HEADER)
    with open(args.features + ".images.csv", newline="") as f:
        photos = {int(r["picture_id"]): r for r in csv.DictReader(f)}
    ids = rows["id"]
    # Records are in picture-id order: each photo's run of them.
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    for a, b in zip(starts, ends):
        photo = photos[int(ids[a])]
        w, h = float(photo["width"]), float(photo["height"])
        chunk = rows[a:b]
        x = chunk["col"].astype(np.float32) + SIDE / 2
        y = chunk["row"].astype(np.float32) + SIDE / 2
        cols = [x[:, None], y[:, None], np.full((b - a, 1), SIDE, np.float32), chunk["v"]]
        if args.weight > 0:
            cols += [(args.weight * (x / w - 0.5))[:, None], (args.weight * (y / h - 0.5))[:, None]]
        table = np.hstack(cols).astype(np.float32)
        dest = os.path.join(args.out, os.path.splitext(photo["path"])[0] + ".npy")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        np.save(dest, table)


if __name__ == "__main__":
    main()
