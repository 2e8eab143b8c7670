#!/usr/bin/env bash
# Descriptors made elsewhere beside vocab's HOG (issue 52): OpenCV's dense SIFT (make_sift.py,
# numpy side only) read by `vocab --from DIR`, and vocab's own HOG, through the same 5-fold
# cross-validation as eval/accuracy (folds.py: stratified by class, seed 1; 1,200 training and
# 300 held-out photos a fold). Per fold: a sample of 125 random patches (HOG) or rows (SIFT) of
# each training photo, the variant's dictionary learned from it, every photo encoded, a linear
# SVM per attribute (C by an inner 5-fold CV on the training folds) scored on the held-out fold.
# usage: eval/descriptors/cv.sh [photos dir] [sift dir]   (VARIANTS, FOLDS, ATTRIBUTES to narrow)
# The SIFT folder is made by make_sift.py when absent. Results already in cv.csv are not run again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/eval/accuracy/scored.sh"
photos=$(realpath "${1:-$root/../shared/datasets/scene15-train}")
work="$here/work"; mkdir -p "$work"
sift=${2:-$work/rootsift-s8-16}
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
python=$("$root/eval/setup-venv.sh")
[ -d "$sift" ] || "$python" "$here/make_sift.py" "$photos" "$sift" --step 8 --size 16 --root
attributes=${ATTRIBUTES:-class}
seed=1 per_image=125 iterations=10 folds=5
# name | descriptor (hog, sift) | dictionary (vK: k-means, gGxD: mixture) | encode flags | train flags
all_variants="
hog-fisher-g64x64-p2|hog|g64x64|--stride 8 --method fisher --pyramid 2|
sift-fisher-g64x64-p2|sift|g64x64|--method fisher --pyramid 2|
hog-bow-k1024-p3-chi2|hog|v1024|--stride 8 --pyramid 3 --soft 5|--kernel-map chi2
sift-bow-k1024-p3-chi2|sift|v1024|--pyramid 3 --soft 5|--kernel-map chi2
"
want=${VARIANTS:-$(echo "$all_variants" | cut -d'|' -f1 | xargs)}
python3 "$root/eval/accuracy/folds.py" "$photos/labels.csv" "$work" "$seed" "$folds"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
results="$here/cv.csv" timings="$here/cv-timings.csv"
[ -f "$results" ] || echo "fold,variant,attribute,accuracy,balanced_accuracy,held_out,c,values" > "$results"
[ -f "$timings" ] || echo "fold,variant,stage,seconds" > "$timings"
for f in ${FOLDS:-$(seq 0 $((folds - 1)))}; do
  for name in $want; do
    line=$(echo "$all_variants" | grep "^$name|") || { echo "cv.sh: no variant $name" >&2; exit 2; }
    desc=$(echo "$line" | cut -d'|' -f2); dict=$(echo "$line" | cut -d'|' -f3)
    enc=$(echo "$line" | cut -d'|' -f4); train=$(echo "$line" | cut -d'|' -f5)
    from=(); [ "$desc" = sift ] && from=(--from "$sift")
    sample="$work/sample-$desc-$f.bin"
    if [ ! -f "$sample" ]; then
      s=$(t0)
      "$vocab" --quiet features --input "$photos" --labels "$work/train-$f.csv" "${from[@]}" \
        --out "$sample" --per-image $per_image --seed $seed > /dev/null
      echo "$f,$desc,sample,$(dt "$s")" >> "$timings"
    fi
    case $dict in
      v*) words="$work/$desc-$dict-$f.bin"
          if [ ! -f "$words" ]; then
            s=$(t0)
            "$vocab" --quiet kmeans --features "$sample" --k "${dict#v}" --iterations $iterations --tol 0 \
              --seed $seed --out "$words" > /dev/null
            echo "$f,$desc-$dict,dictionary,$(dt "$s")" >> "$timings"
          fi ;;
      g*) words="$work/$desc-$dict-$f.json"
          if [ ! -f "$words" ]; then
            g=${dict#g}; s=$(t0)
            "$vocab" --quiet mixture --features "$sample" --components "${g%x*}" --pca-dims "${g#*x}" \
              --seed $seed --out "$words" > /dev/null
            echo "$f,$desc-$dict,dictionary,$(dt "$s")" >> "$timings"
          fi ;;
    esac
    hist="$work/hist-$f-$name.bin"
    if [ ! -f "$hist" ]; then
      s=$(t0)
      # shellcheck disable=SC2086
      "$vocab" --quiet encode --vocabulary "$words" --input "$photos" "${from[@]}" $enc --out "$hist" > /dev/null
      echo "$f,$name,encode,$(dt "$s")" >> "$timings"
    fi
    values=$(python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(16); print(struct.unpack('<I', b[12:16])[0])" "$hist")
    for attr in $attributes; do
      grep -q "^$f,$name,$attr," "$results" && continue
      s=$(t0)
      model="$work/model-$f-$name-$attr.json"
      # shellcheck disable=SC2086
      "$vocab" --quiet train --histograms "$hist" --labels "$photos/labels.csv" --attribute "$attr" \
        --split "$work/split-$f.csv" --cv 5 $train --out "$model" > /dev/null
      out=$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$photos/labels.csv" --held-out)
      row=$(scored "$out")
      echo "$f,$name,$attr,$row,$values" >> "$results"
      echo "$f,$name,svm-$attr,$(dt "$s")" >> "$timings"
      echo "fold $f $name $attr: ${row%%,*}" >&2
    done
  done
done
