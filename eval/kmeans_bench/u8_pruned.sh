#!/usr/bin/env bash
# The pruned int8 run on u8 partitions (issue 51, items 2 and 3): u8 rows whose bytes fit are
# their own codes, and a unit whose every label the bounds prove is read as its codes and not
# decoded. BEFORE (default cc8c56c, which quantised the decoded values and decoded every unit,
# built in a worktree) against this build, ROUNDS alternating rounds (default 2), at the CPU's
# widest build and capped to AVX2: `vocab kmeans --kernel int8` (pruned by default), k = 1,024,
# 20 iterations from one random start, on 750,000 random HOG patches of scene15-train (500 a
# photo, seed 2) held as 8 u8 partitions (made once into work/hog750k-u8/).
# Writes u8-pruned.csv (one row per run and iteration: seconds, kept vectors) and
# u8-pruned-machine.txt; the table in README.md.
# usage: eval/kmeans_bench/u8_pruned.sh [photos dir]   (env BEFORE, ROUNDS)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=${1:-$root/../shared/datasets/scene15-train}
before=${BEFORE:-cc8c56c}
rounds=${ROUNDS:-2}
(cd "$root" && cargo build --release --quiet)
vocab=$root/target/release/vocab
old_tree=/tmp/vocab-before-$before
if [ ! -x "$old_tree/target/release/vocab" ]; then
  rm -rf "$old_tree"
  git -C "$root" worktree add --force --detach "$old_tree" "$before" >/dev/null
  (cd "$old_tree" && cargo build --release --quiet)
fi
old=$old_tree/target/release/vocab
work=$here/work
parts=$work/hog750k-u8
mkdir -p "$work"
if [ ! -f "$parts/manifest.toml" ]; then
  "$vocab" features --input "$photos" --mode random --per-image 500 --seed 2 \
    --out "$work/hog750k.bin" --quiet
  "$vocab" partition --features "$work/hog750k.bin" --parts 8 --element u8 --out "$parts" --quiet
  rm -f "$work/hog750k.bin"
fi
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/u8-pruned-machine.txt"
out=$here/u8-pruned.csv
echo "build,isa,round,iteration,seconds,kept" >"$out"
for round in $(seq "$rounds"); do
  for isa in native avx2; do
    for build in before this; do
      bin=$vocab
      [ "$build" = before ] && bin=$old
      cap=()
      [ "$isa" = avx2 ] && cap=(VOCAB_MAX_ISA=avx2)
      env "${cap[@]}" "$bin" kmeans --features "$parts" --k 1024 --iterations 20 --tol 0 \
        --init random --kernel int8 --out "$work/u8-pruned.bin" --quiet >/dev/null
      # The iterations CSV: iteration, inertia, seconds, ... and the kept count where written.
      awk -F, -v b="$build" -v i="$isa" -v r="$round" '
        NR == 1 { for (c = 1; c <= NF; c++) col[$c] = c; next }
        { printf "%s,%s,%s,%s,%s,%s\n", b, i, r, $col["iteration"], $col["seconds"], \
            ("kept" in col ? $col["kept"] : "") }' "$work/u8-pruned.bin.iterations.csv" >>"$out"
      rm -rf "$work/u8-pruned.bin" "$work/u8-pruned.bin.ckpt" "$work"/u8-pruned.bin.*
    done
  done
done
echo "wrote $out"
