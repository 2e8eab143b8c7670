#!/usr/bin/env bash
# The fair anchor (issue 51, item 5): faiss's k-means with an approximate assignment index
# (IndexIVFFlat with vocab's lists and probes; IndexHNSWFlat, which faiss's documentation
# suggests for a million centroids) beside vocab's approximate k-means, at k = 262,144 on the
# dense HOG of every scene15-train photo (40 px patches every 8 px, f32), the same vectors and
# the same initial centroids (random rows, seed 1), one after another on the otherwise idle
# machine: vocab and faiss's IVF 2 iterations, HNSW 1. Results: anchor.csv (faiss's iterations), anchor-vocab.* (vocab's
# iterations CSV and meta with its recall check), machine.txt.
# usage: eval/million/anchor.sh [iterations]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
python=$("$root/eval/setup-venv.sh")
work="$here/work"; mkdir -p "$work" "$here/results/anchor"
out="$here/results/anchor"
iterations=${1:-2} k=262144
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$out/machine.txt"
[ -f "$work/hog-f32.bin" ] || "$vocab" --quiet features --input "$root/../shared/datasets/scene15-train" \
  --mode dense --stride 8 --out "$work/hog-f32.bin" > /dev/null
[ -f "$work/init-$k.npy" ] || "$python" - "$work/hog-f32.bin" "$work/init-$k.npy" "$k" <<'PY'
import sys
import numpy as np
sys.path.insert(0, sys.argv[0])
path, out, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
head = np.fromfile(path, dtype=np.uint8, count=32)
dims = int(np.frombuffer(head[12:16].tobytes(), dtype="<u4")[0])
record = np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])
rows = np.memmap(path, dtype=record, mode="r", offset=32)
pick = np.sort(np.random.default_rng(1).choice(len(rows), size=k, replace=False))
np.save(out, np.ascontiguousarray(rows["v"][pick], dtype=np.float32))
PY
/usr/bin/time -v "$vocab" --quiet kmeans --features "$work/hog-f32.bin" --k $k --iterations "$iterations" \
  --tol 0 --init-centroids "$work/init-$k.npy" --assign approx --lists 512 --probes 8 \
  --out "$work/anchor-vocab.bin" > "$out/vocab-log.txt" 2> "$out/vocab-time.txt"
cp "$work/anchor-vocab.bin.meta.toml" "$out/anchor-vocab.meta.toml"
cp "$work/anchor-vocab.bin.iterations.csv" "$out/anchor-vocab.iterations.csv"
# faiss IVF: the iterations; then its search over vocab's final vocabulary, the centroids vocab's
# own recall check searched. HNSW: one iteration (its graph is rebuilt each time: minutes).
/usr/bin/time -v "$python" "$here/anchor.py" "$work/hog-f32.bin" "$work/init-$k.npy" ivf \
  "$iterations" "$out/anchor-ivf.csv" --lists 512 --probes 8 2> "$out/faiss-ivf-time.txt"
/usr/bin/time -v "$python" "$here/anchor.py" "$work/hog-f32.bin" "$work/anchor-vocab.bin" ivf 0 \
  "$out/recall-ivf.csv" --lists 512 --probes 8 2> "$out/recall-ivf-time.txt"
/usr/bin/time -v "$python" "$here/anchor.py" "$work/hog-f32.bin" "$work/init-$k.npy" hnsw \
  "${HNSW_ITERATIONS:-1}" "$out/anchor-hnsw.csv" --ef 64 2> "$out/faiss-hnsw-time.txt"
cat "$out"/anchor-*.csv "$out"/recall-ivf.csv
