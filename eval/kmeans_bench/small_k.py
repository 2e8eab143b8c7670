"""Small k on AVX2 (issue 51, item 4): `vocab kmeans --kernel int8` against faiss at k = 1,024 on
40,000 x 512 blob vectors, side by side in one run.

usage: eval/kmeans_bench/small_k.sh [--rounds R] [--iterations I] [--k K] [--data FILE] [--before BIN]
                                   [--profile]

Data: `vocab datasets synth --n 40000` (64 Gaussian blobs in 512 dims, seed 0), or the feature
file `--data` names (`pruning-default.sh` gives it 150,585 HOG patches of the photos); initial
centroids: k rows drawn with numpy (seed 0), given to every run. Two threads each. Every round
runs, one after another: faiss (`faiss.Kmeans`, seconds = wall time / the iterations it ran:
it stops early once no centroid moves), then vocab's
`--kernel int8` full pass (`--prune false`) and pruned steps (`--prune`, int8's default since
issue 51), each at the CPU's widest build and capped
to AVX2 (`VOCAB_MAX_ISA=avx2`), and the same four with the build before (`--before`), if given.
vocab's seconds are the mean of its per-iteration log (iteration 1, which quantises the rows,
included). Each run's ratio is to the faiss run of its own round; the summary gives the median
over rounds. Output: small-k.csv (every run) and small-k.md (the summary) beside this script;
with --profile also small-k-profile.txt: `perf record` over 30 iterations of the int8 full pass
capped to AVX2 on the same data and start, the functions above 0.5%.
"""

import argparse
import hashlib
import csv
import os
import pathlib
import statistics
import subprocess

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402

from run import read_bin, run_faiss  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def faiss_run(x, c0, iterations):
    """run.py's faiss run (seconds over the iterations it ran: it stops early at a fixed point)."""
    f = run_faiss(x, c0, iterations)
    return dict(seconds=f["per_iter"], first=f["first"], ran=f["iterations"], inertia=f["inertia"])


