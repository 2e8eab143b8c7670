#!/usr/bin/env bash
# Accuracy levers on the 15 scenes (issue 17), by the 5-fold cross-validation of cv.sh: per fold
# one vocabulary (K words from 125 random patches of each training photo, 10 iterations), then
# each variant encodes every photo its way and trains a linear SVM (C by an inner 5-fold CV on
# the training folds) and scores the held-out fold.
# usage: eval/accuracy/levers.sh [photos dir]      (K: $K, default 1024; variants: $VARIANTS,
#        default all; ATTRIBUTES, default "class"; FOLDS, default "0 1 2 3 4")
# Results already in levers$TAG.csv (same fold, K, variant, attribute) are not run again, so an
# interrupted run resumes.
# writes levers$TAG.csv (per fold and variant) and levers$TAG-timings.csv; levers_report.py
# makes the table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/scored.sh"
photos=${1:-$root/../shared/datasets/scene15-train}
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
tag=${TAG:-} k=${K:-1024} attributes=${ATTRIBUTES:-class}
work="$here/work/levers$tag"; mkdir -p "$work"
seed=1 per_image=125 iterations=10 folds=5
# name | encode flags | train flags
all_variants="
baseline|--stride 16 --norm hellinger --pyramid 2|
pyramid3|--stride 16 --norm hellinger --pyramid 3|
chi2|--stride 16 --norm l1 --pyramid 2|--kernel-map chi2
intersection|--stride 16 --norm l1 --pyramid 2|--kernel-map intersection
chi2-pyramid3|--stride 16 --norm l1 --pyramid 3|--kernel-map chi2
stride8|--stride 8 --norm hellinger --pyramid 2|
stride8-chi2-pyramid3|--stride 8 --norm l1 --pyramid 3|--kernel-map chi2
stride8-soft|--stride 8 --norm hellinger --pyramid 2 --soft 5|
stride8-soft-chi2-pyramid3|--stride 8 --norm l1 --pyramid 3 --soft 5|--kernel-map chi2
stride8-soft-chi2-pyramid3-int8|--stride 8 --norm l1 --pyramid 3 --soft 5 --kernel int8|--kernel-map chi2
stride8-soft-chi2-pyramid3-scales|--stride 8 --norm l1 --pyramid 3 --soft 5 --kernel int8 --scales 40,64|--kernel-map chi2
stride4|--stride 4 --norm hellinger --pyramid 2|
stride4-chi2-pyramid3|--stride 4 --norm l1 --pyramid 3|--kernel-map chi2
"
want=${VARIANTS:-$(echo "$all_variants" | cut -d'|' -f1 | xargs)}
# The folds of cv.sh (stratified by class, seed 1).
python3 "$here/folds.py" "$photos/labels.csv" "$work" "$seed" "$folds"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
results="$here/levers$tag.csv" timings="$here/levers$tag-timings.csv"
[ -f "$results" ] || echo "fold,k,variant,attribute,accuracy,balanced_accuracy,held_out,c" > "$results"
[ -f "$timings" ] || echo "fold,k,variant,stage,seconds" > "$timings"
for f in ${FOLDS:-$(seq 0 $((folds - 1)))}; do
  voc="$work/vocab-$f-$k.bin"
  if [ ! -f "$voc" ]; then
    s=$(t0)
    "$vocab" --quiet features --input "$photos" --labels "$work/train-$f.csv" --out "$work/sample-$f.bin" \
      --per-image $per_image --seed $seed > /dev/null
    "$vocab" --quiet kmeans --features "$work/sample-$f.bin" --k "$k" --iterations $iterations --tol 0 \
      --seed $seed --out "$voc" > /dev/null
    echo "$f,$k,,vocabulary,$(dt "$s")" >> "$timings"
  fi
  for name in $want; do
    line=$(echo "$all_variants" | grep "^$name|") || { echo "levers.sh: no variant $name" >&2; exit 2; }
    enc=$(echo "$line" | cut -d'|' -f2); train=$(echo "$line" | cut -d'|' -f3)
    hist="$work/hist-$f-$k-$(echo "$enc" | tr -d ' -').bin"
    if [ ! -f "$hist" ]; then
      s=$(t0)
      # shellcheck disable=SC2086
      "$vocab" --quiet encode --vocabulary "$voc" --input "$photos" $enc --out "$hist" > /dev/null
      echo "$f,$k,$name,encode,$(dt "$s")" >> "$timings"
    fi
    for attr in $attributes; do
      grep -q "^$f,$k,$name,$attr," "$results" && continue
      s=$(t0)
      model="$work/model-$f-$k-$name-$attr.json"
      # shellcheck disable=SC2086
      "$vocab" train --histograms "$hist" --labels "$photos/labels.csv" --attribute "$attr" \
        --split "$work/split-$f.csv" --cv 5 $train --out "$model" > /dev/null
      out=$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$photos/labels.csv" --held-out)
      row=$(scored "$out")
      echo "$f,$k,$name,$attr,$row" >> "$results"
      echo "$f,$k,$name,svm-$attr,$(dt "$s")" >> "$timings"
      echo "fold $f $name $attr: ${row%%,*}" >&2
    done
  done
done
