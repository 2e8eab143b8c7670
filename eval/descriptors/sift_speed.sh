#!/usr/bin/env bash
# Dense SIFT of the 1,500 development photos, side by side in one run, alone on the machine:
# OpenCV's SIFT (make_sift.py, one process: OpenCV's threads set to 1) and vocab's own
# (vocab_pipeline::sift through the dense_sift example) on 1 and 2 threads. Both write every
# photo's .npy file (to a scratch folder removed after), so each time is decode, describe and
# write. Runs the three ROUNDS times, OpenCV first in odd rounds and last in even ones (the first
# run of a round may meet a colder cache).
# usage: eval/descriptors/sift_speed.sh   (ROUNDS, default 2)
# writes sift-speed.csv (round,tool,threads,photos,descriptors,seconds); prints the CPU and its
# vector instruction sets
set -euo pipefail
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos=$(realpath "$root/../shared/datasets/scene15-train")
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet -p vocab-pipeline --example dense_sift)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
out="$here/sift-speed.csv"
echo "round,tool,threads,photos,descriptors,seconds" > "$out"
lscpu | grep -E "Model name|^CPU\(s\)" >&2
echo "instruction sets: $(grep -o -w -E 'avx2|avx512f|avx512_vnni' /proc/cpuinfo | sort -u | xargs)" >&2
# Parses "tool: N photos, ... M descriptors in S s" from a tool's last line.
row() { sed -n 's/.*: \([0-9]*\) photos,.* \([0-9]*\) descriptors in \([0-9.]*\) s.*/\1,\2,\3/p'; }
# One run of a tool: its CSV row, or a failure naming the tool when it printed no summary.
opencv() {
  rm -rf "$scratch/o"
  line=$("$python" "$here/make_sift.py" "$photos" "$scratch/o" --step 6 --size 4,7 --root --upright 2>&1 | tail -1)
  parsed=$(echo "$line" | row)
  [ -n "$parsed" ] || { echo "sift_speed.sh: make_sift.py ended with: $line" >&2; exit 1; }
  echo "$1,opencv,1,$parsed" >> "$out"
}
vocab() {
  rm -rf "$scratch/v"
  line=$(RAYON_NUM_THREADS=$2 "$root/target/release/examples/dense_sift" "$photos" "$scratch/v" 6 24,42 2>&1 | tail -1)
  parsed=$(echo "$line" | row)
  [ -n "$parsed" ] || { echo "sift_speed.sh: dense_sift ended with: $line" >&2; exit 1; }
  echo "$1,vocab,$2,$parsed" >> "$out"
}
for r in $(seq 1 "${ROUNDS:-2}"); do
  if [ $((r % 2)) -eq 1 ]; then
    opencv "$r"; vocab "$r" 1; vocab "$r" 2
  else
    vocab "$r" 2; vocab "$r" 1; opencv "$r"
  fi
  tail -3 "$out" >&2
done
