#!/usr/bin/env bash
# Pruning by default with the int8 kernel (issue 51): the int8 full pass (`--prune false`)
# against its pruned steps (`--prune`, the default since), beside faiss, over runs of 20
# iterations, at the CPU's widest build and capped to AVX2, ROUNDS alternating rounds
# (small_k.py runs them). On real HOG: 100 random patches of each scene15-train photo (150,000
# x 512, made once into work/hog-150k.bin) at k = 1,024 and 4,096; and on the 40,000 blob
# vectors of small_k.sh at k = 1,024. Writes pruning-default-{hog1024,hog4096,blobs}.{csv,md}.
# usage: eval/kmeans_bench/pruning_default.sh [photos dir]   (env ROUNDS, default 3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=${1:-$root/../shared/datasets/scene15-train}
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
vocab=$root/target/release/vocab
mkdir -p "$here/work"
hog=$here/work/hog-150k.bin
[ -f "$hog" ] || "$vocab" --quiet features --input "$photos" --per-image 100 --seed 0 --out "$hog" >/dev/null
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/pruning-default-machine.txt"
cd "$here"
rounds=${ROUNDS:-3}
for k in 1024 4096; do
  "$python" small_k.py --vocab "$vocab" --data "$hog" --k "$k" --iterations 20 --rounds "$rounds" \
    --name "pruning-default-hog$k"
done
"$python" small_k.py --vocab "$vocab" --iterations 20 --rounds "$rounds" --name pruning-default-blobs
