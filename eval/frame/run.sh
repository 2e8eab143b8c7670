#!/usr/bin/env bash
# The frame's before and after (issue 35), side by side in one run on this machine: the code at
# REV (default 5f39c3a, the last commit before the frame's changes) and the working tree, both
# built in release with MPI. Measures, alternating versions:
#   - k-means seconds per iteration at k = 16,384 (int8 kernel, 3 iterations, random init) on
#     201,000 real HOG vectors (134 random patches per scene15-train photo, 8 partitions): one
#     process, 2 loopback TCP workers, 2 MPI ranks;
#   - the quickstart's outputs' checksums (vocabularies, histograms, encoding records, models,
#     accuracies);
#   - `vocab run configs/scene15.toml` per-stage seconds.
# Writes kmeans.csv, quickstart.csv, scene15.csv, machine.txt and results.md beside this script.
# Model files and encoding records name their vocabulary's and split's paths, step keys
# included; the keys of runs on nodes changed with the frame (issue 35: keys no longer say where
# a step ran), so they are compared with the keys in those paths left out.
# usage: eval/frame/run.sh [REV]   (WORK=/tmp/frame-work by default; PHOTOS the photo folder;
# ONLY=kmeans|quickstart|scene15 runs one part, keeping the others' CSVs)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rev=${1:-5f39c3a}
work=${WORK:-/tmp/frame-work}
photos=${PHOTOS:-$root/../shared/datasets/scene15-train}
mkdir -p "$work"
cd "$root"

# Both versions, built the same way.
if [ ! -d "$work/before-src" ]; then
  git worktree add --detach "$work/before-src" "$rev" >/dev/null
fi
(cd "$work/before-src" && cargo build --release --features mpi --quiet)
cargo build --release --features mpi --quiet
declare -A bin=([before]="$work/before-src/target/release/vocab" [after]="$root/target/release/vocab")
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; echo "before: $rev"; echo "after: $(git rev-parse --short HEAD) (+ working tree)"; } >"$here/machine.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The data: real HOG vectors, partitioned (the same files for both versions).
if [ ! -f "$work/parts/manifest.toml" ]; then
  "${bin[after]}" features --input "$photos" --per-image 134 --seed 0 --out "$work/hog.bin" --quiet
  "${bin[after]}" partition --features "$work/hog.bin" --parts 8 --out "$work/parts"
fi

part() { [ -z "${ONLY:-}" ] || [ "$ONLY" = "$1" ]; }

# k-means on three backends.
part kmeans && {
echo "backend,version,iterations,seconds_per_iteration,final_inertia,vocabulary_sha256" >"$here/kmeans.csv"
for backend in local tcp2 mpi2; do
  for v in before after; do
    dir="$work/km-$backend-$v"
    rm -rf "$dir" && mkdir -p "$dir"
    args=(kmeans --features "$work/parts" --k 16384 --iterations 3 --tol 0 --seed 1 --init random
      --kernel int8 --out "$dir/vocab.bin" --quiet)
    case $backend in
      local) "${bin[$v]}" "${args[@]}" >"$dir/log" ;;
      tcp2) "${bin[$v]}" "${args[@]}" --local-nodes 2 >"$dir/log" ;;
      mpi2) mpirun --oversubscribe -n 2 "${bin[$v]}" "${args[@]}" --engine mpi >"$dir/log" ;;
    esac
    awk -F, -v b="$backend" -v v="$v" -v sha="$(sha256sum <"$dir/vocab.bin" | cut -c1-16)" \
      'NR > 1 { n++; s += $3; last = $2 } END { printf "%s,%s,%d,%.3f,%s,%s\n", b, v, n, s / n, last, sha }' \
      "$dir/vocab.bin.iterations.csv" >>"$here/kmeans.csv"
  done
done
}

# The quickstart, in the same folder for both (models record their vocabulary's path).
part quickstart && {
echo "file,version,sha256" >"$here/quickstart.csv"
for v in before after; do
  rm -rf "$work/qs"
  "${bin[$v]}" run configs/quickstart.toml --work "$work/qs" --quiet >"$work/qs-$v.log"
  (cd "$work/qs" && find . -name vocabulary.bin -o -name histograms.bin -o -name model.json \
      -o -name 'model.json.metrics.csv' -o -name accuracy.csv -o -name '*.encoding.json' | sort |
    while read -r f; do
      # Step folders by stage and label (their keys changed with the frame).
      case $f in
        *model.json | *.encoding.json) sum=$(sed -E 's/-[0-9a-f]{12}\//\//g' "$f" | sha256sum | cut -c1-16) ;;
        *) sum=$(sha256sum <"$f" | cut -c1-16) ;;
      esac
      echo "$(echo "$f" | sed -E 's/-[0-9a-f]{12}\//\//'),$v,$sum"
    done) >>"$here/quickstart.csv"
done
}

# The scene-classification run, per stage.
part scene15 && {
echo "version,stage,seconds" >"$here/scene15.csv"
for v in before after; do
  rm -rf "$work/s15-$v"
  "${bin[$v]}" run configs/scene15.toml --dataset "$photos" --work "$work/s15-$v" --quiet \
    >"$work/s15-$v.log"
  awk -F, -v v="$v" 'NR > 1 { s[$1] += $4 } END { for (k in s) printf "%s,%s,%.1f\n", v, k, s[k] }' \
    "$work/s15-$v/report/steps.csv" | sort -t, -k2 >>"$here/scene15.csv"
done
}

python3 "$here/table.py" "$here"
