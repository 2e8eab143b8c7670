"""Exact k-means at large k: vocab (f32, int8, pruned, pruned-int8) against faiss, side by side.

usage: eval/large_k/run.sh [--per-image P | --partitions DIR] [--ks 16384,65536] [--iterations 20]
                          [--full-iterations 3] [--modes faiss,f32,int8,pruned,pruned-int8]
                          (a mode ending in -avx2, e.g. int8-avx2, runs capped at AVX2)
                          [--faiss-iterations I] [--init-seed S] [--name NAME]

Data: real 512-d HOG, P random patches per scene15 photo (`vocab features --per-image P`, the
paper's sampling; 134 per photo gives ~200,000 vectors), f32; or, with --partitions, a partition
set (`vocab partition`) such as the dense stride-8 HOG of every photo in u8 partitions (1.17M
vectors, eval/million/run.sh builds it), which vocab reads as it is and faiss gets dequantised
exactly as vocab loads it (byte / 255 in f32). Initial centroids: k rows drawn with
numpy (seed --init-seed, 0 by default), given to every run (`--init-centroids`, faiss `init_centroids`). All run with 2
threads, one after another in one process tree, in the order faiss, f32, int8, pruned,
pruned-int8 per k.

A full pass costs the same every iteration, so the full-pass runs (vocab f32 and int8) are timed
over --full-iterations and their 20-iteration time is that mean x 20 (marked "projected"); the
pruned runs, whose point is the whole run, run all --iterations, and so does faiss unless
--faiss-iterations makes it a projected full pass too (large k, where 20 faiss iterations take
half an hour). Inertia: the last
iteration's (faiss: its last `obj`; vocab: the assignment to the previous centroids, as faiss
reports it). Per-iteration seconds of every run go to iterations.csv.
"""

import argparse
import csv
import os
import pathlib
import subprocess
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "kmeans_bench"))
from run import read_bin, run_faiss, sgemm_peak  # noqa: E402


def read_partitions(folder):
    """The vectors of a partition set in manifest order, as vocab loads them (u8: byte / 255)."""
    import tomllib

    manifest = tomllib.loads((folder / "manifest.toml").read_text())
    dims, u8 = manifest["dims"], manifest["element"] == "u8"
    parts = []
    for entry in manifest["partitions"]:
        raw = np.fromfile(folder / entry["file"], dtype=np.uint8)
        assert raw[:8].tobytes() == b"VOCABFEA"
        count = int(raw[16:24].view("<u8")[0])
        assert count == entry["count"]
        value = ("<u1", (dims,)) if u8 else ("<f4", (dims,))
        rec = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", *value)])
        v = raw[32:].view(rec)["v"][:count]
        parts.append(v.astype(np.float32) / np.float32(255) if u8 else v)
    return np.ascontiguousarray(np.concatenate(parts))


