"""Dense encoding throughput: vocab encode against OpenCV + faiss (see run.sh).

Both sides turn every photo into the same kind of histogram: 512-d HOG (40 px windows, 8 px
cells, 2x2-cell blocks, 8 orientations) on a dense grid, each window assigned to its nearest word
(or, soft, to its 5 nearest with vocab's weights) of the same K-word vocabulary, counted over a
spatial pyramid, normalised. The reference runs one process per core (OpenCV and faiss each on
one thread inside it), the way one would parallelise it; vocab runs with its default threads.
Wall-clock seconds of the whole command (vocab) or the whole pool (reference), best of
--repeat, photos already in the page cache.
"""

import argparse
import csv
import multiprocessing as mp
import os
import pathlib
import platform
import subprocess
import tempfile
import time

import cv2
import faiss
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
SHARPNESS = 10.0  # vocab's default
CASES = [  # (stride, soft, pyramid levels)
    (16, 0, 1),
    (8, 0, 1),
    (8, 5, 3),  # configs/scene15.toml
]
# vocab encode --kernel, at the machine's widest instruction-set level; "int8-avx2" is the int8
# kernel capped at AVX2 (VOCAB_MAX_ISA=avx2), beside the VNNI build on machines with AVX-512.
KERNELS = ["f32", "int8-avx2", "int8"]

_state = {}


def _init(centroids):
    cv2.setNumThreads(1)
    faiss.omp_set_num_threads(1)
    index = faiss.IndexFlatL2(centroids.shape[1])
    index.add(centroids)
    _state["index"] = index
    _state["k"] = centroids.shape[0]
    _state["hog"] = cv2.HOGDescriptor((40, 40), (16, 16), (8, 8), (8, 8), 8)


