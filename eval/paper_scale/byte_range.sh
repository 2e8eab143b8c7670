#!/usr/bin/env bash
# How many HOG rows keep their u8 bytes as the int8 kernel's codes (none above 127): 20 random
# patches of each scene15-train photo (30,000 x 512, seed 1), stored as u8 would store them
# (round(255 v)); the fraction of rows whose largest byte is at most each threshold, and the
# largest byte's percentiles. Output: results/byte-range.txt.
# usage: eval/paper_scale/byte_range.sh [photos dir]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=${1:-$root/../shared/datasets/scene15-train}
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
work=$here/work
mkdir -p "$work"
"$root/target/release/vocab" features --input "$photos" --per-image 20 --seed 1 \
  --out "$work/hog30k.bin" --quiet >/dev/null
"$python" - "$work/hog30k.bin" <<'PY' | tee "$here/results/byte-range.txt"
import sys
import numpy as np
# The feature file: a 32-byte header, then per record 8 bytes of ids and 512 f32 values.
raw = np.fromfile(sys.argv[1], dtype=np.uint8)[32:]
rows = raw.reshape(-1, 8 + 2048)[:, 8:].copy().view(np.float32)
top = np.round(rows * 255).astype(int).max(axis=1)
print(f"{len(rows)} HOG rows x {rows.shape[1]} dims")
for t in (100, 127, 150, 200, 255):
    print(f"largest byte at most {t}: {(top <= t).mean():.1%} of rows")
p5, p50, p95 = np.percentile(top, [5, 50, 95])
print(f"largest byte: 5th percentile {p5:.0f}, median {p50:.0f}, 95th {p95:.0f}")
PY
rm -f "$work"/hog30k.bin*
