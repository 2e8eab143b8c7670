#!/usr/bin/env bash
# Spatial Fisher vectors (issue 53, lever 1): does a descriptor's place help? vocab's dense HOG
# (40 px patches every 8 px) handed to vocab as descriptors made elsewhere (make_hog_xy.py), once
# as it is and once with its normalised x, y appended (weight W), through the 5-fold CV of
# eval/accuracy (folds.py: stratified by class, seed 1). Per fold: 125 random rows of each
# training photo, 64 Gaussians over 64 principal components, every photo's Fisher vector
# (2-level pyramid), a linear SVM on the 15 classes (C by an inner 5-fold CV), scored on the
# held-out fold. The two arms differ only in the two appended values.
# usage: eval/spatial/cv.sh [photos dir]   (WEIGHTS="0 1" by default; FOLDS to narrow)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/eval/accuracy/scored.sh"
photos=$(realpath "${1:-$root/../shared/datasets/scene15-train}")
work="$here/work"; mkdir -p "$work"
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
python=$("$root/eval/setup-venv.sh")
seed=1 per_image=125 folds=5
dense="$work/dense-s8.bin"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
results="$here/cv.csv" timings="$here/cv-timings.csv"
[ -f "$results" ] || echo "fold,weight,attribute,accuracy,balanced_accuracy,held_out,c" > "$results"
[ -f "$timings" ] || echo "fold,weight,stage,seconds" > "$timings"
if [ ! -f "$dense" ]; then
  s=$(t0)
  "$vocab" --quiet features --input "$photos" --mode dense --stride 8 --out "$dense" > /dev/null
  echo "-,-,dense-hog,$(dt "$s")" >> "$timings"
fi
python3 "$root/eval/accuracy/folds.py" "$photos/labels.csv" "$work" "$seed" "$folds"
for w in ${WEIGHTS:-0 1}; do
  desc="$work/hog-xy-$w"
  if [ ! -d "$desc" ]; then
    s=$(t0)
    "$python" "$here/make_hog_xy.py" "$dense" "$desc" --weight "$w"
    echo "-,$w,files,$(dt "$s")" >> "$timings"
  fi
  for f in ${FOLDS:-$(seq 0 $((folds - 1)))}; do
    grep -q "^$f,$w,class," "$results" && continue
    sample="$work/sample-$w-$f.bin" gmm="$work/g64x64-$w-$f.json" hist="$work/hist-$w-$f.bin"
    s=$(t0)
    "$vocab" --quiet features --input "$photos" --labels "$work/train-$f.csv" --from "$desc" \
      --out "$sample" --per-image $per_image --seed $seed > /dev/null
    "$vocab" --quiet mixture --features "$sample" --components 64 --pca-dims 64 --seed $seed \
      --out "$gmm" > /dev/null
    echo "$f,$w,dictionary,$(dt "$s")" >> "$timings"
    s=$(t0)
    "$vocab" --quiet encode --vocabulary "$gmm" --input "$photos" --from "$desc" --method fisher \
      --pyramid 2 --out "$hist" > /dev/null
    echo "$f,$w,encode,$(dt "$s")" >> "$timings"
    s=$(t0)
    model="$work/model-$w-$f.json"
    "$vocab" --quiet train --histograms "$hist" --labels "$photos/labels.csv" --attribute class \
      --split "$work/split-$f.csv" --cv 5 --out "$model" > /dev/null
    out=$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$photos/labels.csv" --held-out)
    row=$(scored "$out")
    echo "$f,$w,class,$row" >> "$results"
    echo "$f,$w,svm,$(dt "$s")" >> "$timings"
    echo "fold $f weight $w: ${row%%,*}" >&2
    rm -f "$hist"
  done
done
python3 - "$results" <<'PY' > "$here/cv-summary.csv"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("weight,folds,class_mean,class_sd")
for w in sorted({r["weight"] for r in rows}, key=float):
    a = [float(r["accuracy"]) for r in rows if r["weight"] == w]
    print(f"{w},{len(a)},{statistics.mean(a):.4f},{statistics.stdev(a) if len(a) > 1 else 0:.4f}")
PY
cat "$here/cv-summary.csv"
