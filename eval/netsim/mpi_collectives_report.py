"""Markdown table from mpi_collectives.sh's CSV: median seconds per collective and, on the shaped
network, seconds / link bound (broadcast: bytes / link rate; stage 2: (w - 1) / w x bytes /
link rate, what each rank must send and receive over its own link).

usage: python3 eval/netsim/mpi_collectives_report.py CSV LINK_MBIT
"""
import csv
import statistics
import subprocess
import sys
from collections import defaultdict

path, link_mbit = sys.argv[1], float(sys.argv[2])
runs = defaultdict(list)
for row in csv.DictReader(open(path)):
    key = (row["label"], int(row["ranks"]), int(row["bytes"]), row["collective"], row["implementation"])
    runs[key].append(float(row["seconds"]))


def median(label, ranks, size, collective, implementation):
    xs = runs.get((label, ranks, size, collective, implementation))
    return statistics.median(xs) if xs else None


def bound(label, ranks, size, collective):
    if not label.startswith("netns"):
        return None
    rate = link_mbit * 1e6 / 8
    return size / rate if collective == "broadcast" else (ranks - 1) / ranks * size / rate


def cell(label, ranks, size, collective, implementation):
    s = median(label, ranks, size, collective, implementation)
    if s is None:
        return "-"
    b = bound(label, ranks, size, collective)
    return f"{s:.3f}" + (f" ({s / b:.2f}x)" if b else "")


cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
flags = next((l.split(":", 1)[1].split() for l in cpu.splitlines() if l.startswith("Flags")), [])
isa = " ".join(f for f in flags if f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"))
networks = sorted({k[0].rsplit("-", 1)[0] if k[0].endswith("-default") else k[0].rsplit("-ompi-pipeline", 1)[0] for k in runs})
print("# vocab's collectives against MPI's own (one MPI job per row)")
print()
version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()
print(f"Machine: {model}, 2 cores ({isa}); {version[0] if version else 'mpirun: unknown version'}.")
print("Command: `eval/netsim/mpi_collectives.sh` (results in `collectives.csv`, this table by")
print("`mpi_collectives_report.py`). Median seconds of the timed runs (barrier to barrier);")
print(f"on the shaped network ({link_mbit:.0f} Mbit/s per node link) in brackets: seconds / link bound.")
print()
for net in networks:
    sizes = sorted({k[2] for k in runs if k[0].startswith(net)})
    for size in sizes:
        print(f"## {net}, {size / 2**20:.0f} MiB")
        print()
        print("| ranks | vocab chain | MPI_Bcast (default) | MPI_Bcast (tuned pipeline) | chain / default | vocab stage 2 | MPI_Reduce_scatter_block | MPI_Allreduce | stage 2 / RSB |")
        print("|---|---|---|---|---|---|---|---|---|")
        for ranks in sorted({k[1] for k in runs if k[0].startswith(net) and k[2] == size}):
            d, p = f"{net}-default", f"{net}-ompi-pipeline"
            chain = median(d, ranks, size, "broadcast", "vocab-chain")
            bcast = median(d, ranks, size, "broadcast", "MPI_Bcast")
            ours = median(d, ranks, size, "stage2", "vocab-ranges")
            rsb = median(d, ranks, size, "stage2", "MPI_Reduce_scatter_block")
            ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
            print(
                f"| {ranks} | {cell(d, ranks, size, 'broadcast', 'vocab-chain')} "
                f"| {cell(d, ranks, size, 'broadcast', 'MPI_Bcast')} "
                f"| {cell(p, ranks, size, 'broadcast', 'MPI_Bcast')} | {ratio(chain, bcast)} "
                f"| {cell(d, ranks, size, 'stage2', 'vocab-ranges')} "
                f"| {cell(d, ranks, size, 'stage2', 'MPI_Reduce_scatter_block')} "
                f"| {cell(d, ranks, size, 'stage2', 'MPI_Allreduce')} | {ratio(ours, rsb)} |"
            )
        print()
