#!/usr/bin/env bash
# Crops as more training views (issue 53), at the chosen setting (24-px patches at stride 8, 128
# Gaussians x 64 dims, 2-level pyramid, mirror images train), by the 5-fold CV of encodings.sh:
# augment.py writes every photo and two crops of each (FRACTION of its sides, top left and bottom
# right) to AUG; per fold, the fold's mixture encodes every photo and the crops of the training
# photos (and those mirrored), and a linear SVM on the 15 classes trains on the training photos
# with their crops, scored on the held-out photos as they are.
# Arms, per fold:
#   crops      C by the inner 5-fold CV (the crops of a photo may fall in other inner folds than
#              the photo, so the inner CV sees near-copies: it only chooses C)
#   crops-c10  C = 10, no inner CV
#   base-c10   the chosen setting without crops (encodings.sh's encodings), C = 10
# Run encodings.sh for fisher-g128-d64-p2-s8-mirror-patch24 first (mixtures, folds, encodings).
# The crops arm is slow: 7,200 training rows (photos, crops, and their mirror images) took the
# inner CV's C path over 11 minutes a fold; ARMS="crops-c10 base-c10" leaves it out.
# usage: eval/accuracy/augment.sh   (FRACTION default 0.85, AUG default /tmp/aug<FRACTION>, FOLDS,
#        ARMS)
# writes augment.csv (fold, arm, attribute, accuracy, ...), augment-timings.csv
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/dev.sh"
python=$("$root/eval/setup-venv.sh")
fraction=${FRACTION:-0.85}
aug=${AUG:-/tmp/aug$fraction}
base=fisher-g128-d64-p2-s8-mirror-patch24
flags=(--stride 8 --method fisher --pyramid 2 --patch 24)
enc="$here/work/encodings" work="$here/work/augment"
mkdir -p "$work"
[ -f "$aug/labels.csv" ] || "$python" "$here/augment.py" "$photos" "$aug" "$enc" "$fraction" 5
results="$here/augment.csv" timings="$here/augment-timings.csv"
[ -f "$results" ] || echo "fold,arm,fraction,attribute,accuracy,balanced_accuracy,held_out,c" > "$results"
[ -f "$timings" ] || echo "fold,arm,stage,seconds" > "$timings"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
# score FOLD ARM HIST MIRRORED LABELS SPLIT C-FLAGS...: trains, scores, appends the row.
score() {
  local f=$1 arm=$2 hist=$3 mirrored=$4 labels=$5 split=$6
  shift 6
  grep -q "^$f,$arm,$fraction,class," "$results" && return 0
  local s model="$work/model-$f-$arm.json"
  s=$(t0)
  "$vocab" --quiet train --histograms "$hist" --labels "$labels" --attribute class \
    --split "$split" "$@" --mirrored "$mirrored" --out "$model" > /dev/null
  echo "$f,$arm,svm-class,$(dt "$s")" >> "$timings"
  local row
  row=$(scored "$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$labels" --held-out)")
  echo "$f,$arm,$fraction,class,$row" >> "$results"
  echo "fold $f $arm: ${row%%,*}" >&2
}
for f in ${FOLDS:-0 1 2 3 4}; do
  mixture="$enc/g128x64p24-$f.json"
  hist="$work/hist-$f-$fraction.bin" mirrored="$work/hist-$f-$fraction-mirrored.bin"
  if [ ! -f "$hist" ]; then
    s=$(t0)
    "$vocab" --quiet encode --vocabulary "$mixture" --input "$aug" --labels "$enc/aug-encode-$f.csv" \
      "${flags[@]}" --out "$hist" > /dev/null
    echo "$f,crops,encode,$(dt "$s")" >> "$timings"
  fi
  if [ ! -f "$mirrored" ]; then
    s=$(t0)
    "$vocab" --quiet encode --vocabulary "$mixture" --input "$aug" --labels "$enc/aug-train-$f.csv" \
      "${flags[@]}" --mirror --out "$mirrored" > /dev/null
    echo "$f,crops,encode-mirrored,$(dt "$s")" >> "$timings"
  fi
  for arm in ${ARMS:-crops crops-c10 base-c10}; do
    case $arm in
      crops) score "$f" crops "$hist" "$mirrored" "$aug/labels.csv" "$enc/aug-split-$f.csv" --cv 5 ;;
      crops-c10) score "$f" crops-c10 "$hist" "$mirrored" "$aug/labels.csv" "$enc/aug-split-$f.csv" --c 10 ;;
      base-c10) score "$f" base-c10 "$enc/hist-$f-$base.bin" "$enc/hist-$f-$base-mirrored.bin" \
        "$photos/labels.csv" "$enc/split-$f.csv" --c 10 ;;
      *) echo "augment.sh: no arm $arm" >&2; exit 2 ;;
    esac
  done
done
