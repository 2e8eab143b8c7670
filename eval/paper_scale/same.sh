#!/usr/bin/env bash
# u8 partitions held as codes give the vocabularies of the build that widened them to f32 when
# loaded (before: c270dc4), byte for byte, on every assignment: 200 random HOG patches of each of
# 150 scene15-train photos (every 10th), 8 u8 partitions, k = 256, 4 iterations.
# usage: eval/paper_scale/same.sh BEFORE_BINARY [AFTER_BINARY]   -> results/same.csv
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
before=$1
after=${2:-$root/target/release/vocab}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
awk -F, 'NR == 1 || (NR - 2) % 10 == 0' "$root/../shared/datasets/scene15-train/labels.csv" >"$work/some.csv"
"$after" features --input "$root/../shared/datasets/scene15-train" --labels "$work/some.csv" \
  --per-image 200 --seed 2 --out "$work/f.bin" --quiet >/dev/null
"$after" partition --features "$work/f.bin" --parts 8 --element u8 --out "$work/parts" --quiet >/dev/null
echo "assignment,vectors,k,same_vocabulary,same_inertia" >"$here/results/same.csv"
for a in "" "--kernel int8" "--prune" "--prune --kernel int8" "--assign approx"; do
  for bin in before after; do
    # shellcheck disable=SC2086
    "${!bin}" kmeans --features "$work/parts" --k 256 --iterations 4 --tol 0 --seed 3 $a \
      --out "$work/$bin.bin" --quiet >/dev/null
  done
  inertia() { sed -n 's/^final_inertia = //p' "$work/$1.bin.meta.toml"; }
  name=$(echo "${a:---kernel f32}" | sed 's/--//g; s/ /-/g')
  echo "$name,$(sed -n 's/^n = //p' "$work/after.bin.meta.toml"),256,$(cmp -s "$work/before.bin" "$work/after.bin" && echo yes || echo no),$([ "$(inertia before)" = "$(inertia after)" ] && echo yes || echo no)" \
    | tee -a "$here/results/same.csv"
done
