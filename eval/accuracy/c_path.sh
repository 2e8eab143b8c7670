#!/usr/bin/env bash
# How much the SVM's C moves the held-out accuracy (issue 53, a diagnostic, not a way to choose
# C: the held-out folds must not choose it). The chosen setting's encodings from encodings.sh
# (fisher-g128-d64-p2-s8-mirror-patch24, mirror images train), a linear SVM on the 15 classes at
# each fixed C, scored on each fold's held-out photos; the inner CV chooses among 0.01 to 100 by
# decades (vocab train's grid).
# usage: eval/accuracy/c_path.sh   (CS default "1 3 10 30 100", FOLDS)
# writes c_path.csv (fold, c, attribute, accuracy, balanced_accuracy, held_out, c)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/dev.sh"
base=fisher-g128-d64-p2-s8-mirror-patch24
enc="$here/work/encodings" work="$here/work/c_path"
mkdir -p "$work"
results="$here/c_path.csv"
[ -f "$results" ] || echo "fold,fixed_c,attribute,accuracy,balanced_accuracy,held_out,c" > "$results"
for f in ${FOLDS:-0 1 2 3 4}; do
  for c in ${CS:-1 3 10 30 100}; do
    grep -q "^$f,$c,class," "$results" && continue
    model="$work/model-$f-$c.json" hist="$enc/hist-$f-$base.bin"
    "$vocab" --quiet train --histograms "$hist" --labels "$photos/labels.csv" --attribute class \
      --split "$enc/split-$f.csv" --c "$c" --mirrored "$enc/hist-$f-$base-mirrored.bin" \
      --out "$model" > /dev/null
    row=$(scored "$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$photos/labels.csv" --held-out)")
    echo "$f,$c,class,$row" >> "$results"
    echo "fold $f C $c: ${row%%,*}" >&2
  done
done
