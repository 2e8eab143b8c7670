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
#          [--engine tcp|mpi] [--prune] [--kernel f32|int8]
#
# --engine mpi runs the same job as an MPI job (a release build with --features mpi, Open MPI's
# mpirun): N ranks in the node namespaces (rank 0 drives and maps), mpirun in the driver's
# namespace, TCP between ranks, each rank under its node's CPU quota. --engine tcp (default):
# the driver in its namespace, N worker daemons in the node namespaces.
set -euo pipefail

nodes=4 racks=1 link=100 core=2000 order=rack chunk=65536 sockbuf=4194304 chains=1 seed=1
iterations=2 k=256 parts= csv= cpu= threads= local_agg=1 algorithm=chain engine=tcp
assign=()
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
    --engine) engine=$2; shift 2 ;;
    --prune) assign+=(--prune); shift ;;
    --kernel) assign+=(--kernel "$2"); shift 2 ;;
    *) echo "kmeans.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$parts" ] && [ -d "$parts" ] || { echo "kmeans.sh: --parts DIR (a partition folder) is required" >&2; exit 2; }
[ -n "$csv" ] || { echo "kmeans.sh: --csv OUT is required" >&2; exit 2; }
parts=$(cd "$parts" && pwd)
. "$here/lib.sh"
netsim_init
netsim_topology
extra=("${assign[@]}")
[ "$local_agg" = 0 ] && extra+=(--no-local-aggregation)
if [ "$engine" = mpi ]; then
  : > "$work/hosts"
  for i in $(seq 0 $((nodes - 1))); do
    echo "10.77.0.$((i + 10)) vs-n$i" >> "$work/hosts"
    if [ -n "$cpu" ]; then
      cg=/sys/fs/cgroup/cpu/vs-n$i
      mkdir -p "$cg"
      echo 100000 > "$cg/cpu.cfs_period_us"
      awk -v c="$cpu" 'BEGIN { printf "%d", c * 100000 }' > "$cg/cpu.cfs_quota_us"
    fi
  done
  netsim_mpi_agent ${cpu:+cgroup}
  hosts=$(awk '{print $1}' "$work/hosts" | paste -sd,)
  env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ${threads:+RAYON_NUM_THREADS=$threads} \
  ip netns exec vs-drv mpirun --host "$hosts" -np "$nodes" --mca plm_rsh_agent "$work/agent" \
    --mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 \
    --mca btl_tcp_if_include 10.77.0.0/16 --mca oob_tcp_if_include 10.77.0.0/16 \
    ${threads:+-x RAYON_NUM_THREADS} \
    "$vocab" kmeans --engine mpi --features "$parts" --k "$k" --iterations "$iterations" \
    --tol 0 --seed 1 --quiet --broadcast "$algorithm" \
    --out "$work/vocabulary.bin" "${extra[@]}" > "$work/driver.log" 2>&1 \
    || { cat "$work/driver.log" >&2; exit 1; }
else
  netsim_cluster_file
  netsim_start_workers "$cpu" "$threads"
  ip netns exec vs-drv "$vocab" kmeans --features "$parts" --k "$k" --iterations "$iterations" \
    --tol 0 --seed 1 --quiet --cluster "$work/cluster.toml" --broadcast "$algorithm" \
    --out "$work/vocabulary.bin" "${extra[@]}" > "$work/driver.log" 2>&1 \
    || { cat "$work/driver.log" >&2; exit 1; }
fi
grep '^iter ' "$work/driver.log" >&2
setup="$nodes,$link,${cpu:-host},${threads:-default},$local_agg,$algorithm,$k,$engine"
if [ ! -s "$csv" ]; then
  echo "nodes,link_mbit,cpu_per_node,threads,local_aggregation,broadcast,k,engine,$(head -1 "$work/vocabulary.bin.stages.csv")" > "$csv"
fi
tail -n +2 "$work/vocabulary.bin.stages.csv" | sed "s/^/$setup,/" >> "$csv"
