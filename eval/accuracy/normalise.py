#!/usr/bin/env python3
"""Normalisation variants of vocab's Fisher vectors, made from an encoding vocab wrote (issue 53,
lever "normalisation variants"), so each variant costs an SVM and not an encode.

vocab's Fisher vector of a photo is, per pyramid cell (levels first to last, cells row-major), the
mean gradients u (K x D) then the variance gradients v (K x D), each cell times its level's
weight, then every value's signed square root, then the whole vector's L2 norm. The raw
gradients come back up to one scale per photo as sign(x) x^2, and every variant below divides
that scale out again:

  power-A       the signed power A instead of 1/2, one L2 norm (A = 0.5 gives vocab's own vector
                back, to rounding: the check that the route is sound)
  cells         signed square root, each cell's own L2 norm, then the level weights, one L2 norm
  intra         signed square root, each cell's u and v of each Gaussian to their own L2 norm
                (Arandjelovic and Zisserman's intra-normalisation), then one L2 norm

usage: normalise.py IN OUT VARIANT K D LEVELS   (OUT gets IN's side files)
"""
import shutil
import sys

import numpy as np

from feature_file import read, write


def unit(x, axis):
    norm = np.sqrt((x * x).sum(axis=axis, keepdims=True))
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def transform(v, variant, k, d, levels):
    n = v.shape[0]
    cells = sum(4**level for level in range(levels))
    raw = np.sign(v) * v.astype(np.float64) ** 2
    cell = raw.reshape(n, cells, 2, k, d)
    if variant.startswith("power-"):
        a = float(variant[len("power-"):])
        out = np.sign(cell) * np.abs(cell) ** a
    elif variant == "cells":
        # The level weights are equal at 2 levels (1/2 each) and cancel in each cell's norm.
        out = unit(np.sign(cell) * np.sqrt(np.abs(cell)), axis=(2, 3, 4))
        weights = np.concatenate([np.full(4**level, 0.5 ** (levels - level if level else levels - 1))
                                  for level in range(levels)])
        out = out * weights[None, :, None, None, None]
    elif variant == "intra":
        out = unit(np.sign(cell) * np.sqrt(np.abs(cell)), axis=4)
    else:
        sys.exit(f"normalise.py: unknown variant {variant}")
    return unit(out.reshape(n, -1), axis=1).astype(np.float32)


def main():
    src, dst, variant, k, d, levels = sys.argv[1:7]
    k, d, levels = int(k), int(d), int(levels)
    head, rows = read(src)
    assert rows["v"].shape[1] == 2 * k * d * sum(4**level for level in range(levels)), \
        f"{src}: {rows['v'].shape[1]} values, not a {k} x {d} Fisher vector over {levels} levels"
    rows["v"] = transform(rows["v"], variant, k, d, levels)
    write(dst, head, rows)
    for side in (".encoding.json", ".images.csv", ".skipped.csv"):
        shutil.copyfile(src + side, dst + side)


if __name__ == "__main__":
    main()
