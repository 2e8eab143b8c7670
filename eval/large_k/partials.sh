#!/usr/bin/env bash
# One node's partial sums held sparse, dense per map task and dense shared, side by side in one
# run (`vocab bench partials`: accumulation, stage-1 merge, stage-2 encoding of the other nodes'
# ranges; every form checked to give the same sums). Shapes:
#   node of the emulated cluster (cluster.sh): k = 65,536, 50,250 vectors, 2 tasks, 4 nodes;
#   node of the paper (7.42M vectors on 125 nodes): k = 1,048,576, 59,360 vectors, 2 tasks
#   (vocab: one per thread) and 80 tasks (Twister's 742 vectors a map task).
# Writes partials.csv and partials.md beside this script. usage: eval/large_k/partials.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
(cd "$root" && cargo build --release --quiet)
vocab="$root/target/release/vocab"
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; } >"$here/machine.txt"
out="$here/partials.csv"
"$vocab" --threads 2 bench partials --k 65536 --vectors 50250 --tasks 2 --nodes 4 >"$out"
"$vocab" --threads 2 bench partials --k 1048576 --vectors 59360 --tasks 2 --nodes 125 | tail -n +2 >>"$out"
"$vocab" --threads 2 bench partials --k 1048576 --vectors 59360 --tasks 80 --nodes 125 | tail -n +2 >>"$out"
python3 - "$out" >"$here/partials.md" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("One node's partial sums, 512-d, uniform random labels, 2 threads (`vocab bench partials`, best of 3).\n")
print("| k | vectors | tasks | form | accumulate s | stage-1 merge s | stage-2 encode s | tasks' tables | merged table | stage-2 bytes |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {int(r['k']):,} | {int(r['vectors']):,} | {r['tasks']} | {r['form']} | {float(r['accumulate_seconds']):.3f} | "
          f"{float(r['merge_seconds']):.3f} | {float(r['encode_seconds']):.3f} | {int(r['task_bytes']) / 1e6:,.0f} MB | "
          f"{int(r['merged_bytes']) / 1e6:,.0f} MB | {int(r['stage2_bytes']) / 1e6:,.0f} MB |")
PY
cat "$here/partials.md"
