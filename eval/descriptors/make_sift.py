#!/usr/bin/env python3
"""Dense SIFT descriptors made outside vocab (OpenCV), in the layout `vocab --from DIR` reads.

For every photo listed in PHOTOS/labels.csv: keypoints on a grid every --step px (centres from
--size / 2 in), --size px each (several sizes: --size 4,7, one grid each), upright (angle 0),
described by OpenCV's SIFT (128 values; --root: RootSIFT, each descriptor L1-normalised then
square-rooted, Arandjelovic & Zisserman 2012), written as OUT/<photo path with .npy> holding
rows x, y, size, then the 128 values (float32). OpenCV's descriptor window is 6 x size px wide
(4 x 4 cells of 1.5 x size px). --flip describes each photo mirrored left to right (rows in the
mirrored photo's coordinates); --shard I/N takes every N-th photo from the I-th.

usage: make_sift.py PHOTOS OUT [--step 8] [--size 16] [--root] [--flip] [--upright] [--shard I/N]
"""
import argparse
import csv
import os
import sys
import time

import cv2
import numpy as np


def describe(path, step, sizes, root, flip=False, upright=False):
    gray = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    if gray is None:
        return None
    if flip:
        gray = np.ascontiguousarray(gray[:, ::-1])
    h, w = gray.shape
    kps = []
    for size in sizes:
        half = size / 2.0
        xs = np.arange(half, w - half + 1e-6, step)
        ys = np.arange(half, h - half + 1e-6, step)
        # OpenCV's KeyPoint angle defaults to -1, which its SIFT reads as a turn of 361 degrees.
        angle = [0.0] if upright else []
        kps += [cv2.KeyPoint(float(x), float(y), float(size), *angle) for y in ys for x in xs]
    kps, desc = cv2.SIFT_create().compute(gray, kps)
    if desc is None or len(kps) == 0:
        return None
    desc = desc.astype(np.float32)
    if root:
        desc /= np.maximum(desc.sum(axis=1, keepdims=True), 1e-12)
        desc = np.sqrt(desc)
    head = np.array([[k.pt[0], k.pt[1], k.size] for k in kps], dtype=np.float32)
    return np.hstack([head, desc]).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("photos")
    ap.add_argument("out")
    ap.add_argument("--step", type=int, default=8)
    ap.add_argument("--size", default="16")
    ap.add_argument("--root", action="store_true")
    ap.add_argument("--flip", action="store_true")
    ap.add_argument("--upright", action="store_true")
    ap.add_argument("--shard", default="0/1")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    with open(os.path.join(args.photos, "labels.csv"), newline="") as f:
        paths = [row[0] for i, row in enumerate(csv.reader(f)) if i > 0 and row]
    shard, shards = (int(v) for v in args.shard.split("/"))
    paths = paths[shard::shards]
    sizes = [float(v) for v in args.size.split(",")]
    started, rows, missing = time.time(), 0, 0
    for rel in paths:
        table = describe(os.path.join(args.photos, rel), args.step, sizes, args.root,
                         args.flip, args.upright)
        if table is None:
            missing += 1
            continue
        dest = os.path.join(args.out, os.path.splitext(rel)[0] + ".npy")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        np.save(dest, table)
        rows += len(table)
    took = time.time() - started
    print(f"make_sift: {len(paths) - missing} photos, {missing} unreadable, {rows} descriptors "
          f"in {took:.1f} s (step {args.step}, size {args.size}, root {args.root}, flip {args.flip})", file=sys.stderr)


if __name__ == "__main__":
    main()
