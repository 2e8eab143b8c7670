# Sourced by pruning.sh and kernels.sh: builds vocab (release) and sets `here`, `root`, `vocab`,
# `work`, `synth` (the main benchmark's synthetic set, 200,000 x 512, made if missing) and `hog`
# (150,000 random HOG patches of scene15-train, made by eval/accuracy/run.sh; may be absent).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab=$root/target/release/vocab
(cd "$root" && cargo build --release --quiet)
work=$here/work
mkdir -p "$work"
synth=$work/synth-200000.bin
[ -f "$synth" ] || "$vocab" datasets synth --n 200000 --dims 512 --clusters 256 --seed 0 --out "$synth"
hog=$root/eval/accuracy/work/sample.bin
