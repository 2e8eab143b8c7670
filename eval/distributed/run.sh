#!/usr/bin/env bash
# Distributed k-means on the emulated cluster (root needed): the seed's Figure 9 analogue (local
# aggregation on/off) and the per-iteration stage breakdown for 1, 2, 4 and 8 nodes. Writes
# results/*.csv, then the cost-model check and report (results/results.md, PNGs).
# usage: eval/distributed/run.sh [figure9|breakdown|engines|report|all]
# (engines: the same job on --engine tcp and --engine mpi; needs a release build with
# --features mpi and Open MPI's mpirun)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab="$root/target/release/vocab"
what=${1:-all}
features=()
[ "$what" = engines ] && features=(--features mpi)
(cd "$root" && cargo build --release --quiet "${features[@]}")
mkdir -p "$here/results" "$here/work"
n=80000 dims=512 k=4096 parts=16
data="$here/work/parts-$n"
if [ ! -f "$data/manifest.toml" ]; then
  "$vocab" datasets synth --out "$here/work/features-$n.bin" --n "$n" --dims "$dims" --clusters 200 --seed 1
  "$vocab" partition --features "$here/work/features-$n.bin" --parts "$parts" --out "$data"
fi
if [ "$what" = figure9 ] || [ "$what" = all ]; then
  # 4 nodes of half a core, 4 map tasks each: stage 1 should cut stage-2 bytes ~4x.
  out="$here/results/figure9.csv"; rm -f "$out"
  for agg in on off; do
    flag=(); [ "$agg" = off ] && flag=(--no-local-aggregation)
    "$root/eval/netsim/kmeans.sh" --nodes 4 --parts "$data" --k "$k" --iterations 3 --link-mbit 100 \
      --cpu-per-node 0.5 --threads 4 --csv "$out" "${flag[@]}"
  done
fi
if [ "$what" = breakdown ] || [ "$what" = all ]; then
  # Nodes of 0.2 cores each (8 nodes = 1.6 of the host's 2 cores, the rest for the emulated
  # network and the driver), one map task per node, 100 Mbit/s links.
  out="$here/results/breakdown.csv"; rm -f "$out"
  for nodes in 1 2 4 8; do
    "$root/eval/netsim/kmeans.sh" --nodes "$nodes" --parts "$data" --k "$k" --iterations 2 \
      --link-mbit 100 --cpu-per-node 0.2 --threads 1 --csv "$out"
  done
fi
if [ "$what" = engines ]; then
  # The same k-means job on both engines: N nodes of 0.4 cores, one map thread each, 100 Mbit/s.
  out="$here/results/engines.csv"; rm -f "$out"
  for nodes in 2 4; do
    for engine in tcp mpi; do
      "$root/eval/netsim/kmeans.sh" --nodes "$nodes" --parts "$data" --k "$k" --iterations 3 \
        --link-mbit 100 --cpu-per-node 0.4 --threads 1 --csv "$out" --engine "$engine"
    done
  done
  python3 "$here/engines.py" "$out" > "$here/results/engines.md"
  cat "$here/results/engines.md"
fi
if [ "$what" = report ] || [ "$what" = all ]; then
  python=$("$root/eval/setup-venv.sh")
  "$python" "$here/cost_model.py" --n "$n" --dims "$dims" --k "$k" --results "$here/results"
fi
