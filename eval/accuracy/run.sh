#!/usr/bin/env bash
# One stratified 50/50 split of a labelled photo folder: vocabulary from random patches of the
# training half only, dense encoding of every photo, linear SVMs (C by 5-fold CV on the training
# half) for each attribute, evaluated on the held-out half; every stage timed.
# usage: eval/accuracy/run.sh [photos dir] [K ...]     (default: shared scene15-train, K = 256 1024)
# writes results.csv (k,attribute,accuracy,balanced_accuracy) and timings.csv beside this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/scored.sh"
photos=${1:-$root/../shared/datasets/scene15-train}
shift || true
ks=${*:-256 1024}
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
work="$here/work"; mkdir -p "$work"
seed=1 per_image=200 iterations=20 stride=16
# Stratified split by class (the labels' `class` column), seeded; training photos also in train.csv.
python3 - "$photos/labels.csv" "$work" "$seed" <<'PY'
import csv, random, sys, collections
labels, work, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = list(csv.DictReader(open(labels)))
by = collections.defaultdict(list)
for r in rows:
    by[r["class"]].append(r["path"])
rng = random.Random(seed)
train = set()
for cls in sorted(by):
    paths = sorted(by[cls]); rng.shuffle(paths)
    train.update(paths[: (len(paths) + 1) // 2])
with open(f"{work}/split.csv", "w") as f:
    f.write("path,split\n" + "".join(f"{r['path']},{'train' if r['path'] in train else 'test'}\n" for r in rows))
with open(f"{work}/train.csv", "w") as f:
    f.write("path\n" + "".join(p + "\n" for p in sorted(train)))
PY
t() { local s=$(date +%s.%N); "$@"; echo "$(echo "$(date +%s.%N) - $s" | bc)"; }
echo "stage,k,seconds" > "$here/timings.csv"
echo "k,attribute,accuracy,balanced_accuracy,held_out" > "$here/results.csv"
s=$(t "$vocab" --quiet features --input "$photos" --labels "$work/train.csv" --out "$work/sample.bin" \
  --per-image $per_image --seed $seed | tail -1); echo "features,,$s" >> "$here/timings.csv"
for k in $ks; do
  s=$(t "$vocab" --quiet kmeans --features "$work/sample.bin" --k "$k" --iterations $iterations --seed $seed \
    --out "$work/vocab-$k.bin" | tail -1); echo "kmeans,$k,$s" >> "$here/timings.csv"
  s=$(t "$vocab" --quiet encode --vocabulary "$work/vocab-$k.bin" --input "$photos" --stride $stride \
    --norm hellinger --out "$work/hist-$k.bin" | tail -1); echo "encode,$k,$s" >> "$here/timings.csv"
  start=$(date +%s.%N)
  for attr in urbanicity elevation class; do
    "$vocab" train --histograms "$work/hist-$k.bin" --labels "$photos/labels.csv" --attribute $attr \
      --split "$work/split.csv" --cv 5 --out "$work/model-$k-$attr.json" > /dev/null
    out=$("$vocab" evaluate --model "$work/model-$k-$attr.json" --histograms "$work/hist-$k.bin" --labels "$photos/labels.csv" --held-out)
    row=$(scored "$out")
    echo "$k,$attr,${row%,*}" >> "$here/results.csv"
  done
  echo "svm (3 attributes, 5-fold CV),$k,$(echo "$(date +%s.%N) - $start" | bc)" >> "$here/timings.csv"
done
cat "$here/results.csv"; cat "$here/timings.csv"
