#!/usr/bin/env bash
# The approximate search's lists by the integer kernel (issue 51, items 1 and 2), side by side
# with the build before it (BEFORE, default d127db2, built in a worktree) in one run.
#   blobs: k = 262,144 on 600,000 blob vectors (`vocab datasets synth --n 600000 --clusters
#          65536`), 2 iterations from one random start: the build before (f32 lists), this
#          build with f32 lists, with int8 lists, and with int8 lists capped to the AVX2 build
#          (VOCAB_MAX_ISA=avx2).
#   paper: the paper-scale run of run.sh (7,425,000 x 512 u8 into k = 1,048,576, 1,024 lists,
#          8 probed): this build with int8 lists (2 iterations), the same capped to AVX2
#          (1 iteration), and the build before (f32 lists, 1 iteration).
#   probes: the paper set's int8 run with 12 lists probed instead of 8 (after paper).
#   coarse: the paper set's int8 run, 1 iteration, native and capped to AVX2, this build (coarse
#           centres by the integer kernel) against BEFORE (run it with BEFORE=0b174c8, the f32
#           coarse search), in results/lists/coarse.csv.
#   pair:   the same run capped to AVX2 only, this build (two quads a widening in the AVX2
#           kernel) against BEFORE (run it with BEFORE=c8669a1), in results/lists/pair.csv.
#   blobs-avx2: the blobs set on the AVX2 build alone, side by side: the build before (d127db2, f32
#           lists) and this build (int8 lists), both capped with VOCAB_MAX_ISA=avx2, alternating
#           over 2 rounds, in results/lists/blobs-avx2.csv (or TAG.csv, its runs named TAG-...).
#   bytes:  the paper set's int8 run, 1 iteration, native and capped to AVX2, this build (u8 rows
#           whose bytes fit are their own codes) against BEFORE (run it with BEFORE=cc8c56c), in
#           results/lists/bytes.csv.
#   balance: even lists and 10 probes (run it with BEFORE=8f60cad): blobs on the AVX2 build
#           against d127db2 at 10 and 12 probes, alternating, in results/lists/balance-blobs.csv;
#           the paper set against BEFORE, native and capped to AVX2, in balance-paper.csv.
#   recall: the paper set's int8 run, 2 iterations, native, 10 probes: the exact nearest word
#           after the second iteration, in results/lists/recall-p10.csv (recall.csv: the run at
#           8 probes with the coarse search by the integer kernel, before the even lists).
# Results: results/lists/<run>/ (log, time -v, .meta.toml, iterations CSV), results/lists/<set>.csv
# and the table in README.md. usage: eval/paper_scale/lists.sh [blobs] [paper] [probes] [coarse] [pair] [blobs-avx2] [bytes] [balance] [recall]
# (WORK=dir for the data, default eval/paper_scale/work; the paper set needs about 20 GB while
# its partitions are made.)
set -euo pipefail
# A failed build or run inside $(...) stops the script too (not a stale row in a CSV).
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${WORK:-$here/work}
before=${BEFORE:-d127db2}
out="$here/results/lists"
mkdir -p "$work" "$out"
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
# built REV: the path of REV's release binary, built once in a worktree under /tmp.
built() {
  local tree=/tmp/vocab-before-$1
  if [ ! -x "$tree/target/release/vocab" ]; then
    rm -rf "$tree"
    git -C "$root" worktree add --force --detach "$tree" "$1" >/dev/null
    (cd "$tree" && cargo build --release --quiet)
  fi
  echo "$tree/target/release/vocab"
}
old=$(built "$before")
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$out/machine.txt"

