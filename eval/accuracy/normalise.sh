#!/usr/bin/env bash
# Normalisation variants of the chosen setting's Fisher vectors (issue 53), by the 5-fold CV of
# encodings.sh: normalise.py remakes each fold's encodings of BASE (and of its mirrored training
# photos) the variant's way, then a linear SVM per attribute (C by an inner 5-fold CV, the
# mirror images training too) is scored on the held-out fold, exactly as encodings.sh scores
# BASE. Run encodings.sh for BASE first (its encodings stay in work/encodings).
# usage: eval/accuracy/normalise.sh   (VARIANTS, FOLDS, ATTRIBUTES, BASE to narrow)
# writes normalise.csv (fold, base, variant, attribute, accuracy, ...), normalise-timings.csv
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/dev.sh"
python=$("$root/eval/setup-venv.sh")
base=${BASE:-fisher-g128-d64-p2-s8-mirror-patch24}
# The mixture's Gaussians and dimensions, and the pyramid's levels, of BASE.
k=128 d=64 levels=2
enc="$here/work/encodings" work="$here/work/normalise"
mkdir -p "$work"
results="$here/normalise.csv" timings="$here/normalise-timings.csv"
[ -f "$results" ] || echo "fold,base,variant,attribute,accuracy,balanced_accuracy,held_out,c" > "$results"
[ -f "$timings" ] || echo "fold,variant,stage,seconds" > "$timings"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
for f in ${FOLDS:-0 1 2 3 4}; do
  for variant in ${VARIANTS:-power-0.5 power-0.3 cells intra}; do
    todo=()
    for attr in ${ATTRIBUTES:-class}; do
      grep -q "^$f,$base,$variant,$attr," "$results" || todo+=("$attr")
    done
    [ ${#todo[@]} -gt 0 ] || continue
    hist="$work/hist-$f-$variant.bin" mirrored="$work/hist-$f-$variant-mirrored.bin"
    s=$(t0)
    for pair in "$enc/hist-$f-$base.bin:$hist" "$enc/hist-$f-$base-mirrored.bin:$mirrored"; do
      [ -f "${pair#*:}" ] || "$python" "$here/normalise.py" "${pair%%:*}" "${pair#*:}" "$variant" $k $d $levels
    done
    echo "$f,$variant,normalise,$(dt "$s")" >> "$timings"
    for attr in "${todo[@]}"; do
      s=$(t0)
      model="$work/model-$f-$variant-$attr.json"
      "$vocab" --quiet train --histograms "$hist" --labels "$photos/labels.csv" --attribute "$attr" \
        --split "$enc/split-$f.csv" --cv 5 --mirrored "$mirrored" --out "$model" > /dev/null
      echo "$f,$variant,svm-$attr,$(dt "$s")" >> "$timings"
      out=$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$photos/labels.csv" --held-out)
      row=$(scored "$out")
      echo "$f,$base,$variant,$attr,$row" >> "$results"
      echo "fold $f $variant $attr: ${row%%,*}" >&2
    done
    rm -f "$hist" "$mirrored"
  done
done
