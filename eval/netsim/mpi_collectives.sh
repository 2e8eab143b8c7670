#!/usr/bin/env bash
# vocab's collectives against MPI's own, in one MPI job per configuration, on the emulated
# cluster of lib.sh (root needed) and on loopback: `vocab bench collectives` times vocab's
# pipelined chain broadcast and its stage 2 (ranges reduced by their owners) against MPI_Bcast,
# MPI_Reduce_scatter_block and MPI_Allreduce, same ranks, same bytes, alternating.
#
# usage: eval/netsim/mpi_collectives.sh [--ranks "2 4 8"] [--bytes 16M] [--link-mbit 200]
#          [--core-mbit 1000] [--racks 2] [--repeat 3] [--chunk 256K] [--out DIR]
# needs: cargo build --release --features mpi; Open MPI's mpirun (apt-get install openmpi-bin)
# writes: DIR/collectives.csv (label,ranks,bytes,collective,implementation,run,seconds)
#
# Each configuration runs twice: with Open MPI's default MPI_Bcast decision (label `default`)
# and with its tuned pipeline broadcast at 1 MiB segments (label `ompi-pipeline`, coll_tuned
# algorithm 3), the algorithm closest to vocab's chain. Ranks yield when idle (mpi_yield_when_idle):
# eight busy-polling ranks on a 2-core host would otherwise starve each other.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
ranks_list="2 4 8" bytes=16M chunk_size=256K link=200 core=1000 racks=2 repeat=3 out="$here/results/mpi"
vocab="$here/../../target/release/vocab"
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks_list=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --link-mbit) link=$2; shift 2 ;;
    --core-mbit) core=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --chunk) chunk_size=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "mpi_collectives.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v mpirun >/dev/null || { echo "mpi_collectives.sh: no mpirun (apt-get install openmpi-bin)" >&2; exit 2; }
mkdir -p "$out"
csv="$out/collectives.csv"
rm -f "$csv"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tuned=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm 3
       --mca coll_tuned_bcast_algorithm_segmentsize 1048576)

# Loopback: every rank on this host (shared memory between ranks).
for n in $ranks_list; do
  for variant in default ompi-pipeline; do
    extra=(); [ "$variant" = ompi-pipeline ] && extra=("${tuned[@]}")
    mpirun --oversubscribe -n "$n" --mca mpi_yield_when_idle 1 "${extra[@]}" \
      "$vocab" bench collectives --bytes "$bytes" --repeat "$repeat" --chunk-size "$chunk_size" \
      --label "loopback-$variant" --csv "$csv" >/dev/null
  done
done

# The emulated cluster: rank i in namespace vs-n<i>, links shaped to $link Mbit/s, racks joined
# at $core Mbit/s; mpirun in the driver's namespace, TCP between ranks.
nodes=$(echo "$ranks_list" | tr ' ' '\n' | sort -n | tail -1)
order=rack chunk=65536 sockbuf=4194304 chains=2 seed=1
. "$here/lib.sh"
netsim_init
netsim_topology
: > "$work/hosts"
for i in $(seq 0 $((nodes - 1))); do echo "10.77.0.$((i + 10)) vs-n$i" >> "$work/hosts"; done
netsim_mpi_agent
for n in $ranks_list; do
  hosts=$(head -n "$n" "$work/hosts" | awk '{print $1}' | paste -sd,)
  for variant in default ompi-pipeline; do
    extra=(); [ "$variant" = ompi-pipeline ] && extra=("${tuned[@]}")
    ip netns exec vs-drv mpirun --host "$hosts" -np "$n" --mca plm_rsh_agent "$work/agent" \
      --mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 \
      --mca btl_tcp_if_include 10.77.0.0/16 --mca oob_tcp_if_include 10.77.0.0/16 "${extra[@]}" \
      "$vocab" bench collectives --bytes "$bytes" --repeat "$repeat" --chunk-size "$chunk_size" \
      --label "netns-${link}mbit-$variant" --csv "$csv" >/dev/null 2>>"$work/mpi.log" \
      || { cat "$work/mpi.log" >&2; exit 1; }
  done
done
python3 "$here/mpi_collectives_report.py" "$csv" "$link" > "$out/README.md"
cat "$out/README.md"
