#!/usr/bin/env bash
# How long a clean clone takes to build its tests (`cargo test --workspace --no-run`), for two
# revisions side by side: BEFORE, AFTER, BEFORE again (each a fresh clone of this repository and
# its own target directory; the crates already downloaded), alone on the machine.
# usage: eval/build/test_build.sh [BEFORE [AFTER]]   (default: e6122a7, full debug info in
#        tests, against 9fd0975, line tables only)
# writes test-build.csv (run, revision, wall s, user s, system s) and machine.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
before=${1:-e6122a7} after=${2:-9fd0975}
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } > "$here/machine.txt"
echo "run,revision,wall_s,user_s,system_s" > "$here/test-build.csv"
run=0
for rev in "$before" "$after" "$before"; do
  run=$((run + 1))
  tree=$(mktemp -d)
  git clone -q "$root" "$tree" && git -C "$tree" checkout -q "$rev"
  times=$( (cd "$tree" && /usr/bin/time -f "%e,%U,%S" cargo test --workspace --no-run -q 2>&1 >/dev/null) | tail -1)
  echo "$run,$rev,$times" | tee -a "$here/test-build.csv"
  rm -rf "$tree"
done
