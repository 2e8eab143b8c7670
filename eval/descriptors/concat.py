#!/usr/bin/env python3
"""Two encodings of the same photos side by side in one vector (early fusion, issue 53).

Each photo's row of A and of B (matched by the photo's path in the files' `.images.csv`; every
photo of A must be in B) becomes one row: A's values times wA, then B's times wB. vocab's Fisher
vectors each have unit L2 norm, so with wA^2 + wB^2 = 1 the joined vector does too (default
wA = wB = 1/sqrt 2, both halves weighing alike in the SVM). OUT takes A's ids, its side files
and its record; the record's `k` is raised to what the joined length needs (the encode record
knows Fisher vectors by K and D), so `vocab train` and `vocab evaluate` read OUT as they read A.

usage: concat.py A B OUT [WEIGHT_A]
"""
import csv
import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "accuracy"))
from feature_file import read, record, write  # noqa: E402


def paths(path):
    """id -> photo path, from the encoding's `.images.csv`."""
    with open(path + ".images.csv", newline="") as f:
        rows = list(csv.reader(f))
    head = rows[0]
    i, p = head.index("picture_id"), head.index("path")
    return {int(r[i]): r[p] for r in rows[1:]}


def main():
    a, b, out = sys.argv[1:4]
    wa = float(sys.argv[4]) if len(sys.argv) > 4 else math.sqrt(0.5)
    wb = math.sqrt(max(0.0, 1.0 - wa * wa))
    head_a, ra = read(a)
    _, rb = read(b)
    pa, pb = paths(a), paths(b)
    by_path = {pb[int(i)]: n for n, i in enumerate(rb["id"])}
    missing = [pa[int(i)] for i in ra["id"] if pa[int(i)] not in by_path]
    assert not missing, f"{b} has no row for {len(missing)} photos of {a}, e.g. {missing[0]}"
    order = np.array([by_path[pa[int(i)]] for i in ra["id"]], dtype=np.int64)
    da, db = ra["v"].shape[1], rb["v"].shape[1]
    dims = da + db
    rows = np.zeros(len(ra), dtype=record(dims))
    rows["id"], rows["row"], rows["col"] = ra["id"], ra["row"], ra["col"]
    rows["v"][:, :da] = ra["v"] * np.float32(wa)
    rows["v"][:, da:] = rb["v"][order] * np.float32(wb)
    write(out, head_a, rows)
    for side in (".images.csv", ".skipped.csv"):
        shutil.copyfile(a + side, out + side)
    with open(a + ".encoding.json") as f:
        rec = json.load(f)
    # A Fisher vector over K Gaussians is K * (its other factors) values: scale K to the join.
    k = rec.get("k")
    if isinstance(k, int) and da % k == 0 and dims % (da // k) == 0:
        rec["k"] = dims // (da // k)
    with open(out + ".encoding.json", "w") as f:
        json.dump(rec, f)
    print(f"concat.py: {len(rows)} photos, {da} + {db} values, weights {wa:.3f} {wb:.3f}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
