#!/usr/bin/env bash
# JPEG decoding, vocab's decoder (libjpeg-turbo's, through mozjpeg) against the image crate's,
# timed side by side in one run, with every photo's luminance checked against Pillow's and
# OpenCV's decode. Writes results.{csv,md} beside this script.
# usage: eval/jpeg_decode/run.sh [--photos DIR] [--repeat R]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet -p vocab-pipeline --example jpeg_decode)
exec "$python" "$here/run.py" --decoder "$root/target/release/examples/jpeg_decode" \
  --photos "$root/../shared/datasets/scene15-train" \
  --extra "$root/eval/hog_parity/fixtures/jpeg" "$@"
