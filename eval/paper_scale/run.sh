#!/usr/bin/env bash
# The paper's k-means at its own scale on one machine (issue 36): 7.42M random 512-d HOG patches
# of scene15-train (4,950 a photo), stored as u8 partitions (held as codes), into k = 1,048,576
# words with approximate assignment, 2 iterations; the recall check against exact assignment is
# the run's own (`[recall]` in the .meta.toml). Each step timed with its peak memory (time -v).
# Then (exact) the exact full pass at k = 1,048,576 on a slice of the vectors (the first ROWS,
# default 10,000), against that vocabulary: vocab's int8 and f32 kernels (`vocab bench assign`),
# faiss's flat search on the same rows (faiss_slice.py, eval/.venv), and the machine's peak
# multiply-adds per second on every core (f32 FMA and the int8 kernel's AVX2 pair
# `vpmaddubsw` + `vpmaddwd`: examples/isa_peak.rs).
# usage: eval/paper_scale/run.sh [kmeans] [exact]   (default both; VOCAB=binary to use a build
# other than target/release/vocab, WORK=dir for the 19 GB of intermediate data, default
# eval/paper_scale/work, not committed)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab=${VOCAB:-$root/target/release/vocab}
[ -n "${VOCAB:-}" ] || (cd "$root" && cargo build --release --quiet)
work=${WORK:-$here/work}
photos=$root/../shared/datasets/scene15-train
mkdir -p "$work" "$here/results"
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/machine.txt"

timed() { # name, then the command; output in results/<name>/
  local name=$1; shift
  local out="$here/results/$name"
  mkdir -p "$out"
  /usr/bin/time -v "$@" >"$out/log.txt" 2>"$out/time.txt"
  grep -E "Maximum resident|Elapsed" "$out/time.txt"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(kmeans exact)
rows=${ROWS:-10000}
for step in "${steps[@]}"; do
case $step in
kmeans)
if [ ! -f "$work/parts/manifest.toml" ]; then
  timed features "$vocab" features --input "$photos" --mode random --per-image 4950 --seed 1 \
    --out "$work/features.bin" --quiet
  timed partition "$vocab" partition --features "$work/features.bin" --parts 64 --element u8 \
    --out "$work/parts" --quiet
  rm -f "$work/features.bin"
fi
timed kmeans "$vocab" kmeans --features "$work/parts" --k 1048576 --iterations 2 --tol 0 \
  --init random --assign approx --out "$work/paper.bin" --quiet
cp "$work/paper.bin.meta.toml" "$work/paper.bin.iterations.csv" "$here/results/kmeans/"
;;
exact)
  out="$here/results/exact"
  mkdir -p "$out"
  "$vocab" bench assign --features "$work/parts" --vocabulary "$work/paper.bin" --rows "$rows" \
    --kernel int8,f32 | tee "$out/vocab.csv"
  python=$("$root/eval/setup-venv.sh")
  "$python" "$here/faiss_slice.py" "$work/parts" "$work/paper.bin" "$rows" | tee "$out/faiss.csv"
  (cd "$root" && cargo run --release --quiet -p vocab-pipeline --example isa_peak -- "$(nproc)") \
    | tee "$out/peak.csv"
  ;;
*) echo "unknown step $step (kmeans, exact)" >&2; exit 2 ;;
esac
done
