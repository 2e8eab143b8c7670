"""The table of eval/distributed/photos.sh: seconds per stage on one machine and on 1, 2, 4
emulated nodes, speed-ups against 1 node, bytes moved, and whether every output file equals
the one-machine run's.

usage: python3 photos_report.py RESULTS_DIR NODES...
"""
import csv
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
counts = [int(n) for n in sys.argv[2:]]
labels = ["local"] + [f"n{n}" for n in counts]
STAGES = ["features", "partition", "kmeans", "encode", "svm"]


def seconds(label):
    by = {}
    with open(out / f"{label}-steps.csv") as f:
        for row in csv.DictReader(f):
            by[row["stage"]] = by.get(row["stage"], 0.0) + float(row["seconds"])
    return by


def moved(label):
    """MB moved by the photo stages, slowest node per stage, from the driver's log."""
    text = (out / f"{label}.log").read_text()
    mb = [float(m) for m in re.findall(r"; ([0-9.]+) MB moved", text)]
    nodes = re.findall(r"\(\d+ nodes\): (.*)", text)
    return mb, nodes


def files(label):
    rows = (out / f"files-{label}.txt").read_text().split("\n")
    return {line.split()[1]: line.split()[0] for line in rows if line.strip()}


base = seconds("local")
one = seconds("n1") if "n1" in labels else None
want = files("local")
print("| run | " + " | ".join(f"{s} s" for s in STAGES) + " | features speed-up | encode speed-up | MB moved (features, encode) | files equal to one machine |")
print("|---" * (len(STAGES) + 5) + "|")
for label in labels:
    s = seconds(label)
    cells = [f"{s.get(st, 0.0):.1f}" for st in STAGES]
    if label == "local" or one is None:
        up = ["", ""]
    else:
        up = [f"{one[st] / s[st]:.2f}x" for st in ("features", "encode")]
    mb, _ = moved(label)
    got = files(label)
    # Partitions born on the nodes: the sample stays there, every other file must be equal.
    kept = [k for k in want if k not in got and k.endswith("/sample.bin")]
    differ = sum(got.get(k) != v for k, v in want.items() if k not in kept)
    extra = sum(k not in want for k in got)
    same = "yes" if differ == 0 and extra == 0 else f"NO ({differ} differ, {extra} extra)"
    if kept:
        same += ", no sample at the driver"
    name = "one machine (2 cores)" if label == "local" else f"{label[1:]} node(s)"
    print(f"| {name} | " + " | ".join(cells) + f" | {' | '.join(up)} | {', '.join(f'{m:.1f}' for m in mb) or '-'} | {same} ({len(got)} files) |")
print()
for label in labels[1:]:
    _, nodes = moved(label)
    for stage, line in zip(["features", "encode"], nodes):
        print(f"- {label[1:]} node(s), {stage}: {line}")
