#!/usr/bin/env bash
# Small k on AVX2 (issue 51, item 4): vocab's int8 k-means against faiss at k = 1,024 on 40,000
# x 512 blob vectors, side by side in one run (small_k.py says what runs). With BEFORE=<commit>
# the build of that commit (in a worktree under /tmp) runs beside this one in every round.
# Writes small-k.csv and small-k.md (or NAME.csv, NAME.md) beside this script, with lscpu in
# small-k-machine.txt. With PROFILE=1 it then records `perf` over 30 iterations of the int8 full
# pass capped to AVX2 on the same data and start (small_k.py --profile), the functions' shares in
# NAME-profile.txt.
# usage: [BEFORE=commit] [NAME=small-k] [PROFILE=1] eval/kmeans_bench/small_k.sh [small_k.py options]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
python=$("$root/eval/setup-venv.sh")
(cd "$root" && cargo build --release --quiet)
extra=()
if [ -n "${BEFORE:-}" ]; then
  tree=/tmp/vocab-before-$BEFORE
  if [ ! -x "$tree/target/release/vocab" ]; then
    rm -rf "$tree"
    git -C "$root" worktree add --force --detach "$tree" "$BEFORE" >/dev/null
    (cd "$tree" && cargo build --release --quiet)
  fi
  extra+=(--before "$tree/target/release/vocab")
fi
name=${NAME:-small-k}
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/$name-machine.txt"
cd "$here"
profile=()
[ "${PROFILE:-0}" = 1 ] && profile=(--profile)
exec "$python" "$here/small_k.py" --vocab "$root/target/release/vocab" --name "$name" "${extra[@]}" "${profile[@]}" "$@"