# run NAME BINARY ISA-CAP FEATURES K ITERATIONS KERNEL: one k-means run, timed; its row of the CSV.
run() {
  local name=$1 bin=$2 cap=$3 features=$4 k=$5 iterations=$6 kernel=$7 probes=${8:-8}
  local dir="$out/$name"
  mkdir -p "$dir"
  local flags=(--assign approx --probes "$probes")
  [ "$kernel" = f32 ] || flags+=(--kernel "$kernel")
  env ${cap:+VOCAB_MAX_ISA=$cap} /usr/bin/time -v "$bin" kmeans --features "$features" --k "$k" \
    --iterations "$iterations" --tol 0 --init random "${flags[@]}" --out "$work/$name.bin" \
    --quiet >"$dir/log.txt" 2>"$dir/time.txt"
  cp "$work/$name.bin.meta.toml" "$work/$name.bin.iterations.csv" "$dir/"
  rm -rf "$work/$name.bin" "$work/$name.bin.ckpt"
  local peak exact gap worst seconds
  peak=$(awk '/Maximum resident/ {printf "%.2f", $6 / 1048576}' "$dir/time.txt")
  exact=$(awk -F' = ' '/^exact = / {e=$2} /^sample = / {s=$2} END {printf "%.4f", e / s}' "$dir/$name.bin.meta.toml")
  gap=$(awk -F' = ' '/^approx_inertia/ {a=$2} /^exact_inertia/ {e=$2} END {printf "%.4f", a / e - 1}' "$dir/$name.bin.meta.toml")
  seconds=$(awk -F, 'NR > 1 {printf "%s%.1f", sep, $3; sep=";"}' "$dir/$name.bin.iterations.csv")
  worst=$(awk -F, 'NR > 1 && $3 > w {w=$3} END {printf "%.1f", w}' "$dir/$name.bin.iterations.csv")
  echo "$name,$kernel,${cap:-native},$seconds,$worst,$exact,$gap,$peak"
}

header="run,lists kernel,isa,seconds per iteration,worst iteration s,exact nearest,inertia gap,peak GB"

