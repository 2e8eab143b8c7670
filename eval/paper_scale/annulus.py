#!/usr/bin/env python3
"""How much of the probed lists an annulus bound could skip (issue 51, an estimate before building).

For a row x probing list L (centre c), a member y lies at least |‖x - c‖ - ‖y - c‖| from x, so a
member whose bound exceeds the row's final nearest distance b can never win: the share of probed
members with |D - r_y| <= b is what a search must still visit even knowing b up front (a
lower bound on what a real search, which learns b as it goes, visits).

Approximations: lists from centres sampled from the centroids, without vocab's balancing biases;
the row's nearest over all centroids stands in for the nearest among its probed lists.

usage: annulus.py FEATURES K LISTS   (a vocab feature file, f32 or u8; eval/.venv's numpy)"""
import sys
import numpy as np

path, k, lists, probes, sample = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 8, 2000
head = np.fromfile(path, dtype=np.uint8, count=32)
dims = int(np.frombuffer(head[12:16].tobytes(), "<u4")[0])
elem = head[10]
rec = np.dtype([("h", "<u4", 2), ("v", "<f4" if elem == 1 else "u1", (dims,))])
rows = np.memmap(path, dtype=rec, mode="r", offset=32)["v"]
n = len(rows)
rng = np.random.default_rng(1)
cent = np.asarray(rows[np.sort(rng.choice(n, k, replace=False))], dtype=np.float32)
if elem != 1:
    cent /= 255.0
centres = cent[np.linspace(0, k - 1, lists).astype(int)]
def sq(a, b):
    return (a * a).sum(1)[:, None] - 2 * a @ b.T + (b * b).sum(1)[None, :]
label = np.concatenate([np.argmin(sq(cent[i:i + 8192], centres), 1) for i in range(0, k, 8192)])
r = np.sqrt(np.maximum(((cent - centres[label]) ** 2).sum(1), 0))
x = np.asarray(rows[rng.choice(n, sample, replace=False)], dtype=np.float32)
if elem != 1:
    x /= 255.0
d2c = np.maximum(sq(x, centres), 0)
probed = np.argsort(d2c, 1)[:, :probes]
best = np.sqrt(np.maximum(np.concatenate([sq(x[i:i + 256], cent).min(1) for i in range(0, sample, 256)]), 0))
sizes = np.bincount(label, minlength=lists)
visit = total = 0
for i in range(sample):
    for l in probed[i]:
        D = np.sqrt(d2c[i, l])
        m = r[label == l]
        total += len(m)
        visit += int((np.abs(D - m) <= best[i] * (1 + 1e-6)).sum())
print(f"{path}: k={k} lists={lists} probes={probes} sample={sample}")
print(f"list sizes: mean {sizes.mean():.0f}, max {sizes.max()}, sum of squares / mean's {(sizes**2).sum() / (sizes.mean()**2 * lists):.2f}")
print(f"members probed per row {total / sample:.0f}; within the annulus {visit / sample:.0f} ({visit / total:.1%})")
print(f"nearest distance: median {np.median(best):.4f}; row to its first list's centre: median {np.median(np.sqrt(d2c[np.arange(sample), probed[:, 0]])):.4f}")
