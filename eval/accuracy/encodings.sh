#!/usr/bin/env bash
# Encodings past bag of words (issue 39), by the 5-fold cross-validation of cv.sh / levers.sh:
# per fold one sample (125 random patches of each training photo), the dictionaries the variants
# name (k-means vocabularies of K words, 10 iterations; mixtures of G Gaussians over D principal
# components, EM to scikit-learn's tolerance), each variant encoding every photo its way, then a
# linear SVM per attribute (C by an inner 5-fold CV on the training folds) scored on the held-out
# fold.
# A variant whose train flags hold --mirrored also encodes each fold's training photos mirrored
# left to right (vocab encode --mirror) and trains on them beside the photos; with --tta too it
# encodes every photo mirrored and also scores each held-out photo by the mean of its own and its
# mirror image's decision values (vocab evaluate --mirrored), recorded as the variant NAME, and
# by its own alone as NAME:single.
# Every model's predictions (with the decision values) stay in work/encodings for fusion.py.
# usage: eval/accuracy/encodings.sh [photos dir]   (VARIANTS, FOLDS, ATTRIBUTES to narrow)
# A variant ending -upF runs on the photos upscaled F/1000 times (upscale.py; WORK apart):
#   python3 upscale.py ../../../shared/datasets/scene15-train /tmp/up1667 1.6667
#   WORK=work/up1667 VARIANTS=fisher-g128-d64-p2-s8-mirror-up1667 ./encodings.sh /tmp/up1667
# A variant ending -placesW is measured with spatial-fisher.patch applied (an experiment, not
# kept in vocab: per pyramid cell and Gaussian, 4 spatial gradients) and VOCAB_FISHER_PLACES=W:
#   git apply spatial-fisher.patch && VOCAB_FISHER_PLACES=1 \
#     VARIANTS=fisher-g128-d64-p2-s8-mirror-patch24-places1 ./encodings.sh
# Results already in encodings.csv (same fold, variant, attribute) are not run again.
# writes encodings.csv and encodings-timings.csv; encodings_report.py makes the table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/scored.sh"
photos=$(realpath "${1:-$root/../shared/datasets/scene15-train}")
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
attributes=${ATTRIBUTES:-class}
# WORK: another folder for another photo set (samples, dictionaries and encodings are kept by
# fold and variant name, not by photos).
work=${WORK:-$here/work/encodings}; mkdir -p "$work"
seed=1 per_image=125 iterations=10 folds=5
# name | dictionary (vK: k-means, gGxD: mixture) | encode flags | train flags
all_variants="
bow-k1024-p3-chi2|v1024|--stride 8 --norm l1 --pyramid 3 --soft 5 --kernel int8|--kernel-map chi2
vlad-k64-p2|v64|--stride 8 --method vlad --pyramid 2 --soft 5 --kernel int8|
fisher-g64-d64-p1|g64x64|--stride 8 --method fisher --pyramid 1|
fisher-g64-d64-p2|g64x64|--stride 8 --method fisher --pyramid 2|
fisher-g128-d64-p2|g128x64|--stride 8 --method fisher --pyramid 2|
fisher-g256-d64-p1|g256x64|--stride 8 --method fisher --pyramid 1|
fisher-g64-d80-p3|g64x80|--stride 8 --method fisher --pyramid 3|
fisher-g128-d64-p2-s4|g128x64|--stride 4 --method fisher --pyramid 2|
fisher-g64-d64-p3|g64x64|--stride 8 --method fisher --pyramid 3|
fisher-g64-d64-p2-s4|g64x64|--stride 4 --method fisher --pyramid 2|
fisher-g64-d64-p2-sc64|g64x64|--stride 8 --scales 40,64 --method fisher --pyramid 2|
fisher-g256-d64-p2|g256x64|--stride 8 --method fisher --pyramid 2|
fisher-g256-d64-p2-s4|g256x64|--stride 4 --method fisher --pyramid 2|
fisher-g128-d96-p2-s4|g128x96|--stride 4 --method fisher --pyramid 2|
fisher-g128-d48-p2-s4|g128x48|--stride 4 --method fisher --pyramid 2|
fisher-g64-d64-p2-s4-sc64|g64x64|--stride 4 --scales 40,64 --method fisher --pyramid 2|
fisher-g128-d64-p2-s4-mirror|g128x64|--stride 4 --method fisher --pyramid 2|--mirrored
fisher-g128-d64-p2x3-s4-mirror|g128x64|--stride 4 --method fisher --pyramid 2 --strips 3|--mirrored
fisher-g128-d64-p2-s8-mirror-patch24|g128x64p24|--stride 8 --method fisher --pyramid 2 --patch 24|--mirrored
fisher-g128-d64-p2-s8-sc67-mirror-patch24|g128x64p24|--stride 8 --method fisher --pyramid 2 --patch 24 --scales 40,67|--mirrored
fisher-g128-d64-p2-s4-mirror-patch24|g128x64p24|--stride 4 --method fisher --pyramid 2 --patch 24|--mirrored
fisher-g128-d64-p2-s8-sc67-100-mirror-patch24|g128x64p24|--stride 8 --method fisher --pyramid 2 --patch 24 --scales 40,67,100|--mirrored
fisher-g256-d64-p2-s8-sc67-mirror-patch24|g256x64p24|--stride 8 --method fisher --pyramid 2 --patch 24 --scales 40,67|--mirrored
fisher-g128-d64-p2-s8-mirror-patch24-places1|g128x64p24|--stride 8 --method fisher --pyramid 2 --patch 24|--mirrored
fisher-g128-d64-p2-s8-mirror-patch24-places3|g128x64p24|--stride 8 --method fisher --pyramid 2 --patch 24|--mirrored
fisher-g128-d64-p2-s8-sc67-mirror-patch24-places1|g128x64p24|--stride 8 --method fisher --pyramid 2 --patch 24 --scales 40,67|--mirrored
fisher-g128-d64-p2-s8-mirror-patch20|g128x64p20|--stride 8 --method fisher --pyramid 2 --patch 20|--mirrored
fisher-g128-d64-p2-s8-mirror-up1667|g128x64|--stride 8 --method fisher --pyramid 2|--mirrored
fisher-g128-d64-p2-s4-mirror-tta|g128x64|--stride 4 --method fisher --pyramid 2|--mirrored --tta
bow-k1024-p3-chi2-mirror-tta|v1024|--stride 8 --norm l1 --pyramid 3 --soft 5 --kernel int8|--kernel-map chi2 --mirrored --tta
"
want=${VARIANTS:-$(echo "$all_variants" | cut -d'|' -f1 | xargs)}
python3 "$here/folds.py" "$photos/labels.csv" "$work" "$seed" "$folds"
t0() { date +%s.%N; }
dt() { echo "$(t0) - $1" | bc; }
results="$here/encodings.csv" timings="$here/encodings-timings.csv"
[ -f "$results" ] || echo "fold,variant,attribute,accuracy,balanced_accuracy,held_out,c,values" > "$results"
[ -f "$timings" ] || echo "fold,variant,stage,seconds" > "$timings"
for f in ${FOLDS:-$(seq 0 $((folds - 1)))}; do
  for name in $want; do
    line=$(echo "$all_variants" | grep "^$name|") || { echo "encodings.sh: no variant $name" >&2; exit 2; }
    dict=$(echo "$line" | cut -d'|' -f2); enc=$(echo "$line" | cut -d'|' -f3); train=$(echo "$line" | cut -d'|' -f4)
    # A dictionary ending pN is learned from patches of N px (vocab features --patch N; the
    # variant's encode flags say --patch N too), the others from the photos as they are.
    patch=""; case $dict in *p[0-9]*) patch=${dict##*p} ;; esac
    sample="$work/sample${patch:+-p$patch}-$f.bin"
    [ -f "$sample" ] || "$vocab" --quiet features --input "$photos" --labels "$work/train-$f.csv" \
      --out "$sample" --per-image $per_image --seed $seed ${patch:+--patch $patch} > /dev/null
    case $dict in
      v*) words="$work/$dict-$f.bin"
          if [ ! -f "$words" ]; then
            s=$(t0)
            k=${dict#v}; "$vocab" --quiet kmeans --features "$sample" --k "${k%p[0-9]*}" --iterations $iterations --tol 0 \
              --seed $seed --kernel int8 --out "$words" > /dev/null
            echo "$f,$dict,dictionary,$(dt "$s")" >> "$timings"
          fi ;;
      g*) words="$work/$dict-$f.json"
          if [ ! -f "$words" ]; then
            g=${dict#g}; g=${g%p[0-9]*}; s=$(t0)
            "$vocab" --quiet mixture --features "$sample" --components "${g%x*}" --pca-dims "${g#*x}" \
              --seed $seed --out "$words" > /dev/null
            echo "$f,$dict,dictionary,$(dt "$s")" >> "$timings"
          fi ;;
    esac
    hist="$work/hist-$f-$name.bin"
    if [ ! -f "$hist" ]; then
      s=$(t0)
      # shellcheck disable=SC2086
      "$vocab" --quiet encode --vocabulary "$words" --input "$photos" $enc --out "$hist" > /dev/null
      echo "$f,$name,encode,$(dt "$s")" >> "$timings"
    fi
    # --mirrored: the training photos mirrored (--tta: every photo), encoded alike, train beside
    # them (--tta: and score beside them).
    tta=""; case " $train " in *" --tta "*) tta=1; train=${train/--tta/} ;; esac
    views=("")
    case " $train " in *" --mirrored "*)
      mirrored="$work/hist-$f-$name-mirrored.bin" photos_of=(--labels "$work/train-$f.csv")
      [ -n "$tta" ] && photos_of=() && views=(--mirrored "$mirrored")
      if [ ! -f "$mirrored" ]; then
        s=$(t0)
        # shellcheck disable=SC2086
        "$vocab" --quiet encode --vocabulary "$words" --input "$photos" "${photos_of[@]}" \
          $enc --mirror --out "$mirrored" > /dev/null
        echo "$f,$name,encode-mirrored${tta:+-all},$(dt "$s")" >> "$timings"
      fi
      train=${train/--mirrored/--mirrored $mirrored} ;;
    esac
    values=$(python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(16); print(struct.unpack('<I', b[12:16])[0])" "$hist")
    for attr in $attributes; do
      grep -q "^$f,$name,$attr," "$results" && continue
      s=$(t0)
      model="$work/model-$f-$name-$attr.json"
      # shellcheck disable=SC2086
      "$vocab" --quiet train --histograms "$hist" --labels "$photos/labels.csv" --attribute "$attr" \
        --split "$work/split-$f.csv" --cv 5 $train --out "$model" > /dev/null
      echo "$f,$name,svm-$attr,$(dt "$s")" >> "$timings"
      # With --tta: first each photo alone (NAME:single), then with its mirror image (NAME).
      for view in ${tta:+single} both; do
        flags=(); label=$name
        if [ "$view" = single ]; then label="$name:single"; else flags=("${views[@]}"); fi
        [ -n "${flags[*]}" ] || flags=()
        out=$("$vocab" evaluate --model "$model" --histograms "$hist" --labels "$photos/labels.csv" \
          --held-out "${flags[@]}")
        [ "$view" = single ] && cp "$model.predictions.csv" "$model.single.csv"
        row=$(scored "$out")
        echo "$f,$label,$attr,$row,$values" >> "$results"
        echo "fold $f $label $attr: ${row%%,*}" >&2
      done
    done
  done
done
