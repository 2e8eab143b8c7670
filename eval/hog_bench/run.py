"""Side-by-side HOG throughput: vocab vs scikit-image vs OpenCV, same photos, same patches.

usage: eval/hog_bench/run.sh   (builds vocab, creates the venv, runs this, writes results here)

Dense: every photo's whole-image HOG with all 40x40 windows on an 8-px grid, in megapixels of
photo per second. vocab: `BlockGrid` + windows; scikit-image: `hog(image, feature_vector=False)`
(the windows are views of its block array); OpenCV: `HOGDescriptor((40,40),(16,16),(8,8),(8,8),8)
.compute(image, winStride=(8,8))`. Random: each of the photos' 5 random patches described on its
own, in patches per second. Decoding is not timed for anyone.

Each implementation runs with 1 worker and with 2 workers (vocab: rayon threads; the Python
libraries: a process pool, each process with OpenCV's own threading off so that workers are
comparable). Best of --repeat runs.
"""

import argparse
import csv
import json
import multiprocessing as mp
import os
import pathlib
import platform
import subprocess
import time

import numpy as np
from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
WEIGHTS = np.array([0.2125, 0.7154, 0.0721], dtype=np.float32)
SK = dict(orientations=8, pixels_per_cell=(8, 8), cells_per_block=(2, 2), block_norm="L2-Hys")

_IMAGES = None  # per-process: list of (float64 luminance, uint8 luminance)
_PATCHES = None  # per-process: list of (photo index, row, col)


def luminance(path):
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(np.float32)
    return WEIGHTS[0] * rgb[..., 0] + WEIGHTS[1] * rgb[..., 1] + WEIGHTS[2] * rgb[..., 2]


def _init(images, patches):
    global _IMAGES, _PATCHES
    import cv2

    cv2.setNumThreads(1)
    _IMAGES, _PATCHES = images, patches


def _dense(impl, idx):
    import cv2
    from skimage.feature import hog

    f64, u8 = _IMAGES[idx]
    if impl == "scikit-image":
        return hog(f64, feature_vector=False, **SK).shape[0]
    d = cv2.HOGDescriptor((40, 40), (16, 16), (8, 8), (8, 8), 8)
    return d.compute(u8, winStride=(8, 8)).size


def _patches(impl, chunk):
    import cv2
    from skimage.feature import hog

    d = cv2.HOGDescriptor((40, 40), (16, 16), (8, 8), (8, 8), 8)
    n = 0
    for idx, r, c in _PATCHES[chunk[0]:chunk[1]]:
        f64, u8 = _IMAGES[idx]
        if impl == "scikit-image":
            hog(f64[r:r + 40, c:c + 40], **SK)
        else:
            d.compute(np.ascontiguousarray(u8[r:r + 40, c:c + 40]))
        n += 1
    return n


def best_of(repeat, fn):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(impl, workers, images, patches, repeat):
    chunks = [(i, min(i + 50, len(patches))) for i in range(0, len(patches), 50)]
    ctx = mp.get_context("fork")
    with ctx.Pool(workers, initializer=_init, initargs=(images, patches)) as pool:
        dense = best_of(repeat, lambda: pool.starmap(_dense, [(impl, i) for i in range(len(images))], chunksize=4))
        rand = best_of(repeat, lambda: pool.starmap(_patches, [(impl, ch) for ch in chunks], chunksize=1))
    return dense, rand


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True, help="path of the vocab binary")
    ap.add_argument("--photos", type=pathlib.Path, required=True)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=pathlib.Path, default=HERE)
    args = ap.parse_args()
    work = args.out / "work"
    work.mkdir(parents=True, exist_ok=True)

    paths = sorted(p.relative_to(args.photos).as_posix() for p in args.photos.rglob("*.jpg"))
    step = max(1, len(paths) // args.count)
    chosen = paths[::step][: args.count]
    with open(work / "photos.csv", "w") as f:
        f.write("path\n" + "".join(p + "\n" for p in chosen))

    rows = []
    for workers in (1, 2):
        subprocess.run([args.vocab, "--threads", str(workers), "bench", "hog", "--input", str(args.photos),
                        "--labels", str(work / "photos.csv"), "--repeat", str(args.repeat * 4),
                        "--out", str(work)], check=True)
        with open(work / "vocab.csv") as f:
            r = next(csv.DictReader(f))
        rows.append(dict(implementation="vocab", workers=workers, dense_mpix_per_s=float(r["dense_mpix_per_s"]),
                         patches_per_s=float(r["patches_per_s"])))
        megapixels, n_patches = float(r["megapixels"]), int(r["patches"])

    # The same photos (vocab's picture ids are positions in the sorted list) and patches.
    images = []
    for p in chosen:
        lum = luminance(args.photos / p)
        images.append((lum.astype(np.float64), np.clip(np.rint(lum), 0, 255).astype(np.uint8)))
    index = {p: i for i, p in enumerate(chosen)}
    with open(work / "patches.csv") as f:
        patches = [(index[r["path"]], int(r["row"]), int(r["col"])) for r in csv.DictReader(f)]
    assert len(patches) == n_patches
    assert abs(sum(i[0].size for i in images) / 1e6 - megapixels) < 1e-2

    for impl in ("scikit-image", "opencv"):
        for workers in (1, 2):
            dense, rand = measure(impl, workers, images, patches, args.repeat)
            rows.append(dict(implementation=impl, workers=workers, dense_mpix_per_s=megapixels / dense,
                             patches_per_s=len(patches) / rand))
            print(f"{impl} x{workers}: dense {megapixels / dense:.1f} Mpix/s, random {len(patches) / rand:.0f} patches/s")

    import cv2
    import skimage

    machine = dict(cpu=platform.processor() or "x86_64", cores=os.cpu_count(), python=platform.python_version(),
                   skimage=skimage.__version__, opencv=cv2.__version__, numpy=np.__version__,
                   photos=len(chosen), megapixels=round(megapixels, 3), patches=len(patches))
    with open(args.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["implementation", "workers", "dense_mpix_per_s", "patches_per_s"])
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()})
    (args.out / "machine.json").write_text(json.dumps(machine, indent=2) + "\n")
    ocv = {r["workers"]: r for r in rows if r["implementation"] == "opencv"}
    lines = ["| implementation | workers | dense Mpix/s | random patches/s | dense vs OpenCV | random vs OpenCV |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        o = ocv[r["workers"]]
        lines.append(f"| {r['implementation']} | {r['workers']} | {r['dense_mpix_per_s']:.1f} | {r['patches_per_s']:.0f} "
                     f"| {r['dense_mpix_per_s'] / o['dense_mpix_per_s']:.2f}x | {r['patches_per_s'] / o['patches_per_s']:.2f}x |")
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
