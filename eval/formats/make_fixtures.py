#!/usr/bin/env python3
"""Fixtures for vocab's readers of other tools' formats, written by numpy, and the check that
numpy reads back what vocab writes.

usage: eval/formats/make_fixtures.py [--vocab target/release/vocab]

Writes eval/formats/fixtures/ (committed; tests/cli/formats.rs reads them):
  f32.npy, f32_fortran.npy, f64.npy, u8.npy   a 5 x 6 array (np.save), C or Fortran order
  vectors.fvecs, vectors.bvecs                the f32 and u8 arrays, faiss's layout
  header.csv, plain.csv, records.csv          comma-separated, with and without a header,
                                              and with picture_id,row,col columns
  one_d.npy, int32.npy, big_endian.npy        what vocab refuses
The values are exact in float32 (multiples of 1/8), so a test recomputes them:
  f32[i, j] = ((7 i + 3 j) mod 11) / 8 - 1/2;  f64 = f32 + 1/10;  u8[i, j] = (7 i + 3 j) mod 256 * 9 mod 256.

With --vocab, every fixture goes through `vocab convert` to .npy, .fvecs, .bvecs (u8 only) and
.csv, numpy loads each result, and eval/formats/roundtrip.md records that it equals the array
(bit for bit; float64 as float32).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")


def arrays():
    i, j = np.meshgrid(np.arange(5), np.arange(6), indexing="ij")
    f32 = (((7 * i + 3 * j) % 11) / 8 - 0.5).astype(np.float32)
    f64 = f32.astype(np.float64) + 0.1
    u8 = ((7 * i + 3 * j) % 256 * 9 % 256).astype(np.uint8)
    return f32, f64, u8


def vecs(path, a, dtype):
    """faiss's .fvecs / .bvecs: per row, the dimension as int32, then the values."""
    n, d = a.shape
    with open(path, "wb") as f:
        for row in a:
            f.write(np.int32(d).tobytes())
            f.write(row.astype(dtype).tobytes())


def write_fixtures():
    os.makedirs(OUT, exist_ok=True)
    f32, f64, u8 = arrays()
    np.save(os.path.join(OUT, "f32.npy"), f32)
    np.save(os.path.join(OUT, "f32_fortran.npy"), np.asfortranarray(f32))
    np.save(os.path.join(OUT, "f64.npy"), f64)
    np.save(os.path.join(OUT, "u8.npy"), u8)
    vecs(os.path.join(OUT, "vectors.fvecs"), f32, np.float32)
    vecs(os.path.join(OUT, "vectors.bvecs"), u8, np.uint8)
    names = ",".join(f"feature_{k}" for k in range(6))
    np.savetxt(os.path.join(OUT, "header.csv"), f32, delimiter=",", header=names,
               comments="", fmt="%.9g")
    np.savetxt(os.path.join(OUT, "plain.csv"), f32, delimiter=",", fmt="%.9g")
    ids = np.stack([np.arange(5) + 10, np.arange(5) * 8, np.arange(5) * 16], axis=1)
    records = np.concatenate([ids.astype(np.float64), f32.astype(np.float64)], axis=1)
    fmt = ["%d"] * 3 + ["%.9g"] * 6
    header = "picture_id,row,col," + names
    np.savetxt(os.path.join(OUT, "records.csv"), records, delimiter=",", header=header,
               comments="", fmt=fmt)
    np.save(os.path.join(OUT, "one_d.npy"), f32[0])
    np.save(os.path.join(OUT, "int32.npy"), u8.astype(np.int32))
    np.save(os.path.join(OUT, "big_endian.npy"), f32.astype(">f4"))
    print(f"wrote fixtures in {OUT}")


def load(path):
    if path.endswith(".npy"):
        return np.load(path)
    if path.endswith(".fvecs") or path.endswith(".bvecs"):
        raw = np.fromfile(path, dtype=np.uint8)
        d = int(raw[:4].view(np.int32)[0])
        elem = 4 if path.endswith(".fvecs") else 1
        rows = raw.reshape(-1, 4 + d * elem)[:, 4:]
        return rows.copy().view(np.float32) if elem == 4 else rows.astype(np.float32)
    if path.endswith(".csv"):
        return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    raise ValueError(path)


def round_trip(vocab):
    f32, f64, u8 = arrays()
    expected = {"f32.npy": f32, "f32_fortran.npy": f32, "f64.npy": f64.astype(np.float32),
                "u8.npy": u8.astype(np.float32), "vectors.fvecs": f32,
                "vectors.bvecs": u8.astype(np.float32), "header.csv": f32, "plain.csv": f32,
                "records.csv": f32}
    lines = ["# numpy reads back what vocab writes", "",
             "`eval/formats/make_fixtures.py --vocab target/release/vocab`: each numpy fixture "
             "converted by `vocab convert --input FIXTURE --out OUT` and loaded by numpy "
             f"{np.__version__}.", "",
             "| fixture | out | equal, bit for bit |", "|---|---|---|"]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, want in expected.items():
            outs = ["npy", "fvecs", "csv"] + (["bvecs"] if name.startswith(("u8", "vectors.b")) else [])
            for ext in outs:
                out = os.path.join(tmp, f"{name}.{ext}")
                subprocess.run([vocab, "convert", "--input", os.path.join(OUT, name), "--out", out],
                               check=True, capture_output=True)
                got = load(out)
                if ext == "csv":
                    # Feature records keep picture_id,row,col as their first columns.
                    got = got[:, 3:]
                ok = got.dtype == np.float32 and got.shape == want.shape and \
                    np.array_equal(got.view(np.uint32), want.view(np.uint32))
                failed += not ok
                lines.append(f"| {name} | .{ext} | {'yes' if ok else 'NO'} |")
        # vocab's .npy of float32 is numpy's own file but for the header's text: numpy ends the
        # dict with ", }", ndarray-npy with "}" (both pad the header to 128 bytes here).
        out = os.path.join(tmp, "same.npy")
        subprocess.run([vocab, "convert", "--input", os.path.join(OUT, "vectors.fvecs"),
                        "--out", out], check=True, capture_output=True)
        ours, theirs = open(out, "rb").read(), open(os.path.join(OUT, "f32.npy"), "rb").read()
        same = len(ours) == len(theirs) and ours[128:] == theirs[128:] and \
            ours[:128].replace(b"), }", b")}  ") == theirs[:128].replace(b"), }", b")}  ")
        failed += not same
        lines += ["", "vocab's `.npy` of the fvecs fixture equals numpy's `f32.npy` byte for byte "
                  "but for the header dict's closing (`, }` from numpy, `}` from ndarray-npy): "
                  f"{'yes' if same else 'NO'}.", ""]
    with open(os.path.join(HERE, "roundtrip.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return failed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", help="a vocab binary: also check numpy reads what it writes")
    args = parser.parse_args()
    write_fixtures()
    if args.vocab and round_trip(args.vocab):
        sys.exit("some round trips differ")


if __name__ == "__main__":
    main()
