#!/usr/bin/env bash
# Distributed k-means on the emulated cluster (root needed): workers in network namespaces with
# shaped links (see lib.sh), each optionally held to a CPU quota so that N emulated nodes of equal
# capacity share this host's cores; the driver runs `vocab kmeans --cluster` in its own namespace
# on a partition folder every node reads at the same path. Appends the per-iteration stage times
# and bytes (<out>.stages.csv of vocab) to --csv, with the setup in the first columns.
#
# usage: eval/netsim/kmeans.sh --nodes N --parts DIR --k K --csv OUT [--iterations I] [--racks R]
#          [--link-mbit M] [--core-mbit C] [--cpu-per-node CORES] [--threads T]
#          [--no-local-aggregation] [--broadcast chain|simple|mst|multichain] [--vocab PATH]
set -euo pipefail

nodes=4 racks=1 link=100 core=2000 order=rack chunk=65536 sockbuf=4194304 chains=1 seed=1
iterations=2 k=256 parts= csv= cpu= threads= local_agg=1 algorithm=chain
here=$(cd "$(dirname "$0")" && pwd)
vocab="$here/../../target/release/vocab"
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --link-mbit) link=$2; shift 2 ;;
    --core-mbit) core=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --k) k=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --cpu-per-node) cpu=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --no-local-aggregation) local_agg=0; shift ;;
    --broadcast) algorithm=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    *) echo "kmeans.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$parts" ] && [ -d "$parts" ] || { echo "kmeans.sh: --parts DIR (a partition folder) is required" >&2; exit 2; }
[ -n "$csv" ] || { echo "kmeans.sh: --csv OUT is required" >&2; exit 2; }
parts=$(cd "$parts" && pwd)
. "$here/lib.sh"
netsim_init
netsim_topology
netsim_cluster_file
netsim_start_workers "$cpu" "$threads"

extra=()
[ "$local_agg" = 0 ] && extra+=(--no-local-aggregation)
ip netns exec vs-drv "$vocab" kmeans --features "$parts" --k "$k" --iterations "$iterations" \
  --tol 0 --seed 1 --quiet --cluster "$work/cluster.toml" --broadcast "$algorithm" \
  --out "$work/vocabulary.bin" "${extra[@]}" > "$work/driver.log" 2>&1 \
  || { cat "$work/driver.log" >&2; exit 1; }
grep '^iter ' "$work/driver.log" >&2
setup="$nodes,$link,${cpu:-host},${threads:-default},$local_agg,$algorithm,$k"
if [ ! -s "$csv" ]; then
  echo "nodes,link_mbit,cpu_per_node,threads,local_aggregation,broadcast,k,$(head -1 "$work/vocabulary.bin.stages.csv")" > "$csv"
fi
tail -n +2 "$work/vocabulary.bin.stages.csv" | sed "s/^/$setup,/" >> "$csv"
