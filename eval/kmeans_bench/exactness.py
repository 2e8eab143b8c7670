"""Which kernel's first iteration gives the exact k-means update? f32 GEMM vs int8, against f64.

usage: exactness.py VOCAB [K]   (run from anywhere; needs work/synth-200000.bin, see run.py)

From k rows of the synthetic set drawn with numpy seed 0 (as run.py does), one iteration of
`vocab kmeans` with each kernel; then in f64: every vector's nearest initial centroid, the
exact means, and how far each kernel's centroids are from them. A centroid off by more than f32
rounding means some vector was given a centroid that is not its nearest.
"""
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import read_bin  # noqa: E402


def main():
    vocab, k = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 256
    data = HERE / "work" / "synth-200000.bin"
    x32 = read_bin(data)
    n = len(x32)
    c0 = x32[np.sort(np.random.default_rng(0).choice(n, k, replace=False))].copy()
    x, c = x32.astype(np.float64), c0.astype(np.float64)
    d = (c ** 2).sum(1)[None, :] - 2 * x @ c.T + (x ** 2).sum(1)[:, None]
    labels = d.argmin(1)
    top2 = np.partition(d, 1, axis=1)[:, :2]
    gap = top2[:, 1] - top2[:, 0]
    counts = np.bincount(labels, minlength=k)
    means = np.zeros_like(c)
    np.add.at(means, labels, x)
    used = counts > 0
    means[used] /= counts[used][:, None]
    print(f"synthetic set {n} x {x.shape[1]}, k = {k}; squared distances to the nearest initial centroid: "
          f"median {np.median(top2[:, 0]):.2f}")
    print(f"vectors whose two nearest centroids are within 1e-4 (squared distance): {(gap < 1e-4).sum()}, "
          f"within 1e-3: {(gap < 1e-3).sum()}, smallest gap {gap.min():.2e}")
    with tempfile.TemporaryDirectory() as tmp:
        init = pathlib.Path(tmp) / "init.txt"
        np.savetxt(init, c0, fmt="%.9g")
        for kernel in ["f32", "int8"]:
            out = pathlib.Path(tmp) / f"{kernel}.bin"
            subprocess.run([vocab, "--quiet", "--threads", "2", "kmeans", "--features", str(data), "--k", str(k),
                            "--iterations", "1", "--tol", "0", "--init-centroids", str(init),
                            "--kernel", kernel, "--prune", "false", "--out", str(out)], check=True,
                           stdout=subprocess.DEVNULL)
            got = read_bin(out).astype(np.float64)
            off = np.abs(got[used] - means[used]).max(1)
            print(f"{kernel}: centroids farther than 1e-5 from the exact f64 means: {(off > 1e-5).sum()} of "
                  f"{used.sum()} (largest deviation {off.max():.1e})")


if __name__ == "__main__":
    main()
