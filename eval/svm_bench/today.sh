#!/usr/bin/env bash
# The SVM benchmark on today's features (issue 39): the development set's photos split as trial 1
# of configs/scene15-dev.toml's protocol would (50 training photos a class, seed 1), a sample of
# 200 random patches of each training photo, and four encodings of every photo:
#   k1024, k4096: bag of words (stride 8, soft over 5 words, 3-level pyramid, L1), chi2 map;
#   vlad64: VLAD over 64 words (stride 8, soft over 5, 2-level pyramid);
#   fisher64: Fisher vectors over 64 Gaussians in 64 principal components (2-level pyramid).
# Then today.py trains both sides on each for every attribute (appends to today.csv). With
# BASELINE=<commit>, that commit's vocab (built in a worktree under /tmp) runs as a third side,
# "vocab-<commit>", in the same run.
# usage: eval/svm_bench/today.sh [photos dir]    (the venv: eval/setup-venv.sh; SETS to pick)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=$(realpath "${1:-$root/../shared/datasets/scene15-train}")
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
sides=()
if [ -n "${BASELINE:-}" ]; then
  base=/tmp/vocab-baseline-$BASELINE
  [ -d "$base" ] || git -C "$root" worktree add --detach "$base" "$BASELINE"
  (cd "$base" && cargo build --release --quiet)
  sides=(--side "vocab-$BASELINE=$base/target/release/vocab")
fi
py="$root/eval/.venv/bin/python"
work="$here/work/today"; mkdir -p "$work"
labels="$photos/labels.csv"
"$py" - "$labels" "$work" <<'PY'
import csv, sys
import numpy as np
rows = list(csv.DictReader(open(sys.argv[1])))
rng = np.random.default_rng(1)
train = set()
for c in sorted({r["class"] for r in rows}):
    paths = sorted(r["path"] for r in rows if r["class"] == c)
    train.update(rng.choice(paths, 50, replace=False))
with open(f"{sys.argv[2]}/split.csv", "w") as f:
    f.write("path,split\n")
    for r in rows:
        f.write(f"{r['path']},{'train' if r['path'] in train else 'test'}\n")
with open(f"{sys.argv[2]}/train.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(r for r in rows if r["path"] in train)
PY
q() { "$vocab" --quiet "$@" > /dev/null; }
[ -f "$work/sample.bin" ] || q features --input "$photos" --labels "$work/train.csv" --per-image 200 --seed 1 --out "$work/sample.bin"
for k in 64 1024 4096; do
  [ -f "$work/v$k.bin" ] || q kmeans --features "$work/sample.bin" --k $k --iterations 20 --seed 1 --kernel int8 --out "$work/v$k.bin"
done
[ -f "$work/g64.json" ] || q mixture --features "$work/sample.bin" --components 64 --pca-dims 64 --seed 1 --out "$work/g64.json"
enc() { [ -f "$work/$1.bin" ] || q encode --input "$photos" --labels "$labels" --stride 8 --out "$work/$1.bin" "${@:2}"; }
enc k1024 --vocabulary "$work/v1024.bin" --norm l1 --pyramid 3 --soft 5 --kernel int8
enc k4096 --vocabulary "$work/v4096.bin" --norm l1 --pyramid 3 --soft 5 --kernel int8
enc vlad64 --vocabulary "$work/v64.bin" --method vlad --pyramid 2 --soft 5 --kernel int8
enc fisher64 --vocabulary "$work/g64.json" --method fisher --pyramid 2
for set in ${SETS:-k1024 k4096 vlad64 fisher64}; do
  map=none; case $set in k*) map=chi2;; esac
  "$py" "$here/today.py" "$set" "$work/$set.bin" "$labels" "$work/split.csv" --map $map \
    --attributes class,urbanicity,elevation "${sides[@]}"
done
