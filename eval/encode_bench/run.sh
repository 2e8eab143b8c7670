#!/usr/bin/env bash
# Dense encoding throughput, vocab against a reference pipeline (OpenCV decode + OpenCV HOG +
# faiss search, one process per core), side by side in one run on the same photos and the same
# vocabulary. Writes results.{csv,md} beside this script.
# usage: eval/encode_bench/run.sh [--photos DIR] [--k K] [--repeat R]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
exec "$python" "$here/run.py" --vocab "$root/target/release/vocab" \
  --photos "$root/../shared/datasets/scene15-train" "$@"