def run_vocab(vocab, data, init, k, iterations, work, prune, cap, before):
    out = work / "small-k-vocab.bin"
    env = dict(os.environ)
    env.pop("VOCAB_MAX_ISA", None)
    if cap:
        env["VOCAB_MAX_ISA"] = cap
    subprocess.run([vocab, "--quiet", "--threads", "2", "kmeans", "--features", str(data), "--k", str(k),
                    "--iterations", str(iterations), "--tol", "0", "--init-centroids", str(init),
                    "--kernel", "int8", *prune_flags(prune, before), "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    with open(f"{out}.iterations.csv") as f:
        rows = list(csv.DictReader(f))
    secs = [float(r["seconds"]) for r in rows]
    return dict(ran=len(rows), md5=hashlib.md5(out.read_bytes()).hexdigest(),seconds=float(np.mean(secs)), first=secs[0], inertia=float(rows[-1]["inertia"]),
                later=float(np.mean(secs[1:])) if len(secs) > 1 else secs[0])


def prune_flags(prune, before):
    """vocab's flags for pruning or not: `--prune false` turns off int8's default (a build from
    before that default takes no value, and its int8 runs the full pass without it)."""
    if prune:
        return ["--prune"]
    return [] if before else ["--prune", "false"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--before", help="the build to compare with (its vocab binary)")
    ap.add_argument("--n", type=int, default=40_000)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--name", default="small-k")
    ap.add_argument("--data", type=pathlib.Path, help="a feature file instead of the blobs")
    ap.add_argument("--profile", action="store_true", help="also profile the AVX2 int8 full pass")
    args = ap.parse_args()
    work = HERE / "work"
    work.mkdir(exist_ok=True)
    data = args.data or work / f"synth-{args.n}-c64.bin"
    if not data.exists():
        subprocess.run([args.vocab, "--quiet", "datasets", "synth", "--n", str(args.n), "--dims", "512",
                        "--seed", "0", "--out", str(data)], check=True, stdout=subprocess.DEVNULL)
    x = read_bin(data)
    n = len(x)
    c0 = x[np.sort(np.random.default_rng(0).choice(n, args.k, replace=False))].copy()
    init = work / f"small-k-init-{args.k}.txt"
    np.savetxt(init, c0, fmt="%.9g")
    builds = [("this", args.vocab)] + ([("before", args.before)] if args.before else [])
    rows = []
    for r in range(1, args.rounds + 1):
        f = faiss_run(x, c0, args.iterations)
        rows.append(dict(round=r, build="faiss", assignment="flat", isa="native", **f))
        print(f"round {r} faiss: {f['seconds']:.4f} s/iteration")
        for build, binary in builds:
            for prune in (False, True):
                for cap in (None, "avx2"):
                    v = run_vocab(binary, data, init, args.k, args.iterations, work, prune, cap,
                                  build == "before")
                    row = dict(round=r, build=build, assignment="int8 pruned" if prune else "int8 full",
                               isa=cap or "native", **v)
                    row["vs_faiss"] = v["seconds"] / f["seconds"]
                    rows.append(row)
                    print(f"round {r} {build} {row['assignment']} {row['isa']}: {v['seconds']:.4f} s/iteration "
                          f"({row['vs_faiss']:.2f}x faiss), first {v['first']:.3f}, inertia {v['inertia']:.9e}")
    fields = ["round", "build", "assignment", "isa", "ran", "seconds", "first", "later", "vs_faiss", "inertia",
              "md5"]
    with open(HERE / f"{args.name}.csv", "w", newline="") as out:
        w = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for row in rows:
            w.writerow({key: (round(v, 4) if isinstance(v, float) and key != "inertia" else v)
                        for key, v in row.items()})
    lines = [f"{data.name}: n = {n}, d = {x.shape[1]}, k = {args.k}, {args.iterations} iterations, "
             f"{args.rounds} rounds; median over rounds",
             "",
             "| build | assignment | isa | iterations run | s/iteration | iteration 1 s | later iterations s "
             "| vs faiss (same round) |",
             "|---|---|---|---|---|---|---|---|"]
    keys = []
    for row in rows:
        key = (row["build"], row["assignment"], row["isa"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        group = [row for row in rows if (row["build"], row["assignment"], row["isa"]) == key]
        med = {f: statistics.median(row[f] for row in group) for f in ("seconds", "first")}
        later = statistics.median(row.get("later", row["seconds"]) for row in group)
        ratio = statistics.median(row["vs_faiss"] for row in group) if key[0] != "faiss" else 1.0
        ran = statistics.median(row["ran"] for row in group)
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {ran:g} | {med['seconds']:.4f} | {med['first']:.3f} | "
                     f"{later:.4f} | {ratio:.2f}x |")
    same = all(len({row["md5"] for row in rows if row["round"] == r and "md5" in row}) == 1
               for r in range(1, args.rounds + 1))
    lines += ["", f"Every vocab run of a round wrote the same vocabulary bytes: {'yes' if same else 'NO'}."]
    (HERE / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.profile:
        profile(args.vocab, data, init, args.k, work, HERE / f"{args.name}-profile.txt")


def profile(vocab, data, init, k, work, out):
    """`perf record` of 30 iterations of the AVX2 int8 full pass; the shares above 0.5% to `out`."""
    record = work / "small-k-perf.data"
    env = dict(os.environ, VOCAB_MAX_ISA="avx2")
    subprocess.run(["perf", "record", "-o", str(record), "--quiet", "--", vocab, "--quiet", "--threads", "2",
                    "kmeans", "--features", str(data), "--k", str(k), "--iterations", "30", "--tol", "0",
                    "--init-centroids", str(init), "--kernel", "int8", "--prune", "false",
                    "--out", str(work / "small-k-profile.bin")],
                   check=True, stdout=subprocess.DEVNULL, env=env)
    report = subprocess.run(["perf", "report", "-i", str(record), "--no-children", "--stdio"],
                            check=True, capture_output=True, text=True).stdout
    lines = [f"# perf record, 30 iterations of vocab kmeans --kernel int8 (VOCAB_MAX_ISA=avx2), k = {k:,},",
             f"# {data.name}, 2 threads; the data's load (crc32) included. Functions above 0.5%:"]
    for line in report.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0].endswith("%") and float(fields[0][:-1]) >= 0.5:
            lines.append(f"{fields[0]} {fields[4]}")
    out.write_text("\n".join(lines) + "\n")
    record.unlink()


if __name__ == "__main__":
    main()
