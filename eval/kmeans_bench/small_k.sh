#!/usr/bin/env bash
# Small k on AVX2 (issue 51, item 4): vocab's int8 k-means against faiss at k = 1,024 on 40,000
# x 512 blob vectors, side by side in one run (small_k.py says what runs). With BEFORE=<commit>
# the build of that commit (in a worktree under /tmp) runs beside this one in every round.
# Writes small-k.csv and small-k.md (or NAME.csv, NAME.md) beside this script, with lscpu in
# small-k-machine.txt. With PROFILE=1 it then records `perf` over 30 iterations of the int8 full
# pass capped to AVX2 and writes the functions' shares to NAME-profile.txt.
# usage: [BEFORE=commit] [NAME=small-k] [PROFILE=1] eval/kmeans_bench/small_k.sh [small_k.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
extra=()
if [ -n "${BEFORE:-}" ]; then
  tree=/tmp/vocab-before-$BEFORE
  if [ ! -x "$tree/target/release/vocab" ]; then
    rm -rf "$tree"
    git -C "$root" worktree add --force --detach "$tree" "$BEFORE" >/dev/null
    (cd "$tree" && cargo build --release --quiet)
  fi
  extra+=(--before "$tree/target/release/vocab")
fi
name=${NAME:-small-k}
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/$name-machine.txt"
cd "$here"
"$python" "$here/small_k.py" --vocab "$root/target/release/vocab" --name "$name" "${extra[@]}" "$@"
if [ "${PROFILE:-0}" = 1 ]; then
  perf_data=$(mktemp)
  VOCAB_MAX_ISA=avx2 perf record -o "$perf_data" --quiet -- "$root/target/release/vocab" --quiet \
    --threads 2 kmeans --features work/synth-40000-c64.bin --k 1024 --iterations 30 --tol 0 \
    --init-centroids work/small-k-init-1024.txt --kernel int8 --out work/small-k-profile.bin >/dev/null
  { echo "# perf record, 30 iterations of vocab kmeans --kernel int8 (VOCAB_MAX_ISA=avx2), k = 1,024,"
    echo "# 40,000 x 512 blobs, 2 threads; the data's load (crc32) included. Functions above 0.5%:"
    perf report -i "$perf_data" --no-children --stdio 2>/dev/null |
      awk '/^ +[0-9.]+%/ && $1 + 0 >= 0.5 {print $1, $5}'
  } >"$here/$name-profile.txt"
  rm -f "$perf_data"
fi
