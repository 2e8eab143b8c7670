#!/usr/bin/env bash
# Encoding with the million-word vocabulary of run.sh's hog run (issue 16): scene15-train photos,
# dense patches every 16 px, each to its word by the approximate search against the exact search
# (int8 kernel), side by side on 30 photos (every 50th), then the approximate search on 300
# (every 5th; dense histograms of a million words are 4 MB a photo, so all 1,500 would be a
# 6.3 GB file). Writes results/encode/ (logs, time -v, compare.csv) beside this script.
# usage: eval/million/encode.sh   (after run.sh hog; VOCAB=/path/to/vocab uses that build instead
# of building target/release/vocab)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
photos="$root/../shared/datasets/scene15-train"
if [ -z "${VOCAB:-}" ]; then (cd "$root" && cargo build --release --quiet); fi
vocab=${VOCAB:-$root/target/release/vocab}
work="$here/work" out="$here/results/encode"
mkdir -p "$out"
vocabulary="$work/hog-approx.bin"
[ -f "$vocabulary" ] || { echo "run eval/million/run.sh hog first" >&2; exit 2; }
awk -F, 'NR == 1 || (NR - 2) % 50 == 0' "$photos/labels.csv" >"$work/subset.csv"
awk -F, 'NR == 1 || (NR - 2) % 5 == 0' "$photos/labels.csv" >"$work/subset-300.csv"
timed() { # name, then the command
  local name=$1; shift
  /usr/bin/time -v "$@" >"$out/$name.log" 2>"$out/$name.time"
  grep -E "Maximum resident|Elapsed" "$out/$name.time"
}
common=(--vocabulary "$vocabulary" --input "$photos" --stride 16)
timed exact-30 "$vocab" --quiet encode "${common[@]}" --labels "$work/subset.csv" --kernel int8 \
  --out "$work/exact-30.csv"
timed approx-30 "$vocab" --quiet encode "${common[@]}" --labels "$work/subset.csv" \
  --assign approx --out "$work/approx-30.csv"
timed approx-300 "$vocab" --quiet encode "${common[@]}" --labels "$work/subset-300.csv" \
  --assign approx --out "$work/approx-300.bin"
rm -f "$work/approx-300.bin"
# Histogram agreement on the subset: the share of each photo's patches counted under the same
# words (1 - L1 distance / 2 of the L1-normalised histograms).
python3 - "$work/exact-30.csv" "$work/approx-30.csv" "$out/compare.csv" <<'PY'
import csv, sys
def rows(path):
    with open(path) as f:
        return {r[1]: [float(v) for v in r[2:]] for r in csv.reader(f) if r and r[0] != "picture_id"}
exact, approx = rows(sys.argv[1]), rows(sys.argv[2])
with open(sys.argv[3], "w", newline="") as out:
    w = csv.writer(out)
    w.writerow(["path", "agreement"])
    shares = []
    for path, e in sorted(exact.items()):
        a = approx[path]
        share = 1 - sum(abs(x - y) for x, y in zip(e, a)) / 2
        shares.append(share)
        w.writerow([path, f"{share:.4f}"])
print(f"{len(shares)} photos: mean agreement {sum(shares) / len(shares):.4f}, lowest {min(shares):.4f}")
PY