# beside NAME: the paper set's int8 run, 1 iteration, BEFORE then this build, native then
# capped to AVX2; in results/lists/NAME.csv.
beside() {
  local name=$1
  {
    echo "$header"
    run "$name-before-int8" "$old" "" "$work/parts" 1048576 1 int8
    run "$name-int8" "$vocab" "" "$work/parts" 1048576 1 int8
    run "$name-before-int8-avx2" "$old" avx2 "$work/parts" 1048576 1 int8
    run "$name-int8-avx2" "$vocab" avx2 "$work/parts" 1048576 1 int8
  } | tee "$out/$name.csv"
}
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(blobs paper)
for set in "${sets[@]}"; do
    case $set in
    blobs)
      features="$work/blobs65k.bin"
      [ -f "$features" ] || "$vocab" datasets synth --n 600000 --clusters 65536 --seed 1 \
        --out "$features" --quiet
      {
        echo "$header"
        run blobs-before-f32 "$old" "" "$features" 262144 2 f32
        run blobs-f32 "$vocab" "" "$features" 262144 2 f32
        run blobs-int8 "$vocab" "" "$features" 262144 2 int8
        run blobs-int8-avx2 "$vocab" avx2 "$features" 262144 2 int8
      } | tee "$out/blobs.csv"
      ;;
    paper)
      parts="$work/parts"
      if [ ! -f "$parts/manifest.toml" ]; then
        "$vocab" features --input "$root/../shared/datasets/scene15-train" --mode random \
          --per-image 4950 --seed 1 --out "$work/features.bin" --quiet
        "$vocab" partition --features "$work/features.bin" --parts 64 --element u8 \
          --out "$parts" --quiet
        rm -f "$work/features.bin"
      fi
      {
        echo "$header"
        run paper-int8 "$vocab" "" "$parts" 1048576 2 int8
        run paper-int8-avx2 "$vocab" avx2 "$parts" 1048576 1 int8
        run paper-before-f32 "$old" "" "$parts" 1048576 1 f32
      } | tee "$out/paper.csv"
      ;;
    probes)
      # More lists a vector (toward 95% exact nearest words), on the paper set's partitions.
      {
        echo "$header"
        run paper-int8-probes12 "$vocab" "" "$work/parts" 1048576 2 int8 12
      } | tee "$out/probes.csv"
      ;;
    coarse)
      # The coarse search by the integer kernel against the build before it, on the paper set.
      beside coarse
      ;;
    pair)
      # The AVX2 kernel's two quads a widening against the build before it (that one first).
      {
        echo "$header"
        run pair-before-int8-avx2 "$old" avx2 "$work/parts" 1048576 1 int8
        run pair-int8-avx2 "$vocab" avx2 "$work/parts" 1048576 1 int8
      } | tee "$out/pair.csv"
      ;;
    blobs-avx2)
      # The blobs goal (the worst iteration at least 2x faster than the build before issue 51)
      # on the AVX2 build, measured side by side instead of by chained ratios.
      features="$work/blobs65k.bin"
      [ -f "$features" ] || "$vocab" datasets synth --n 600000 --clusters 65536 --seed 1 \
        --out "$features" --quiet
      tag=${TAG:-blobs-avx2}
      {
        echo "$header"
        for round in 1 2; do
          run "$tag-before-f32-$round" "$old" avx2 "$features" 262144 2 f32
          run "$tag-int8-$round" "$vocab" avx2 "$features" 262144 2 int8
        done
      } | tee "$out/$tag.csv"
      ;;
    bytes)
      # u8 rows as their own codes (run it with BEFORE=cc8c56c, rows quantised from their
      # decoded values), the paper set, native and capped to AVX2, one iteration each.
      beside bytes
      ;;
    recall)
      # Two iterations of this build at 10 probes (its default since the even lists), for the
      # exact nearest word after the second (results/lists/recall.csv holds the run at 8).
      {
        echo "$header"
        run recall-int8-p10 "$vocab" "" "$work/parts" 1048576 2 int8 10
      } | tee "$out/recall-p10.csv"
      ;;
    balance)
      # Even lists and 10 probes a vector (run it with BEFORE=8f60cad, the uneven lists and 8
      # probes). Blobs on the AVX2 build: d127db2 (the build before issue 51, f32 lists, 8
      # probes) against this build at 10 probes (its default) and 12, alternating over 2
      # rounds; then the paper set, 1 iteration, BEFORE at 8 probes against this build at 10,
      # native then capped to AVX2. In results/lists/balance-blobs.csv and balance-paper.csv.
      features="$work/blobs65k.bin"
      [ -f "$features" ] || "$vocab" datasets synth --n 600000 --clusters 65536 --seed 1 \
        --out "$features" --quiet
      first=$(built d127db2)
      {
        echo "$header,probes"
        for round in 1 2; do
          row=$(run "balance-blobs-d127db2-$round" "$first" avx2 "$features" 262144 2 f32 8); echo "$row,8"
          row=$(run "balance-blobs-p10-$round" "$vocab" avx2 "$features" 262144 2 int8 10); echo "$row,10"
          row=$(run "balance-blobs-p12-$round" "$vocab" avx2 "$features" 262144 2 int8 12); echo "$row,12"
        done
      } | tee "$out/balance-blobs.csv"
      {
        echo "$header,probes"
        row=$(run balance-paper-before "$old" "" "$work/parts" 1048576 1 int8 8); echo "$row,8"
        row=$(run balance-paper-p10 "$vocab" "" "$work/parts" 1048576 1 int8 10); echo "$row,10"
        row=$(run balance-paper-before-avx2 "$old" avx2 "$work/parts" 1048576 1 int8 8); echo "$row,8"
        row=$(run balance-paper-p10-avx2 "$vocab" avx2 "$work/parts" 1048576 1 int8 10); echo "$row,10"
      } | tee "$out/balance-paper.csv"
      ;;
    *) echo "unknown set $set (blobs, paper, probes, coarse, pair, blobs-avx2, bytes, balance, recall)" >&2; exit 2 ;;
    esac
done
