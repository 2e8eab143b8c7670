#!/usr/bin/env bash
# Side-by-side k-means (vocab vs faiss-cpu vs scikit-learn); writes results.{csv,md} and
# machine.json beside this script. usage: eval/kmeans_bench/run.sh [run.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
exec "$python" "$here/run.py" --vocab "$root/target/release/vocab" "$@"
