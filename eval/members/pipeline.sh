#!/usr/bin/env bash
# `vocab run` on 125 members (issue 36): the quickstart's synthetic photos (48, 60 patches a
# training photo, 125 partitions, k = 8 and 32) on one process, on 125 loopback TCP workers
# ([kmeans] nodes = 125) and on 125 MPI ranks (mpirun --oversubscribe); every vocabulary,
# histogram file and the accuracy table compared with the one process's, byte for byte.
# usage: eval/members/pipeline.sh   (VOCAB=binary built with --features mpi) -> pipeline.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab=${VOCAB:-$root/target/release/vocab}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sed 's/^per_image = 20 .*/per_image = 60/; s/^parts = 8 .*/parts = 125/; s/^k = \[8, 32, 128\].*/k = [8, 32]/; s/^nodes = 2 .*/nodes = 0/' \
  "$root/configs/quickstart.toml" >"$work/one.toml"
sed 's/^nodes = 0/nodes = 125/' "$work/one.toml" >"$work/tcp.toml"
cd "$work"
{
  for run in one tcp mpi; do
    start=$(date +%s.%N)
    case $run in
    one) "$vocab" run one.toml --work one --quiet >/dev/null ;;
    tcp) "$vocab" run tcp.toml --work tcp --quiet >/dev/null ;;
    mpi) mpirun --oversubscribe -n 125 "$vocab" run one.toml --work mpi --engine mpi --quiet >/dev/null ;;
    esac
    echo "$run: vocab run in $(printf %.1f "$(echo "$(date +%s.%N) - $start" | bc)") s"
  done
  for run in tcp mpi; do
    for f in $(cd one && find kmeans encode -name '*.bin' -type f | sort) report/accuracy.csv; do
      cmp -s "one/$f" "$run/$f" && echo "$run: same $f" || echo "$run: DIFFERENT $f"
    done
  done
} | tee "$here/pipeline.txt"
