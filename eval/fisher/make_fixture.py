#!/usr/bin/env python3
"""The Fisher vector fixture of pipeline/src/encode/fisher.rs: a PCA (numpy) and a diagonal
Gaussian mixture (scikit-learn's GaussianMixture, fitted here), a small photo's patches, and the
improved Fisher vector numpy computes of them from scikit-learn's posteriors (predict_proba) and
the formulas of Perronnin, Sanchez and Mensink (2010; Sanchez et al. 2013):

  u_k = 1 / (T sqrt(w_k))   sum_t g_t(k) (y_t - m_k) / s_k
  v_k = 1 / (T sqrt(2 w_k)) sum_t g_t(k) ((y_t - m_k)^2 / s_k^2 - 1)

per cell of the spatial pyramid (T the cell's patches; a cell without patches is zeros), every
u_k then every v_k; each level's cells times Lazebnik et al.'s level weight; the signed square
root of every value; the whole vector divided by its L2 norm.

usage: eval/.venv/bin/python eval/fisher/make_fixture.py   (writes eval/fisher/fixture.json)
"""
import json
import os

import numpy as np
from sklearn.mixture import GaussianMixture

HERE = os.path.dirname(os.path.abspath(__file__))
PATCH = 40
DIMS, PROJECTED, K, N, LEVELS, WIDTH, HEIGHT = 6, 3, 4, 24, 2, 120, 100


def level_weight(level, levels):
    top = levels - 1
    if levels == 1:
        return 1.0
    return 1 / 2**top if level == 0 else 1 / 2**(top - level + 1)


def fisher(y, positions, weights, means, variances, gamma):
    k, d = means.shape
    sigma = np.sqrt(variances)
    blocks = []
    for level in range(LEVELS):
        cells = 2**level
        out = np.zeros((cells * cells, 2, k, d))
        for c in range(cells * cells):
            members = []
            for i, (r, col) in enumerate(positions):
                cy, cx = r + PATCH // 2, col + PATCH // 2
                cell = min(cy * cells // HEIGHT, cells - 1) * cells + min(cx * cells // WIDTH, cells - 1)
                if cell == c:
                    members.append(i)
            t = len(members)
            if t == 0:
                continue
            for j in range(k):
                z = (y[members] - means[j]) / sigma[j]
                g = gamma[members, j][:, None]
                out[c, 0, j] = (g * z).sum(0) / (t * np.sqrt(weights[j]))
                out[c, 1, j] = (g * (z * z - 1)).sum(0) / (t * np.sqrt(2 * weights[j]))
        blocks.append(out.reshape(-1) * level_weight(level, LEVELS))
    v = np.concatenate(blocks)
    v = np.sign(v) * np.sqrt(np.abs(v))
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else v


def main():
    rng = np.random.default_rng(3)
    train = rng.uniform(size=(600, DIMS)).astype(np.float32).astype(np.float64)
    train[:300, :2] += 1.0
    mean = train.mean(axis=0)
    values, vectors = np.linalg.eigh(np.cov(train, rowvar=False, bias=True))
    order = np.argsort(values)[::-1][:PROJECTED]
    components = vectors[:, order].T.copy()
    gmm = GaussianMixture(n_components=K, covariance_type="diag", random_state=0).fit(
        (train - mean) @ components.T)
    x = rng.uniform(size=(N, DIMS)).astype(np.float32)
    positions = [(int(r), int(c)) for r, c in
                 zip(rng.integers(0, HEIGHT - PATCH + 1, N), rng.integers(0, WIDTH - PATCH + 1, N))]
    y = (x.astype(np.float64) - mean) @ components.T
    gamma = gmm.predict_proba(y)
    expected = fisher(y, positions, gmm.weights_, gmm.means_, gmm.covariances_, gamma)
    fixture = {
        "width": WIDTH, "height": HEIGHT, "levels": LEVELS,
        "pca": {"mean": mean.tolist(), "components": components.reshape(-1).tolist(),
                "variances": values[order].tolist(), "total_variance": float(values.sum())},
        "gmm": {"weights": gmm.weights_.tolist(), "means": gmm.means_.reshape(-1).tolist(),
                "variances": gmm.covariances_.reshape(-1).tolist()},
        "descriptors": [float(v) for v in x.reshape(-1)],
        "positions": positions,
        "posteriors": gamma.reshape(-1).tolist(),
        "expected": expected.tolist(),
    }
    with open(os.path.join(HERE, "fixture.json"), "w") as f:
        json.dump(fixture, f)
        f.write("\n")
    print(f"wrote {os.path.join(HERE, 'fixture.json')}: {len(expected)} values")


if __name__ == "__main__":
    main()
