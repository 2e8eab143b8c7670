#!/usr/bin/env bash
# Fisher-vector encoding throughput, this build against an earlier commit's, side by side in one
# run: the development set's 1,500 photos encoded over one mixture (128 Gaussians in 64 principal
# components, learned here from 50 random patches of each photo), a 2-level pyramid, at strides 4
# and 8, each side REPEAT times in turn (best time kept). Both sides must write the same bytes.
# Writes fisher.csv and fisher.md beside this script.
# usage: BASELINE=<commit> eval/encode_bench/fisher.sh [photos dir]   (REPEAT, default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=$(realpath "${1:-$root/../shared/datasets/scene15-train}")
: "${BASELINE:?set BASELINE to the commit to compare with}"
repeat=${REPEAT:-2}
(cd "$root" && cargo build --release --quiet)
base=/tmp/vocab-baseline-$BASELINE
[ -d "$base" ] || git -C "$root" worktree add --detach "$base" "$BASELINE"
(cd "$base" && cargo build --release --quiet)
declare -A side=([vocab]="$root/target/release/vocab" ["vocab-$BASELINE"]="$base/target/release/vocab")
work="$here/work/fisher"; mkdir -p "$work"
vocab="${side[vocab]}"
[ -f "$work/sample.bin" ] || "$vocab" --quiet features --input "$photos" --per-image 50 --seed 1 \
  --out "$work/sample.bin" > /dev/null
[ -f "$work/gmm.json" ] || "$vocab" --quiet mixture --features "$work/sample.bin" --components 128 \
  --pca-dims 64 --seed 1 --out "$work/gmm.json" > /dev/null
csv="$here/fisher.csv"
echo "side,stride,photos,seconds,photos_per_s" > "$csv"
for stride in 4 8; do
  best=()
  for name in vocab "vocab-$BASELINE"; do best+=("$name=inf"); done
  for _ in $(seq "$repeat"); do
    for name in vocab "vocab-$BASELINE"; do
      out="$work/$name-s$stride.bin"
      start=$(date +%s.%N)
      "${side[$name]}" --quiet encode --vocabulary "$work/gmm.json" --input "$photos" \
        --method fisher --pyramid 2 --stride "$stride" --out "$out" > /dev/null
      echo "$name $(echo "$(date +%s.%N) - $start" | bc)" >> "$work/times-s$stride.txt"
    done
  done
  cmp "$work/vocab-s$stride.bin" "$work/vocab-$BASELINE-s$stride.bin"
  n=$(($(wc -l < "$work/vocab-s$stride.bin.images.csv") - 1))
  for name in vocab "vocab-$BASELINE"; do
    secs=$(awk -v n="$name" '$1 == n {print $2}' "$work/times-s$stride.txt" | sort -g | head -1)
    echo "$name,$stride,$n,$secs,$(echo "scale=1; $n / $secs" | bc)" >> "$csv"
  done
  rm -f "$work/times-s$stride.txt"
done
cpu=$(lscpu | sed -n 's/^Model name: *//p')
isa=$(lscpu | sed -n 's/^Flags: *//p' | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512bw|avx512_vnni' | paste -sd, -)
python3 - "$csv" "$BASELINE" "$cpu" "$(nproc)" "$isa" > "$here/fisher.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
base = f"vocab-{sys.argv[2]}"
print(f"Fisher-vector encode, {sys.argv[3]}, {sys.argv[4]} cores ({sys.argv[5]}); best of the runs; "
      "both sides wrote the same bytes.\n")
print(f"| stride | photos | vocab s | {base} s | vocab photos/s | {base} photos/s | speed-up |")
print("|---|---|---|---|---|---|---|")
for stride in sorted({r["stride"] for r in rows}, key=int):
    a = next(r for r in rows if r["stride"] == stride and r["side"] == "vocab")
    b = next(r for r in rows if r["stride"] == stride and r["side"] == base)
    print(f"| {stride} | {a['photos']} | {float(a['seconds']):.2f} | {float(b['seconds']):.2f} | "
          f"{a['photos_per_s']} | {b['photos_per_s']} | {float(b['seconds']) / float(a['seconds']):.2f}x |")
PY
cat "$here/fisher.md"
