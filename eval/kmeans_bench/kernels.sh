#!/usr/bin/env bash
# The f32 and int8 full-pass kernels side by side (alternating: f32, int8, f32, int8 ... for
# ROUNDS rounds, so the VM's drifting speed hits both alike) on the synthetic set of the main
# benchmark (k = 4,096) and on real HOG (150,000 patches of scene15-train, k = 1,024 and 4,096);
# writes kernels.csv (one row per iteration and round) and kernels.md (medians, and whether the
# two kernels' vocabularies are byte-identical) beside this script.
# usage: eval/kmeans_bench/kernels.sh [ITERATIONS] [ROUNDS]
#   env: SYNTH_KS (k values on the synthetic set, default 4096), HOG=0 to skip HOG, OUT
#   (basename, default kernels)
#   data: as pruning.sh (the synthetic set is made if missing; HOG needs eval/accuracy/run.sh).
set -euo pipefail
source "$(dirname "$0")/data.sh"
iterations=${1:-4}
rounds=${2:-2}
sets=()
for k in ${SYNTH_KS:-4096}; do sets+=("synth,$synth,$k"); done
[ "${HOG:-1}" = 0 ] || [ ! -f "$hog" ] || sets+=("hog,$hog,1024" "hog,$hog,4096")
base=${OUT:-kernels}
out=$here/$base.csv
tmp=$(mktemp "$out.XXXX")
identical=$(mktemp)
trap 'rm -f "$tmp" "$identical"' EXIT
echo "data,n,k,round,kernel,iteration,inertia,seconds" >"$tmp"
for set in "${sets[@]}"; do
  IFS=, read -r name file k <<<"$set"
  for round in $(seq "$rounds"); do for kernel in f32 int8; do
    vocabulary=$work/kernel-$name-$k-$kernel.bin
    "$vocab" kmeans --features "$file" --k "$k" --iterations "$iterations" --tol 0 --seed 1 \
      --threads 2 --quiet --kernel "$kernel" --prune false --out "$vocabulary" >/dev/null
    n=$(sed -n 's/^n = //p' "$vocabulary.meta.toml")
    tail -n +2 "$vocabulary.iterations.csv" |
      awk -F, -v d="$name" -v n="${n:-0}" -v k="$k" -v r="$round" -v m="$kernel" \
        '{ print d "," n "," k "," r "," m "," $1 "," $2 "," $3 }' >>"$tmp"
  done; done
  if cmp -s "$work/kernel-$name-$k-f32.bin" "$work/kernel-$name-$k-int8.bin"; then
    echo "$name,$k,yes" >>"$identical"
  else
    echo "$name,$k,no" >>"$identical"
  fi
done
mv "$tmp" "$out"
python3 "$here/kernels_summary.py" "$out" "$identical" "$here/$base.md" "$(nproc)"
echo "wrote $out and $here/$base.md"
