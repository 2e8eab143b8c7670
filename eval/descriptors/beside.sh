#!/usr/bin/env bash
# A second descriptor beside vocab's HOG in one vector (issue 53): dense RootSIFT, OpenCV's
# (make_sift.py, numpy side only) or vocab's own (the dense_sift example), read by `vocab --from
# DIR` and encoded as Fisher vectors, joined
# with the chosen setting's HOG Fisher vectors (concat.py: each half times 1/sqrt 2), scored by
# the 5-fold CV of eval/accuracy/encodings.sh (the same folds, splits and HOG encodings; run it
# first for BASE). The mirror images train too: the SIFT of each photo mirrored (make_sift.py
# --flip) is encoded with the photo's own size and id, beside HOG's `vocab encode --mirror`.
# Per fold: a sample of 125 SIFT rows of each training photo, a mixture of G Gaussians over D
# principal components, every photo encoded (2-level pyramid), the training photos' mirror images
# encoded; then two arms, each a linear SVM per attribute (C by the inner 5-fold CV) scored on the
# held-out fold: SIFT alone (`sift-...`) and HOG and SIFT joined (`hog+sift-...`).
# usage: eval/descriptors/beside.sh   (FOLDS, ATTRIBUTES, BASE, SIFT=name to narrow)
#   SIFT names the descriptor: s6-4_7 is OpenCV's, make_sift.py --step 6 --size 4,7 --root
#   --upright (windows of 24 and 42 px); vs6-24_42 is vocab's own dense SIFT
#   (vocab_pipeline::sift, written by the dense_sift example: step 6, windows of 24 and 42 px,
#   each inside the photo); vw6-24_42 the same on one grid over the whole photo (--whole).
# writes beside.csv (fold,variant,attribute,accuracy,balanced_accuracy,held_out,c,values) and
# beside-timings.csv. Descriptor folders, samples, mixtures, encodings and result rows are kept by
# name under work/ and in beside.csv: after a change to sift.rs or make_sift.py, remove them.
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/eval/accuracy/scored.sh"
photos=$(realpath "$root/../shared/datasets/scene15-train")
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
python=$("$root/eval/setup-venv.sh")
base=${BASE:-fisher-g128-d64-p2-s8-mirror-patch24}
enc="$root/eval/accuracy/work/encodings"
name=${SIFT:-s6-4_7} g=128 d=64 seed=1 per_image=125
step=${name%%-*}; step=${step#v}; step=${step#[sw]}; sizes=${name#*-}; sizes=${sizes//_/,}
grid=(); [ "${name#vw}" = "$name" ] || grid=(--whole)
work="$here/work/beside"; mkdir -p "$work"
case $name in
  v*) sift="$here/work/vsift-${name#v}" ;;
  *) sift="$here/work/rootsift-$name" ;;
