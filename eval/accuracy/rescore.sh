#!/usr/bin/env bash
# Re-scores the SVM stage of cv.sh on its stored histograms (work/cv) with the current vocab
# binary, to check a solver change against cv.csv without redoing features, k-means and encoding.
# usage: eval/accuracy/rescore.sh [photos dir]   writes cv-rescored.csv (fold,k,attribute,accuracy,
# accuracy_in_cv_csv)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=${1:-$root/../shared/datasets/scene15-train}
vocab=$root/target/release/vocab
(cd "$root" && cargo build --release --quiet)
work=$here/work/cv
model=$(mktemp --suffix=.json)
trap 'rm -f "$model" "$model".*' EXIT
out=$here/cv-rescored.csv
echo "fold,k,attribute,accuracy,accuracy_in_cv_csv" > "$out.tmp"
tail -n +2 "$here/cv.csv" | grep -v pyramid | while IFS=, read -r f k attr old _; do
  "$vocab" train --histograms "$work/hist-$f-$k.bin" --labels "$photos/labels.csv" --attribute "$attr" \
    --split "$work/split-$f.csv" --cv 5 --out "$model" > /dev/null
  acc=$("$vocab" evaluate --model "$model" --histograms "$work/hist-$f-$k.bin" --labels "$photos/labels.csv" --held-out |
    awk '/^accuracy / {print $2}')
  echo "$f,$k,$attr,$acc,$old" >> "$out.tmp"
done
mv "$out.tmp" "$out"
awk -F, 'NR > 1 { n++; if ($4 != $5) { d++; print "differs: fold " $1 " k " $2 " " $3 ": " $5 " -> " $4 } }
  END { print n - d " of " n " rows identical" }' "$out"
