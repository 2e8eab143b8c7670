#!/usr/bin/env bash
# Pruned (Yinyang) against full-pass k-means, same data, seed and thread count, alternating
# (full, pruned, full, pruned: ROUNDS rounds) on each data set so that the VM's drifting speed
# hits both alike; writes pruning.csv (one row per iteration and round) and pruning.md (medians)
# beside this script.
# usage: eval/kmeans_bench/pruning.sh [ITERATIONS] [ROUNDS]
#   env: HOG_K (default 1024), SYNTH=0 to skip the synthetic set, OUT (basename, default pruning)
#   data: the synthetic set of the main benchmark (200,000 x 512, k = 4,096; made if missing) and
#   real HOG, 150,000 random patches of scene15-train (k = 1,024; eval/accuracy/work/sample.bin,
#   made by eval/accuracy/run.sh), if present.
set -euo pipefail
source "$(dirname "$0")/data.sh"
iterations=${1:-12}
rounds=${2:-2}
sets=()
[ "${SYNTH:-1}" = 0 ] || sets+=("synth,$synth,4096")
[ -f "$hog" ] && sets+=("hog,$hog,${HOG_K:-1024}")
base=${OUT:-pruning}
out=$here/$base.csv
tmp=$(mktemp "$out.XXXX")
trap 'rm -f "$tmp"' EXIT
echo "data,k,round,mode,iteration,inertia,seconds,kept" >"$tmp"
for set in "${sets[@]}"; do
  IFS=, read -r name file k <<<"$set"
  for round in $(seq "$rounds"); do for mode in full pruned; do
    flag=()
    [ "$mode" = pruned ] && flag=(--prune)
    vocabulary=$work/prune-$name-$mode.bin
    "$vocab" kmeans --features "$file" --k "$k" --iterations "$iterations" --tol 0 --seed 1 \
      --threads 2 --quiet "${flag[@]}" --out "$vocabulary" >/dev/null
    tail -n +2 "$vocabulary.iterations.csv" |
      awk -F, -v n="$name" -v k="$k" -v r="$round" -v m="$mode" \
        '{ print n "," k "," r "," m "," $1 "," $2 "," $3 "," ($5 == "" ? 0 : $5) }' >>"$tmp"
  done; done
  if cmp -s "$work/prune-$name-full.bin" "$work/prune-$name-pruned.bin"; then
    echo "$name: vocabularies byte-identical"
  else
    echo "$name: vocabularies differ"
  fi
done
mv "$tmp" "$out"
trap - EXIT
python3 "$here/pruning_summary.py" "$out" "$here/$base.md" "$(nproc)"
echo "wrote $out and $here/$base.md"