def _encode(job):
    path, stride, soft, levels = job
    img = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
    h, w = img.shape
    desc = _state["hog"].compute(img, winStride=(stride, stride)).reshape(-1, 512)
    nx, ny = (w - 40) // stride + 1, (h - 40) // stride + 1
    k = _state["k"]
    dist, idx = _state["index"].search(desc, max(soft, 1))
    if soft:
        d1 = np.maximum(dist[:, :1], 1e-12)
        weights = np.exp(-SHARPNESS * (dist / d1 - 1.0))
        weights /= weights.sum(axis=1, keepdims=True)
    else:
        weights = np.ones_like(dist)
    # Window centres, row-major as OpenCV orders windows.
    cy = (np.arange(nx * ny) // nx) * stride + 20
    cx = (np.arange(nx * ny) % nx) * stride + 20
    parts = []
    for level in range(levels):
        cells = 1 << level
        cell = (np.minimum(cy * cells // h, cells - 1) * cells + np.minimum(cx * cells // w, cells - 1))
        bins = (cell[:, None] * k + idx).ravel()
        hist = np.bincount(bins, weights=weights.ravel(), minlength=cells * cells * k)
        parts.append(hist / max(hist.sum(), 1e-12))
    return np.concatenate(parts).astype(np.float32)


def reference(photos, centroids, stride, soft, levels, workers):
    jobs = [(str(p), stride, soft, levels) for p in photos]
    ctx = mp.get_context("fork")
    with ctx.Pool(workers, initializer=_init, initargs=(centroids,)) as pool:
        pool.map(_encode, jobs[:workers])  # warm the workers (imports, index)
        t = time.perf_counter()
        out = pool.map(_encode, jobs, chunksize=8)
        seconds = time.perf_counter() - t
    assert len(out) == len(photos)
    return seconds


def faiss_rates(centroids, sizes=(195, 767, 3000), repeat=5):
    """faiss's search on one thread, per call, for batches of a photo's windows (stride 16 and 8
    give about 195 and 767) and a larger batch: where the reference's time goes."""
    faiss.omp_set_num_threads(1)
    index = faiss.IndexFlatL2(centroids.shape[1])
    index.add(centroids)
    rows = []
    for n in sizes:
        x = np.random.default_rng(n).random((n, centroids.shape[1]), dtype=np.float32)
        index.search(x, 1)
        t = time.perf_counter()
        for _ in range(repeat):
            index.search(x, 1)
        seconds = (time.perf_counter() - t) / repeat
        rows.append((n, seconds * 1e3, 2 * n * centroids.shape[0] * centroids.shape[1] / seconds / 1e9))
    return rows


def vocab_encode(vocab, vocabulary, photos_dir, labels, stride, soft, levels, kernel, out):
    kernel, _, cap = kernel.partition("-")
    env = dict(os.environ, VOCAB_MAX_ISA=cap) if cap else None
    cmd = [vocab, "encode", "--vocabulary", str(vocabulary), "--input", str(photos_dir),
           "--labels", str(labels), "--out", str(out), "--stride", str(stride),
           "--pyramid", str(levels), "--soft", str(soft), "--norm", "l1", "--kernel", kernel]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - t


def lscpu():
    info = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    flags = info.get("Flags", "").split()
    isa = [f for f in ["avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"] if f in flags]
    return f"{info.get('Model name', platform.processor())}, {os.cpu_count()} cores ({', '.join(isa)})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--photos", type=pathlib.Path, required=True)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    labels = args.photos / "labels.csv"
    with open(labels) as f:
        rows = list(csv.reader(f))[1:]
    photos = [args.photos / r[0] for r in rows]
    workers = len(os.sched_getaffinity(0))
    for p in photos:  # page cache
        p.read_bytes()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # One vocabulary for both sides: k-means on random patches of every photo.
        subprocess.run([args.vocab, "features", "--input", str(args.photos), "--labels", str(labels),
                        "--out", str(tmp / "f.bin"), "--per-image", "50", "--seed", "1"],
                       check=True, capture_output=True)
        subprocess.run([args.vocab, "kmeans", "--features", str(tmp / "f.bin"), "--k", str(args.k),
                        "--iterations", "3", "--seed", "1", "--format", "text",
                        "--out", str(tmp / "vocab.txt")], check=True, capture_output=True)
        centroids = np.loadtxt(tmp / "vocab.txt", dtype=np.float32)
        assert centroids.shape == (args.k, 512), centroids.shape
        rates = faiss_rates(centroids)
        for stride, soft, levels in CASES:
            best = {kernel: float("inf") for kernel in KERNELS}
            best_r = float("inf")
            for _ in range(args.repeat):  # interleaved
                for kernel in KERNELS:
                    seconds = vocab_encode(args.vocab, tmp / "vocab.txt", args.photos, labels,
                                           stride, soft, levels, kernel, tmp / f"h-{kernel}.bin")
                    best[kernel] = min(best[kernel], seconds)
                best_r = min(best_r, reference(photos, centroids, stride, soft, levels, workers))
            for kernel in KERNELS:
                results.append(dict(stride=stride, soft=soft, pyramid=levels, kernel=kernel,
                                    photos=len(photos), vocab_s=best[kernel], reference_s=best_r))
                print(results[-1], flush=True)
    with open(HERE / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["stride", "soft", "pyramid", "kernel", "k", "photos", "workers",
                                          "vocab_seconds", "vocab_photos_per_s",
                                          "reference_seconds", "reference_photos_per_s", "ratio"])
        w.writeheader()
        for r in results:
            w.writerow(dict(stride=r["stride"], soft=r["soft"], pyramid=r["pyramid"], kernel=r["kernel"], k=args.k,
                            photos=r["photos"], workers=workers,
                            vocab_seconds=f"{r['vocab_s']:.2f}",
                            vocab_photos_per_s=f"{r['photos'] / r['vocab_s']:.1f}",
                            reference_seconds=f"{r['reference_s']:.2f}",
                            reference_photos_per_s=f"{r['photos'] / r['reference_s']:.1f}",
                            ratio=f"{r['reference_s'] / r['vocab_s']:.2f}"))
    lines = [
        "# Dense encoding: vocab against OpenCV + faiss",
        "",
        "Command: `eval/encode_bench/run.sh` (results.csv holds the same numbers). Machine: "
        f"{lscpu()}; OpenCV {cv2.__version__}, faiss {faiss.__version__}.",
        "",
        f"{len(photos)} scene15 photos, K = {args.k}, {workers} workers each side (vocab: threads; "
        "reference: processes), wall seconds, best of "
        f"{args.repeat} interleaved runs; vocab's time includes starting the command and loading the "
        "vocabulary, the reference's does not include starting its pool.",
        "",
        "| stride | soft | pyramid | vocab kernel | vocab photos/s | reference photos/s | vocab / reference |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['stride']} | {r['soft'] or 'hard'} | {r['pyramid']} | {r['kernel']} | "
                     f"{r['photos'] / r['vocab_s']:.1f} | {r['photos'] / r['reference_s']:.1f} | "
                     f"{r['reference_s'] / r['vocab_s']:.2f}x |")
    lines += ["", "faiss's search alone, one thread, per call (random queries, the same vocabulary):", "",
              "| queries per call | ms | GFLOP/s |", "|---|---|---|"]
    lines += [f"| {n} | {ms:.1f} | {rate:.0f} |" for n, ms, rate in rates]
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
