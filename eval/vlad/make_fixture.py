#!/usr/bin/env python3
"""The VLAD fixture of pipeline/src/encode/vlad.rs: a small photo's patches, words and soft
weights, and the VLAD vector numpy computes from the formulas (Jegou et al.; Arandjelovic and
Zisserman's intra-normalisation; Lazebnik et al.'s pyramid weights; signed square root; L2).

usage: eval/vlad/make_fixture.py   (writes eval/vlad/fixture.json)
"""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PATCH = 40
MISSING = 2**32 - 1  # a word past the vocabulary (u32::MAX): skipped


def vlad(x, words, weights, centroids, positions, width, height, levels):
    k, dims = centroids.shape
    blocks = []
    for level in range(levels):
        cells = 2**level
        v = np.zeros((cells * cells, k, dims))
        for i, (r, c) in enumerate(positions):
            cy, cx = r + PATCH // 2, c + PATCH // 2
            cell = min(cy * cells // height, cells - 1) * cells + min(cx * cells // width, cells - 1)
            for j, w in zip(words[i], weights[i]):
                if j >= k:
                    continue
                v[cell, j] += float(w) * (x[i].astype(np.float64) - centroids[j].astype(np.float64))
        top = levels - 1
        weight = 1.0 if levels == 1 else (1 / 2**top if level == 0 else 1 / 2**(top - level + 1))
        norms = np.linalg.norm(v, axis=2, keepdims=True)
        v = np.where(norms > 0, v / np.where(norms > 0, norms, 1.0) * weight, 0.0)
        blocks.append(v.reshape(-1))
    v = np.concatenate(blocks)
    v = np.sign(v) * np.sqrt(np.abs(v))
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else v


def main():
    rng = np.random.default_rng(7)
    k, dims, per, levels, width, height, n = 3, 5, 2, 2, 120, 100, 14
    x = rng.normal(size=(n, dims)).astype(np.float32)
    centroids = rng.normal(size=(k, dims)).astype(np.float32)
    positions = [(int(r), int(c)) for r, c in
                 zip(rng.integers(0, height - PATCH + 1, n), rng.integers(0, width - PATCH + 1, n))]
    dist = ((x[:, None, :].astype(np.float64) - centroids[None].astype(np.float64))**2).sum(-1)
    words = np.argsort(dist, axis=1, kind="stable")[:, :per].astype(np.int64)
    near = np.take_along_axis(dist, words, axis=1)
    # The last patch's second word is past the vocabulary (as the search reports a slot it
    # could not fill): infinitely far, weight 0, the other weights still summing to 1.
    words[-1, 1] = MISSING
    near[-1, 1] = np.inf
    weights = np.exp(-10.0 * (near / near[:, :1] - 1.0))
    weights = (weights / weights.sum(axis=1, keepdims=True)).astype(np.float32)
    hard_words = words[:, :1]
    fixture = {
        "k": k, "dims": dims, "per": per, "width": width, "height": height, "levels": levels,
        "descriptors": [float(v) for v in x.reshape(-1)],
        "centroids": [float(v) for v in centroids.reshape(-1)],
        "words": [int(w) for w in words.reshape(-1)],
        "weights": [float(w) for w in weights.reshape(-1)],
        "positions": positions,
        "expected": [float(v) for v in vlad(x, words, weights, centroids, positions, width, height, levels)],
        "expected_hard": [float(v) for v in vlad(x, hard_words, np.ones_like(hard_words, dtype=np.float32),
                                                  centroids, positions, width, height, levels)],
    }
    with open(os.path.join(HERE, "fixture.json"), "w") as f:
        json.dump(fixture, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.join(HERE, 'fixture.json')}: {len(fixture['expected'])} values")


if __name__ == "__main__":
    main()
