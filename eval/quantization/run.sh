#!/usr/bin/env bash
# u8 vs f32 partition storage on real HOG: value error, and the inertia (on the f32 data) of
# vocabularies built from each. Writes results.csv and results.md beside this script.
# usage: eval/quantization/run.sh [photos dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=${1:-$root/../shared/datasets/scene15-train}
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
work="$here/work"; mkdir -p "$work"
"$vocab" --quiet features --input "$photos" --out "$work/f.bin" --per-image 100 --seed 2 >/dev/null
for e in f32 u8; do
  "$vocab" partition --features "$work/f.bin" --parts 8 --element $e --out "$work/parts-$e" >/dev/null
  "$vocab" --quiet kmeans --features "$work/parts-$e" --k 1024 --iterations 12 --tol 0 --seed 1 \
    --out "$work/vocab-$e.bin" > "$work/train-$e.log"
  # Inertia of that vocabulary on the f32 data: one assignment pass from it.
  "$vocab" --quiet kmeans --features "$work/parts-f32" --k 1024 --iterations 1 --tol 0 \
    --init-centroids "$work/vocab-$e.bin" --out "$work/eval-$e.bin" > "$work/eval-$e.log"
done
"$python" - "$work" "$here" <<'PY'
import sys, pathlib, numpy as np
work, here = map(pathlib.Path, sys.argv[1:])
def records(path):
    raw = np.fromfile(path, dtype=np.uint8)
    dims, count, elem = int(raw[12:16].view("<u4")[0]), int(raw[16:24].view("<u8")[0]), raw[10]
    size = 4 if elem == 1 else 1
    rec = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4" if size == 4 else "u1", (dims,))])
    v = raw[32:].view(rec)["v"][:count]
    return v.astype(np.float32) / (1 if size == 4 else 255)
x = records(work / "f.bin")
q = np.concatenate([records(p) for p in sorted((work / "parts-u8").glob("part-*.bin"))])
err = np.abs(q - x)
def inertia(log):
    return float([l for l in open(log) if l.startswith("iter 1 ")][0].split()[3])
f32_i, u8_i = inertia(work / "eval-f32.log"), inertia(work / "eval-u8.log")
size = lambda d: sum(p.stat().st_size for p in (work / d).glob("part-*.bin"))
rows = [("vectors", f"{x.shape[0]} x {x.shape[1]}"), ("value range", f"[{x.min():.3g}, {x.max():.3g}]"),
        ("max abs error", f"{err.max():.3e}"), ("RMS error", f"{np.sqrt((err ** 2).mean()):.3e}"),
        ("partition bytes f32", str(size("parts-f32"))), ("partition bytes u8", str(size("parts-u8"))),
        ("inertia on f32 data, vocabulary from f32", f"{f32_i:.6e}"),
        ("inertia on f32 data, vocabulary from u8", f"{u8_i:.6e}"),
        ("relative inertia change", f"{(u8_i - f32_i) / f32_i:+.3e}")]
(here / "results.csv").write_text("metric,value\n" + "".join(f"{k},{v}\n" for k, v in rows))
(here / "results.md").write_text("| metric | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in rows))
print((here / "results.md").read_text())
PY
