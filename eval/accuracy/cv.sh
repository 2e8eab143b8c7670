#!/usr/bin/env bash
# The accuracy-versus-vocabulary-size experiment by 5-fold cross-validation (issue 6, paper
# Figure 10): for each fold, the vocabulary is learned from random patches of the four training
# folds only; every photo is encoded densely; for each attribute a linear SVM is trained on the
# training folds (C by an inner 5-fold CV there) and evaluated on the held-out fold. Accuracy is
# the mean over the folds.
# usage: eval/accuracy/cv.sh [photos dir] [K ...]   (default: shared scene15-train, K = 16..4096)
# writes cv$TAG.csv (per fold), cv$TAG-summary.csv, cv$TAG-timings.csv; figures: figures.py
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/scored.sh"
photos=${1:-$root/../shared/datasets/scene15-train}
shift || true
ks=${*:-16 64 256 1024 4096}
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
# ITERATIONS (default 10) and TAG (a suffix for the result files, e.g. -it6) vary the run;
# FEATURES_ARGS, KMEANS_ARGS and ENCODE_ARGS add options to every vocabulary sample, k-means and
# encode (e.g. FEATURES_ARGS="--mode dense --stride 8" KMEANS_ARGS="--assign approx"
# ENCODE_ARGS="--kernel int8" for the largest vocabularies).
tag=${TAG:-}
features_args=${FEATURES_ARGS:-} kmeans_args=${KMEANS_ARGS:-} encode_args=${ENCODE_ARGS:-}
work="$here/work/cv$tag"; mkdir -p "$work"
seed=1 per_image=125 iterations=${ITERATIONS:-10} stride=16 folds=5
# Stratified folds by class, seeded: fold i's photos are held out in round i.
python3 "$here/folds.py" "$photos/labels.csv" "$work" "$seed" "$folds"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
echo "fold,k,stage,seconds" > "$here/cv$tag-timings.csv"
echo "fold,k,attribute,accuracy,balanced_accuracy,held_out,c" > "$here/cv$tag.csv"
for f in $(seq 0 $((folds - 1))); do
  s=$(t0)
  "$vocab" --quiet features --input "$photos" --labels "$work/train-$f.csv" --out "$work/sample-$f.bin" \
    --per-image $per_image --seed $seed $features_args > /dev/null
  echo "$f,,features,$(dt "$s")" >> "$here/cv$tag-timings.csv"
  for k in $ks; do
    s=$(t0)
    "$vocab" --quiet kmeans --features "$work/sample-$f.bin" --k "$k" --iterations $iterations --tol 0 \
      --seed $seed --out "$work/vocab-$f-$k.bin" $kmeans_args > /dev/null
    echo "$f,$k,kmeans,$(dt "$s")" >> "$here/cv$tag-timings.csv"
    s=$(t0)
    "$vocab" --quiet encode --vocabulary "$work/vocab-$f-$k.bin" --input "$photos" --stride $stride \
      --norm hellinger --out "$work/hist-$f-$k.bin" $encode_args > /dev/null
    echo "$f,$k,encode,$(dt "$s")" >> "$here/cv$tag-timings.csv"
    s=$(t0)
    for attr in urbanicity elevation class; do
      model="$work/model-$f-$k-$attr.json"
      "$vocab" train --histograms "$work/hist-$f-$k.bin" --labels "$photos/labels.csv" --attribute $attr \
        --split "$work/split-$f.csv" --cv 5 --out "$model" > /dev/null
      out=$("$vocab" evaluate --model "$model" --histograms "$work/hist-$f-$k.bin" --labels "$photos/labels.csv" --held-out)
      row=$(scored "$out")
      echo "$f,$k,$attr,$row" >> "$here/cv$tag.csv"
    done
    echo "$f,$k,svm,$(dt "$s")" >> "$here/cv$tag-timings.csv"
    if [ "$k" = 256 ] || [ "$k" = 1024 ]; then
      # The spatial pyramid (1x1 + 2x2 grids, Lazebnik et al. weights) for the 15-class task.
      "$vocab" --quiet encode --vocabulary "$work/vocab-$f-$k.bin" --input "$photos" --stride $stride \
        --norm hellinger --pyramid 2 --out "$work/hist-$f-$k-p2.bin" > /dev/null
      model="$work/model-$f-$k-class-p2.json"
      "$vocab" train --histograms "$work/hist-$f-$k-p2.bin" --labels "$photos/labels.csv" --attribute class \
        --split "$work/split-$f.csv" --cv 5 --out "$model" > /dev/null
      out=$("$vocab" evaluate --model "$model" --histograms "$work/hist-$f-$k-p2.bin" --labels "$photos/labels.csv" --held-out)
      row=$(scored "$out")
      echo "$f,$k,class+pyramid2,$row" >> "$here/cv$tag.csv"
    fi
    echo "fold $f k $k done" >&2
  done
done
python3 - "$here/cv$tag.csv" "$here/cv$tag-summary.csv" <<'PY'
import csv, sys, collections, statistics
rows = list(csv.DictReader(open(sys.argv[1])))
acc = collections.defaultdict(list)
for r in rows:
    acc[(int(r["k"]), r["attribute"])].append(float(r["accuracy"]))
with open(sys.argv[2], "w") as out:
    out.write("k,attribute,mean_accuracy,std_accuracy,folds\n")
    for (k, a), v in sorted(acc.items()):
        out.write(f"{k},{a},{statistics.mean(v):.4f},{statistics.pstdev(v):.4f},{len(v)}\n")
print(open(sys.argv[2]).read())
PY
