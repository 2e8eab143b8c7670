#!/usr/bin/env bash
# Where an int8 encode with the scene15 settings spends its time: `perf` over vocab encode of the
# scene15 photos (stride 8, soft 5, 3 levels, K = 1,024 from 50 random patches per photo, 3
# k-means iterations), self time per function. Writes profile.txt beside this script.
# usage: eval/encode_bench/profile.sh [photos dir]       (needs perf: apt-get install linux-perf)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=${1:-$root/../shared/datasets/scene15-train}
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$vocab" --quiet features --input "$photos" --labels "$photos/labels.csv" --out "$tmp/f.bin" \
  --per-image 50 --seed 1 > /dev/null
"$vocab" --quiet kmeans --features "$tmp/f.bin" --k 1024 --iterations 3 --seed 1 \
  --out "$tmp/vocab.bin" > /dev/null
perf record -q -o "$tmp/perf.data" "$vocab" --quiet encode --vocabulary "$tmp/vocab.bin" \
  --input "$photos" --labels "$photos/labels.csv" --out "$tmp/h.bin" --stride 8 --norm l1 \
  --soft 5 --pyramid 3 --kernel int8 > /dev/null 2>&1
{
  echo "# perf self time of vocab encode --kernel int8 --stride 8 --soft 5 --pyramid 3 (K = 1,024)"
  echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%F)"
  perf report -i "$tmp/perf.data" --no-children --sort symbol --stdio 2>/dev/null \
    | awk '/%/ && !/^#/ && n++ < 25 {printf "%8s  %s\n", $1, $3}'
} > "$here/profile.txt"
cat "$here/profile.txt"