esac
flipped="$sift-flip"
[ "${name#v}" = "$name" ] || (cd "$root" && cargo build --release --quiet -p vocab-pipeline --example dense_sift)
for pair in "$sift:" "$flipped:--flip"; do
  dir=${pair%%:*} flag=${pair#*:}
  [ -d "$dir" ] && continue
  if [ "${name#v}" != "$name" ]; then
    # shellcheck disable=SC2086
    "$root/target/release/examples/dense_sift" "$photos" "$dir.tmp" "$step" "$sizes" $flag "${grid[@]}"
  else
    # shellcheck disable=SC2086
    "$python" "$here/make_sift.py" "$photos" "$dir.tmp" --step "$step" --size "$sizes" --root --upright $flag
  fi
  mv "$dir.tmp" "$dir"
done
results="$here/beside.csv" timings="$here/beside-timings.csv"
[ -f "$results" ] || echo "fold,variant,attribute,accuracy,balanced_accuracy,held_out,c,values" > "$results"
[ -f "$timings" ] || echo "fold,variant,stage,seconds" > "$timings"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
# The joined arm is named for its HOG half: hog (the chosen setting) or BASE.
label=hog; [ "$base" = fisher-g128-d64-p2-s8-mirror-patch24 ] || label=$base
arm_sift="sift-$name-g${g}x$d-p2-mirror" arm_both="$label+sift-$name-g${g}x$d-p2-mirror"
for f in ${FOLDS:-0 1 2 3 4}; do
  hog="$enc/hist-$f-$base.bin" hog_m="$enc/hist-$f-$base-mirrored.bin"
  sample="$work/sample-$name-$f.bin" mix="$work/mixture-$name-$f.json"
  hist="$work/hist-$f-$arm_sift.bin" mirrored="$work/hist-$f-$arm_sift-mirrored.bin"
  both="$work/hist-$f-$arm_both.bin" both_m="$work/hist-$f-$arm_both-mirrored.bin"
  if [ ! -f "$sample" ]; then
    s=$(t0)
    "$vocab" --quiet features --input "$photos" --labels "$enc/train-$f.csv" --from "$sift" \
      --out "$sample" --per-image $per_image --seed $seed > /dev/null
    echo "$f,$name,sample,$(dt "$s")" >> "$timings"
  fi
  if [ ! -f "$mix" ]; then
    s=$(t0)
    "$vocab" --quiet mixture --features "$sample" --components $g --pca-dims $d --seed $seed \
      --out "$mix" > /dev/null
    echo "$f,$name,dictionary,$(dt "$s")" >> "$timings"
  fi
  if [ ! -f "$hist" ]; then
    s=$(t0)
    "$vocab" --quiet encode --vocabulary "$mix" --input "$photos" --from "$sift" --method fisher \
      --pyramid 2 --out "$hist" > /dev/null
    echo "$f,$arm_sift,encode,$(dt "$s")" >> "$timings"
  fi
  if [ ! -f "$mirrored" ]; then
    s=$(t0)
    "$vocab" --quiet encode --vocabulary "$mix" --input "$photos" --labels "$enc/train-$f.csv" \
      --from "$flipped" --method fisher --pyramid 2 --out "$mirrored.tmp" > /dev/null
    for side in "" .encoding.json .images.csv .skipped.csv; do mv "$mirrored.tmp$side" "$mirrored$side"; done
    echo "$f,$arm_sift,encode-mirrored,$(dt "$s")" >> "$timings"
  fi
  # encodings.sh may still be running: wait for its HOG encodings of this fold (side files last).
  until [ -f "$hog.images.csv" ] && [ -f "$hog_m.images.csv" ] && [ -f "$hog_m.encoding.json" ]; do
    pgrep -f "eval/accuracy/encodings.sh" > /dev/null ||
      { echo "beside.sh: no HOG encodings $hog(-mirrored); run encodings.sh for $base" >&2; exit 2; }
    sleep 10
  done
  # vocab refuses mirror images of descriptors made elsewhere (it cannot make them), so the
  # mirrored photos' own SIFT (make_sift.py --flip) cannot train beside the photos under their
  # own records. The SIFT-alone arm borrows the HOG encodings' records (the same length, 81,920
  # values; a record only gates the checks, the SVM reads the vectors); its own stay as .own.json.
  for pair in "$hist:$hog" "$mirrored:$hog_m"; do
    own=${pair%%:*} borrowed=${pair#*:}
    [ -f "$own.own.json" ] && continue
    cp "$own.encoding.json" "$own.own.json.tmp"
    cp "$borrowed.encoding.json" "$own.encoding.json"
    mv "$own.own.json.tmp" "$own.own.json"
  done
  [ -f "$both" ] || "$python" "$here/concat.py" "$hog" "$hist" "$both"
  [ -f "$both_m" ] || "$python" "$here/concat.py" "$hog_m" "$mirrored" "$both_m"
  for arm in "$arm_sift:$hist:$mirrored" "$arm_both:$both:$both_m"; do
    variant=${arm%%:*} rest=${arm#*:}; h=${rest%%:*} m=${rest#*:}
    values=$(python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(16); print(struct.unpack('<I', b[12:16])[0])" "$h")
    for attr in ${ATTRIBUTES:-class}; do
      grep -q "^$f,$variant,$attr," "$results" && continue
      s=$(t0)
      model="$work/model-$f-$variant-$attr.json"
      "$vocab" --quiet train --histograms "$h" --labels "$photos/labels.csv" --attribute "$attr" \
        --split "$enc/split-$f.csv" --cv 5 --mirrored "$m" --out "$model" > /dev/null
      echo "$f,$variant,svm-$attr,$(dt "$s")" >> "$timings"
      out=$("$vocab" evaluate --model "$model" --histograms "$h" --labels "$photos/labels.csv" --held-out)
      row=$(scored "$out")
      echo "$f,$variant,$attr,$row,$values" >> "$results"
      echo "fold $f $variant $attr: ${row%%,*}" >&2
    done
  done
  # The joined encodings are 1.7 GB a fold and concat.py remakes them in seconds.
  rm -f "$both" "$both_m" "$both".* "$both_m".*
done
