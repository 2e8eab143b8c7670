#!/usr/bin/env bash
# Side-by-side HOG throughput (vocab vs scikit-image vs OpenCV); writes results.{csv,md} and
# machine.json beside this script. usage: eval/hog_bench/run.sh [--photos DIR] [--repeat R]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
exec "$python" "$here/run.py" --vocab "$root/target/release/vocab" \
  --photos "$root/../shared/datasets/scene15-train" "$@"
