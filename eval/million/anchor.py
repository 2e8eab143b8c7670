#!/usr/bin/env python3
"""faiss's k-means with an approximate assignment index, the fair anchor for vocab's
approximate k-means (issue 51, item 5): the same vectors and initial centroids, each
iteration a search of every vector's nearest centroid through an index over the centroids
(rebuilt every iteration, as faiss's Clustering does with the index it is given), then the
means. Arms:
  ivf:  IndexIVFFlat, LISTS lists (its coarse quantizer trained on the centroids), PROBES probed;
  hnsw: IndexHNSWFlat, M = 32, efSearch EF.
Reports each iteration's seconds (build, search, means) and, on SAMPLE vectors drawn from the
seed, how often the index found the exact nearest centroid (IndexFlatL2 over the same ones).

usage: anchor.py FEATURES INIT.npy ARM ITERATIONS OUT.csv [--lists 512] [--probes 8] [--ef 64]
       anchor.py FEATURES CENTROIDS ARM 0 OUT.csv ...   (ITERATIONS 0: only how often the index
       finds the exact nearest of CENTROIDS, e.g. vocab's final vocabulary, as vocab measures it)
FEATURES is a vocab binary feature file (records: u32 id, u16 row, u16 col, float32 values);
CENTROIDS a .npy or a vocab binary vocabulary (the same records).
"""
import argparse
import sys
import time

import faiss
import numpy as np

HEADER = 32


def load(path):
    head = np.fromfile(path, dtype=np.uint8, count=HEADER)
    assert head[:8].tobytes() == b"VOCABFEA", "not a vocab feature file"
    dims = int(np.frombuffer(head[12:16].tobytes(), dtype="<u4")[0])
    record = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])
    rows = np.memmap(path, dtype=record, mode="r", offset=HEADER)
    return np.ascontiguousarray(rows["v"], dtype=np.float32)


def means(x, assign, centroids):
    """The mean of each centroid's vectors; a centroid with none keeps its place."""
    order = np.argsort(assign, kind="stable")
    sorted_assign = assign[order]
    starts = np.flatnonzero(np.r_[True, sorted_assign[1:] != sorted_assign[:-1]])
    owners = sorted_assign[starts]
    counts = np.diff(np.r_[starts, len(order)])
    out = centroids.copy()
    step = 1 << 18
    sums = np.zeros((len(owners), x.shape[1]), dtype=np.float64)
    # Sums by runs of the sorted vectors, a block at a time (bounded memory).
    for a in range(0, len(order), step):
        block = x[order[a:a + step]].astype(np.float64)
        run = np.searchsorted(starts, np.arange(a, min(a + step, len(order))), side="right") - 1
        firsts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
        sums[run[firsts]] += np.add.reduceat(block, firsts, axis=0)
    out[owners] = (sums / counts[:, None]).astype(np.float32)
    return out, len(centroids) - len(owners)


def index_over(centroids, args):
    """The arm's index over `centroids`."""
    d = centroids.shape[1]
    if args.arm == "ivf":
        quantizer = faiss.IndexFlatL2(d)
        index = faiss.IndexIVFFlat(quantizer, d, args.lists)
        index.train(centroids)
        index.add(centroids)
        index.nprobe = args.probes
    else:
        index = faiss.IndexHNSWFlat(d, 32)
        index.add(centroids)
        index.hnsw.efSearch = args.ef
    return index


def exact_found(x, sample, centroids, assign):
    """How many of the `sample` vectors `assign` gives their exact nearest centroid."""
    exact = faiss.IndexFlatL2(centroids.shape[1])
    exact.add(centroids)
    _, truth = exact.search(x[sample], 1)
    return int((truth[:, 0] == assign).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("init")
    ap.add_argument("arm", choices=["ivf", "hnsw"])
    ap.add_argument("iterations", type=int)
    ap.add_argument("out")
    ap.add_argument("--lists", type=int, default=512)
    ap.add_argument("--probes", type=int, default=8)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    x = load(args.features)
    centroids = (np.load(args.init) if args.init.endswith(".npy") else load(args.init)).astype(np.float32)
    n, d = x.shape
    k = len(centroids)
    rng = np.random.default_rng(args.seed)
    sample = np.sort(rng.choice(n, size=min(args.sample, n), replace=False))
    print(f"anchor: {args.arm}, {n} x {d} into k = {k}, {faiss.omp_get_max_threads()} threads",
          file=sys.stderr)
    if args.iterations == 0:
        index = index_over(centroids, args)
        _, found = index.search(x[sample], 1)
        hits = exact_found(x, sample, centroids, found[:, 0])
        with open(args.out, "w") as out:
            out.write("arm,centroids,exact_nearest,sample\n")
            out.write(f"{args.arm},{args.init},{hits},{len(sample)}\n")
        print(f"{args.arm}: exact nearest for {hits} of {len(sample)}", file=sys.stderr)
        return
    with open(args.out, "w") as out:
        out.write("arm,iteration,build_s,search_s,means_s,seconds,exact_nearest,sample,inertia,empty\n")
        for it in range(1, args.iterations + 1):
            t0 = time.perf_counter()
            index = index_over(centroids, args)
            t1 = time.perf_counter()
            dist, assign = index.search(x, 1)
            t2 = time.perf_counter()
            assign = assign[:, 0]
            found = exact_found(x, sample, centroids, assign[sample])
            inertia = float(dist[:, 0].astype(np.float64).sum())
            t3 = time.perf_counter()
            centroids, empty = means(x, assign, centroids)
            t4 = time.perf_counter()
            seconds = (t1 - t0) + (t2 - t1) + (t4 - t3)
            line = (f"{args.arm},{it},{t1 - t0:.2f},{t2 - t1:.2f},{t4 - t3:.2f},{seconds:.2f},"
                    f"{found},{len(sample)},{inertia:.6e},{empty}")
            out.write(line + "\n")
            out.flush()
            print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
