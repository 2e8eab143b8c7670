#!/usr/bin/env bash
# Exact k-means at large k on real HOG: vocab's four assignments against faiss, side by side, same
# data and initial centroids. Writes results.csv, results.md, iterations.csv and machine.txt
# beside this script. usage: eval/large_k/run.sh [run.py options, e.g. --ks 16384,65536]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; } >"$here/machine.txt"
exec "$python" "$here/run.py" --vocab "$root/target/release/vocab" \
  --photos "$root/../shared/datasets/scene15-train" "$@"