def run_vocab(vocab, data, init, k, iterations, work, mode, suffix):
    # "-avx2" caps the kernels at AVX2 (VOCAB_MAX_ISA), beside the VNNI build on AVX-512 machines.
    base, cap = (mode[:-len("-avx2")], "avx2") if mode.endswith("-avx2") else (mode, None)
    # int8 prunes by default since issue 51: its full pass is asked for.
    flags = {"f32": [], "int8": ["--kernel", "int8", "--prune", "false"], "pruned": ["--prune"],
             "pruned-int8": ["--prune", "--kernel", "int8"]}[base]
    env = dict(os.environ, VOCAB_MAX_ISA=cap) if cap else None
    out = work / f"vocab-k{k}-{mode}{suffix}.bin"
    subprocess.run([vocab, "--quiet", "--threads", "2", "kmeans", "--features", str(data), "--k", str(k),
                    "--iterations", str(iterations), "--tol", "0", "--init-centroids", str(init), *flags,
                    "--out", str(out)], check=True, stdout=subprocess.DEVNULL, env=env)
    with open(f"{out}.iterations.csv") as f:
        rows = list(csv.DictReader(f))
    return [(int(r["iteration"]), float(r["seconds"]), float(r["inertia"]), int(r.get("kept") or 0))
            for r in rows]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--per-image", type=int, default=134)
    ap.add_argument("--partitions", type=pathlib.Path, default=None,
                    help="a partition set to cluster instead of --per-image random patches")
    ap.add_argument("--ks", default="16384")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--full-iterations", type=int, default=3)
    ap.add_argument("--modes", default="faiss,f32,int8,pruned,pruned-int8")
    ap.add_argument("--init-seed", type=int, default=0,
                    help="numpy seed of the k starting rows (several starts: one run per seed)")
    ap.add_argument("--name", default="", help="suffix of the output files (results-NAME.csv ...)")
    ap.add_argument("--faiss-iterations", type=int, default=None,
                    help="run faiss this many iterations and project (default: all --iterations)")
    args = ap.parse_args()
    work = HERE / "work"
    work.mkdir(exist_ok=True)
    if args.partitions is not None:
        data = args.partitions.resolve()
        x = read_partitions(data)
    else:
        data = work / f"hog-{args.per_image}.bin"
        if not data.exists():
            subprocess.run([args.vocab, "--quiet", "features", "--input", args.photos, "--per-image",
                            str(args.per_image), "--seed", "0", "--out", str(data)], check=True)
        x = read_bin(data)
    n, d = x.shape
    peak = sgemm_peak()
    print(f"data {n} x {d}; numpy sgemm peak {peak:.0f} GFLOP/s", flush=True)
    modes = args.modes.split(",")
    suffix = f"-{args.name}" if args.name else ""
    summary, per_iteration = [], []
    for k in [int(v) for v in args.ks.split(",")]:
        c0 = x[np.sort(np.random.default_rng(args.init_seed).choice(n, k, replace=False))].copy()
        init = work / f"init-k{k}{suffix}.txt"
        np.savetxt(init, c0, fmt="%.9g")
        for mode in modes:
            full = mode in ("f32", "int8", "int8-avx2") or (mode == "faiss" and args.faiss_iterations is not None)
            iters = args.full_iterations if full else args.iterations
            if mode == "faiss" and args.faiss_iterations is not None:
                iters = args.faiss_iterations
            if mode == "faiss":
                r = run_faiss(x, c0, iters)
                iters = r["iterations"]  # faiss stops early at a fixed point
                rows = [(1, r["per_iter"] * iters, r["inertia"], 0)]
                per_iteration.append(dict(k=k, mode=mode, iteration=iters, seconds=round(r["per_iter"] * iters, 3),
                                          inertia=r["inertia"], kept=0))
                total, per, inertia = r["per_iter"] * iters, r["per_iter"], r["inertia"]
            else:
                rows = run_vocab(args.vocab, data, init, k, iters, work, mode, suffix)
                for it, s, inertia, kept in rows:
                    per_iteration.append(dict(k=k, mode=mode, iteration=it, seconds=s, inertia=inertia, kept=kept))
                total = sum(s for _, s, _, _ in rows)
                per, inertia = total / len(rows), rows[-1][2]
            to_20 = per * args.iterations if full else total
            # A run that reaches a fixed point stops early (even at --tol 0): count what ran.
            summary.append(dict(k=k, n=n, mode=mode, iterations_run=iters if mode == "faiss" else len(rows),
                                seconds_per_iteration=round(per, 3),
                                seconds_to_all=round(to_20, 3), projected=full,
                                final_inertia=inertia if not full else ""))
            print(f"k={k} {mode}: {per:.2f} s/iteration, {to_20:.0f} s to {args.iterations}"
                  f"{' (projected)' if full else ''}, inertia {inertia:.6e}", flush=True)
    with open(HERE / f"iterations{suffix}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(per_iteration[0]))
        w.writeheader()
        w.writerows(per_iteration)
    with open(HERE / f"results{suffix}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0]))
        w.writeheader()
        w.writerows(summary)
    lines = [f"n = {n} HOG vectors x {d}; {args.iterations} iterations; numpy sgemm {peak:.0f} GFLOP/s", "",
             f"| k | assignment | s/iteration | s to {args.iterations} iterations | vs faiss | final inertia |",
             "|---|---|---|---|---|---|"]
    for r in summary:
        base = next((b for b in summary if b["k"] == r["k"] and b["mode"] == "faiss"), None)
        ratio = f"{base['seconds_to_all'] / r['seconds_to_all']:.2f}x" if base and r["seconds_to_all"] > 0 else ""
        mark = " (projected)" if r["projected"] else ""
        inertia = f"{r['final_inertia']:.6e}" if r["final_inertia"] != "" else "(not run to the end)"
        lines.append(f"| {r['k']} | {r['mode']} | {r['seconds_per_iteration']:.2f} | "
                     f"{r['seconds_to_all']:.0f}{mark} | {ratio} | {inertia} |")
    (HERE / f"results{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
