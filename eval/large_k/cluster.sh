#!/usr/bin/env bash
# Large-k k-means on the emulated 4-node cluster (root needed; eval/netsim): pruned + int8 on the
# workers, stage 1 on and off, real HOG (the 201,000 vectors of run.sh, u8 partitions), k = 65,536.
# Appends vocab's per-iteration stage rows to cluster.csv and writes cluster.md with the measured
# stage-2 bytes against what dense pieces would have shipped (computed exactly from the layout).
# usage: eval/large_k/cluster.sh [K] [ITERATIONS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab="$root/target/release/vocab"
k=${1:-65536}
iterations=${2:-3}
nodes=4 threads=2
(cd "$root" && cargo build --release --quiet)
data="$here/work/hog-134.bin"
[ -f "$data" ] || { echo "cluster.sh: run eval/large_k/run.sh first (it makes $data)" >&2; exit 2; }
parts="$here/work/parts-u8"
[ -f "$parts/manifest.toml" ] ||
  "$vocab" --quiet partition --features "$data" --parts 16 --element u8 --out "$parts"
out="$here/cluster.csv"
rm -f "$out"
for agg in on off; do
  flag=(); [ "$agg" = off ] && flag=(--no-local-aggregation)
  "$root/eval/netsim/kmeans.sh" --nodes "$nodes" --parts "$parts" --k "$k" --iterations "$iterations" \
    --link-mbit 1000 --cpu-per-node 0.45 --threads "$threads" --csv "$out" --prune --kernel int8 \
    "${flag[@]}"
done
python3 - "$out" "$k" "$nodes" "$threads" >"$here/cluster.md" <<'PY'
import csv, sys
path, k, nodes, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
dims = 512
rows = list(csv.DictReader(open(path)))
# Dense pieces: every partial ships the other nodes' ranges, (r (d + 1) + 1) words each.
ranges = [k * (j + 1) // nodes - k * j // nodes for j in range(nodes)]
def dense(partials_per_node):
    return sum(partials_per_node * (r * (dims + 1) + 1) * 8 for i in range(nodes)
               for j, r in enumerate(ranges) if j != i)
print(f"k = {k}, {nodes} nodes x {threads} map tasks, pruned + int8 on the workers, 201,000 HOG "
      "vectors (u8 partitions), 1 Gbit/s links, 0.45 cores per node\n")
print("| stage 1 | iteration | map s | stage-1 s | stage-2 s | stage-2 bytes | dense would ship | ratio | stage-3 bytes |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    per_node = 1 if r["local_aggregation"] == "1" else int(r["map_tasks"]) // nodes
    d = dense(per_node)
    b = int(r["stage2_bytes"])
    print(f"| {'on' if r['local_aggregation'] == '1' else 'off'} | {r['iteration']} | "
          f"{float(r['map_seconds']):.1f} | {float(r['stage1_seconds']):.2f} | "
          f"{float(r['stage2_seconds']):.2f} | {b / 1e6:.1f} MB | "
          f"{d / 1e6:.1f} MB | {b / d:.3f} | {int(r['stage3_bytes']) / 1e6:.1f} MB |")
PY
cat "$here/cluster.md"
