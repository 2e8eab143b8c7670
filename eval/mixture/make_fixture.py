#!/usr/bin/env python3
"""The mixture fixture of pipeline/src/mixture/tests.rs: vectors from a known three-component
mixture, their PCA as numpy computes it (covariance with bias, eigh, largest first, each
component signed so its largest entry is positive), a first mixture, and scikit-learn's
GaussianMixture(covariance_type="diag") after five EM steps from it (tol = 0, so every step
runs), with the mean log-likelihood numpy computes under the final mixture.

usage: eval/.venv/bin/python eval/mixture/make_fixture.py   (writes eval/mixture/fixture.json)
"""
import json
import os
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

HERE = os.path.dirname(os.path.abspath(__file__))
DIMS, PROJECTED, K, N, STEPS, REG = 10, 4, 3, 2400, 5, 1e-6


def pca(x, d):
    mean = x.mean(axis=0)
    cov = np.cov(x, rowvar=False, bias=True)
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:d]
    components = vectors[:, order].T.copy()
    for c in components:
        at = int(np.argmax(np.abs(c)))
        if c[at] < 0:
            c *= -1
    return mean, components, values[order], float(np.trace(cov))


def main():
    rng = np.random.default_rng(11)
    centres = rng.normal(scale=2.0, size=(K, DIMS))
    spreads = rng.uniform(0.2, 0.8, size=(K, DIMS))
    weights = np.array([0.5, 0.3, 0.2])
    labels = rng.choice(K, size=N, p=weights)
    x = (centres[labels] + rng.normal(size=(N, DIMS)) * spreads[labels]).astype(np.float32)
    x64 = x.astype(np.float64)
    mean, components, variances, total = pca(x64, PROJECTED)
    y = (x64 - mean) @ components.T
    first = [5, 700, 1900]
    init_means = y[first]
    init_variances = np.tile(variances + REG, (K, 1))
    gmm = GaussianMixture(
        n_components=K, covariance_type="diag", reg_covar=REG, max_iter=STEPS, tol=0.0,
        weights_init=np.full(K, 1.0 / K), means_init=init_means,
        precisions_init=1.0 / init_variances, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gmm.fit(y)
    fixture = {
        "dims": DIMS, "projected": PROJECTED, "components": K, "steps": STEPS, "reg": REG,
        "x": x.reshape(-1).tolist(),
        "pca": {"mean": mean.tolist(), "components": components.reshape(-1).tolist(),
                "variances": variances.tolist(), "total_variance": total},
        "first": {"weights": [1.0 / K] * K, "means": init_means.reshape(-1).tolist(),
                  "variances": init_variances.reshape(-1).tolist()},
        "sklearn": {"weights": gmm.weights_.tolist(), "means": gmm.means_.reshape(-1).tolist(),
                    "variances": gmm.covariances_.reshape(-1).tolist(),
                    "mean_log_likelihood": float(gmm.score(y))},
        "truth": {"weights": weights.tolist()},
    }
    with open(os.path.join(HERE, "fixture.json"), "w") as f:
        json.dump(fixture, f)


if __name__ == "__main__":
    main()
