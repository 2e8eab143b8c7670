#!/usr/bin/env bash
# An emulated cluster on this machine (root needed): one network namespace per node, one Linux
# bridge per rack, racks joined through a core bridge, every link shaped with tc; vocab workers
# run inside the namespaces and a driver namespace broadcasts to them. Everything is torn down on
# exit, also on failure.
#
# usage: eval/netsim/broadcast.sh --nodes N --racks R --link-mbit M --core-mbit C --bytes SIZE
#          --algorithm chain|simple|mst|multichain|mpi [--order rack|random|none|auto] [--repeat K]
#          [--chunk BYTES] [--socket-buffer BYTES] [--chains C] [--seed S] [--vocab PATH]
#          [--cores C0,C1,..] [--slow I:MBIT] [--collective broadcast|gather]
# (--collective gather: every worker sends --bytes to the driver, stage 3's pattern: `vocab
#  bench gather`, directly or, with --order auto, up the measured gather tree; with
#  --algorithm mpi, MPI_Gather)
# (--order auto: vocab measures the links and builds the chain; its calibration is appended to
#  the file $calibration_log names, if set)
# prints one line per run:  nodes=N bytes=B algorithm=A seconds=S
#
# Topology: see lib.sh. `--algorithm mpi` runs Open MPI's MPI_Bcast instead
# (eval/.venv wheels; ranks in the same namespaces, rank 0 in the driver's), as in
# shared/notes/mpi-in-netns.md. MPI_BCAST_ALGORITHM=N in the environment forces Open MPI's tuned
# bcast algorithm N (e.g. 3 = pipeline, 6 = binomial) instead of its default decision, and
# MPI_BCAST_SEGMENT=BYTES its segment size. Ranks yield when idle: N+1 busy-polling ranks on this
# 2-core host would otherwise starve each other.
set -euo pipefail

nodes=4 racks=1 link=200 core=1000 bytes=16M algorithm=chain order=rack repeat=1
chunk=65536 sockbuf=4194304 chains=2 seed=1 collective=broadcast
here=$(cd "$(dirname "$0")" && pwd)
vocab="$here/../../target/release/vocab"
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes=$2; shift 2 ;;
    --racks) racks=$2; shift 2 ;;
    --link-mbit) link=$2; shift 2 ;;
    --core-mbit) core=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --algorithm) algorithm=$2; shift 2 ;;
    --order) order=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --chunk) chunk=$2; shift 2 ;;
    --socket-buffer) sockbuf=$2; shift 2 ;;
    --chains) chains=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --vocab) vocab=$2; shift 2 ;;
    --cores) cores=$2; shift 2 ;;
    --slow) slow=$2; shift 2 ;;
    --collective) collective=$2; shift 2 ;;
    *) echo "broadcast.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
. "$here/lib.sh"
netsim_init
netsim_topology
netsim_cluster_file

size_bytes=$(python3 -c "
import sys; t=sys.argv[1].upper().rstrip('BI'); m={'K':1<<10,'M':1<<20,'G':1<<30}
print(int(t[:-1])*m[t[-1]] if t[-1] in m else int(t))" "$bytes")
if [ "$algorithm" = mpi ]; then
  python="$here/../.venv/bin/python"
  [ -x "$python" ] || { echo "broadcast.sh: run eval/setup-venv.sh first (Open MPI wheels)" >&2; exit 2; }
  mpirun="$(dirname "$python")/mpirun"
  hosts="10.77.0.2"
  echo "10.77.0.2 vs-drv" > "$work/hosts"
  for i in $(seq 0 $((nodes - 1))); do
    hosts="$hosts,10.77.0.$((i + 10))"
    echo "10.77.0.$((i + 10)) vs-n$i" >> "$work/hosts"
  done
  netsim_mpi_agent
  ip netns exec vs-drv "$mpirun" --allow-run-as-root --host "$hosts" -np $((nodes + 1)) \
    --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 \
    --mca btl_tcp_if_include 10.77.0.0/16 --mca oob_tcp_if_include 10.77.0.0/16 \
    ${MPI_BCAST_ALGORITHM:+--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm "$MPI_BCAST_ALGORITHM"} \
    ${MPI_BCAST_SEGMENT:+--mca coll_tuned_bcast_algorithm_segmentsize "$MPI_BCAST_SEGMENT"} \
    "$python" "$here/mpi_bcast.py" "$size_bytes" "$repeat" \
    "$([ "$collective" = gather ] && echo gather || echo bcast)" 2>>"$work/mpi.log" | grep '^nodes='
  exit "${PIPESTATUS[0]}"
fi

netsim_start_workers

auto=(); [ "$order" = auto ] && auto=(--order auto)
bench=(bench broadcast --algorithm "$algorithm"); [ "$collective" = gather ] && bench=(bench gather)
ip netns exec vs-drv "$vocab" "${bench[@]}" --cluster "$work/cluster.toml" --bytes "$bytes" \
  --repeat "$repeat" "${auto[@]}" 2>>"${calibration_log:-/dev/null}" \
  | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(nodes|bytes|algorithm|seconds)=/) printf "%s%s", (n++ ? " " : ""), $i; n = 0; print "" }'
