"""How many candidates the int8 kernel re-ranks per vector, by the kernel's own bound in numpy.

usage: int8_candidates.py DATA.bin VOCABULARY.bin [VOCABULARY.bin ...]

For 3,000 random rows of DATA and every VOCABULARY (vocab's bin formats): rows quantised as
pipeline/src/kmeans/quant/ (rows.rs) does (per-row offset and step, codes 0..127), centroids with a
per-centroid step (codes -127..127, and -63..63 for the paired kernel discussed in the README),
the kernel's per-pair bound ||x|| ||c - c~|| + ||x - x~|| ||c~|| (without its float slack) and,
for comparison, the first version's ||x||_1 max|c - c~| + max|x - x~| ||c~||_1, and the
candidates: centroids whose lower bound is at most the least upper bound. Also checks that the
true nearest centroid is always among them.
"""
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from run import read_bin  # noqa: E402


def candidates(x, c, levels):
    lo = x.min(1, keepdims=True)
    step = (x.max(1, keepdims=True) - lo) / 127
    step[step == 0] = 1
    xt = lo + step * np.round((x - lo) / step)
    t = np.abs(c).max(1, keepdims=True) / levels
    t[t == 0] = 1
    ct = t * np.round(c / t)
    approx = (c ** 2).sum(1)[None, :] - 2 * xt @ ct.T
    norm = lambda v: np.sqrt((v ** 2).sum(1))  # noqa: E731
    bounds = {
        # The kernel's: Cauchy-Schwarz on both terms.
        "L2": norm(x)[:, None] * norm(c - ct)[None, :] + norm(x - xt)[:, None] * norm(ct)[None, :],
        # The first version's: Hoelder with L1 and max norms.
        "L1 x Linf": (np.abs(x).sum(1)[:, None] * np.abs(c - ct).max(1)[None, :]
                      + np.abs(x - xt).max(1, keepdims=True) * np.abs(ct).sum(1)[None, :]),
    }
    exact = (c ** 2).sum(1)[None, :] - 2 * x @ c.T  # f64: ranks as direct distances do
    counts = {}
    for name, e in bounds.items():
        least_upper = (approx + 2 * e).min(1, keepdims=True)
        chosen = approx - 2 * e <= least_upper
        assert chosen[np.arange(len(x)), exact.argmin(1)].all(), "nearest centroid not a candidate"
        counts[name] = chosen.sum(1)
    return counts


def main():
    data = read_bin(sys.argv[1])
    rows = data[np.random.default_rng(0).choice(len(data), 3000, replace=False)].astype(np.float64)
    print(f"data {sys.argv[1]}: {len(data)} x {data.shape[1]}, 3,000 rows sampled")
    for path in sys.argv[2:]:
        c = read_bin(path).astype(np.float64)
        for bits, levels in [(7, 127), (6, 63)]:
            for bound, n in candidates(rows, c, levels).items():
                print(f"  {pathlib.Path(path).name} (k = {len(c)}), centroid codes {bits}-bit, {bound} bound: "
                      f"candidates per vector mean {n.mean():.1f}, median {np.median(n):.0f}, "
                      f"p99 {np.percentile(n, 99):.0f}, max {n.max()} ({100 * n.mean() / len(c):.2f}% of k)")


if __name__ == "__main__":
    main()
