#!/usr/bin/env bash
# HOG and vocab's dense SIFT joined through vocab's own stages (issue 53): `vocab features
# --descriptor sift`, `vocab mixture`, `vocab encode --descriptor sift` (and --mirror), `vocab
# join` with the chosen setting's HOG encodings, scored by the 5-fold CV of
# eval/accuracy/encodings.sh (the same folds, splits and HOG encodings; run it first for BASE).
# Per fold: a sample of 125 SIFT keypoints of each training photo (from the 6-px grid), a
# mixture of 128 Gaussians over 64 principal components, every photo encoded at STEP px
# (2-level pyramid) and the training photos mirrored, joined with HOG's, a linear SVM per
# attribute (C by the inner 5-fold CV) scored on the held-out fold.
# usage: eval/descriptors/joined.sh   (STEP, default 6; C_GRID, the inner CV's C values, default
#   vocab train's; FOLDS, ATTRIBUTES, BASE)
# appends to joined.csv (fold,variant,attribute,accuracy,balanced_accuracy,held_out,c,values) and
# joined-timings.csv (fold,variant,stage,seconds); a variant's rows already there are kept.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/eval/accuracy/scored.sh"
photos=$(realpath "$root/../shared/datasets/scene15-train")
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
base=${BASE:-fisher-g128-d64-p2-s8-mirror-patch24}
enc="$root/eval/accuracy/work/encodings"
step=${STEP:-6}
work="$here/work/joined"; mkdir -p "$work"
variant="hog+sift$step-g128x64-p2-mirror"
grid=()
if [ -n "${C_GRID:-}" ]; then grid=(--c-grid "$C_GRID"); variant="$variant-c${C_GRID//,/_}"; fi
results="$here/joined.csv" timings="$here/joined-timings.csv"
[ -f "$results" ] || echo "fold,variant,attribute,accuracy,balanced_accuracy,held_out,c,values" > "$results"
[ -f "$timings" ] || echo "fold,variant,stage,seconds" > "$timings"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
# Runs a stage and appends its seconds: timed FOLD STAGE COMMAND...
timed() { local f=$1 stage=$2 s; shift 2; s=$(t0); "$@" > /dev/null; echo "$f,$variant,$stage,$(dt "$s")" >> "$timings"; }
for f in ${FOLDS:-0 1 2 3 4}; do
  hog="$enc/hist-$f-$base.bin" hog_m="$enc/hist-$f-$base-mirrored.bin"
  [ -f "$hog.images.csv" ] && [ -f "$hog_m.encoding.json" ] ||
    { echo "joined.sh: no HOG encodings $hog(-mirrored); run eval/accuracy/encodings.sh for $base" >&2; exit 2; }
  sample="$work/sample-$f.bin" mix="$work/mixture-$f.json"
  sift="$work/sift$step-$f.bin" sift_m="$work/sift$step-$f-mirrored.bin"
  both="$work/both$step-$f.bin" both_m="$work/both$step-$f-mirrored.bin"
  [ -f "$sample" ] || timed "$f" sample "$vocab" --quiet features --input "$photos" \
    --labels "$enc/train-$f.csv" --descriptor sift --per-image 125 --seed 1 --out "$sample"
  [ -f "$mix" ] || timed "$f" dictionary "$vocab" --quiet mixture --features "$sample" \
    --components 128 --pca-dims 64 --seed 1 --out "$mix"
  [ -f "$sift" ] || timed "$f" encode "$vocab" --quiet encode --vocabulary "$mix" --input "$photos" \
    --descriptor sift --stride "$step" --method fisher --pyramid 2 --out "$sift"
  [ -f "$sift_m" ] || timed "$f" encode-mirrored "$vocab" --quiet encode --vocabulary "$mix" \
    --input "$photos" --labels "$enc/train-$f.csv" --descriptor sift --stride "$step" \
    --method fisher --pyramid 2 --mirror --out "$sift_m"
  timed "$f" join "$vocab" --quiet join "$hog" "$sift" --out "$both"
  timed "$f" join-mirrored "$vocab" --quiet join "$hog_m" "$sift_m" --out "$both_m"
  values=$(python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(16); print(struct.unpack('<I', b[12:16])[0])" "$both")
  for attr in ${ATTRIBUTES:-class}; do
    grep -q "^$f,$variant,$attr," "$results" && continue
    model="$work/model-$f-$variant-$attr.json"
    timed "$f" "svm-$attr" "$vocab" --quiet train --histograms "$both" --labels "$photos/labels.csv" \
      --attribute "$attr" --split "$enc/split-$f.csv" --cv 5 "${grid[@]}" --mirrored "$both_m" \
      --out "$model"
    out=$("$vocab" evaluate --model "$model" --histograms "$both" --labels "$photos/labels.csv" --held-out)
    row=$(scored "$out")
    echo "$f,$variant,$attr,$row,$values" >> "$results"
    echo "fold $f $variant $attr: ${row%%,*}" >&2
  done
  # The joined encodings are 1 GB a fold; `vocab join` remakes them in seconds.
  rm -f "$both" "$both_m" "$both".* "$both_m".*
done
