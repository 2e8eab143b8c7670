#!/usr/bin/env bash
# Approximate k-means at very large k (issue 16), two runs, each timed with its peak memory:
#   blobs: k = 262,144 on 600,000 synthetic blob vectors (`vocab datasets synth`, 64 blobs),
#          approximate and (for the first iterations) exact assignment, from one random start;
#   hog:   k = 1,048,576 on dense 512-d HOG of every scene15-train photo at stride 8
#          (about 1.16M vectors, u8 partitions), approximate.
#   blobs-exact: one exact iteration of the blobs run (int8 kernel), for the side-by-side time.
# usage: eval/million/run.sh [blobs|hog|blobs-exact ...]  (default: blobs hog). Results: results/<run>/ (logs,
# iterations CSV, .meta.toml with the recall check, time -v output) and machine.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
work="$here/work"
mkdir -p "$work" "$here/results"
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/machine.txt"
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(blobs hog)

timed() { # name, then the command
  local name=$1; shift
  local out="$here/results/$name"
  mkdir -p "$out"
  /usr/bin/time -v "$@" >"$out/log.txt" 2>"$out/time.txt"
  grep -E "Maximum resident|Elapsed" "$out/time.txt"
}

for run in "${runs[@]}"; do
  case $run in
  blobs)
    [ -f "$work/blobs.bin" ] || "$vocab" datasets synth --n 600000 --seed 1 --out "$work/blobs.bin" --quiet
    timed blobs-approx "$vocab" kmeans --features "$work/blobs.bin" --k 262144 --iterations 5 \
      --tol 0 --init random --assign approx --out "$work/blobs-approx.bin" --quiet
    cp "$work/blobs-approx.bin.meta.toml" "$work/blobs-approx.bin.iterations.csv" \
      "$here/results/blobs-approx/"
    ;;
  blobs-exact)
    # One exact iteration (int8 kernel, the fastest exact full pass) from the same start.
    timed blobs-exact "$vocab" kmeans --features "$work/blobs.bin" --k 262144 --iterations 1 \
      --tol 0 --init random --kernel int8 --out "$work/blobs-exact.bin" --quiet
    cp "$work/blobs-exact.bin.meta.toml" "$work/blobs-exact.bin.iterations.csv" \
      "$here/results/blobs-exact/"
    ;;
  hog)
    if [ ! -f "$work/hog/manifest.toml" ]; then
      "$vocab" features --input "$root/../shared/datasets/scene15-train" --mode dense --stride 8 \
        --out "$work/hog.bin" --quiet
      "$vocab" partition --features "$work/hog.bin" --parts 16 --element u8 --out "$work/hog" --quiet
      rm -f "$work/hog.bin"
    fi
    timed hog-approx "$vocab" kmeans --features "$work/hog" --k 1048576 --iterations 3 --tol 0 \
      --init random --assign approx --out "$work/hog-approx.bin" --quiet
    cp "$work/hog-approx.bin.meta.toml" "$work/hog-approx.bin.iterations.csv" "$here/results/hog-approx/"
    ;;
  *) echo "unknown run $run (blobs, hog, blobs-exact)" >&2; exit 2 ;;
  esac
done
