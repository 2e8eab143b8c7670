#!/usr/bin/env bash
# The paper's broadcast experiments on the emulated cluster (root needed); writes results/*.csv.
# usage: eval/netsim/experiments.sh [table7|figure8|table8|mpi|chain50|all]
#        OLD_VOCAB=/path/to/old/vocab eval/netsim/experiments.sh seam
#        eval/netsim/experiments.sh auto
#        eval/netsim/experiments.sh trees
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
(cd "$here/../.." && cargo build --release --quiet)
mkdir -p "$here/results"
run() { "$here/broadcast.sh" "$@"; }
csv_line() { # "nodes=.. bytes=.. algorithm=.. seconds=.." extra... -> csv
  local line=$1; shift
  echo "$line" | sed 's/[a-z]*=//g; s/ /,/g' | sed "s/\$/${*:+,}$(IFS=,; echo "$*")/"
}
what=${1:-all}
if [ "$what" = table7 ] || [ "$what" = all ]; then
  out="$here/results/table7.csv"; echo "nodes,bytes,algorithm,seconds" > "$out"
  for bytes in 16M 64M; do
    for n in 1 2 4 8; do
      for alg in chain simple; do
        run --nodes "$n" --link-mbit 200 --core-mbit 2000 --bytes "$bytes" --algorithm "$alg" --repeat 2 \
          | while read -r l; do csv_line "$l" >> "$out"; done
      done
    done
  done
fi
if [ "$what" = figure8 ] || [ "$what" = all ]; then
  out="$here/results/figure8.csv"; echo "nodes,bytes,algorithm,seconds,order,racks,core_mbit" > "$out"
  for order in rack random; do
    for seed in 1 2 3; do
      run --nodes 6 --racks 3 --link-mbit 200 --core-mbit 100 --bytes 16M --algorithm chain --order "$order" \
        --seed "$seed" --repeat 1 | while read -r l; do csv_line "$l" "$order" 3 100 >> "$out"; done
    done
  done
fi
if [ "$what" = table8 ] || [ "$what" = all ]; then
  out="$here/results/table8.csv"; echo "nodes,bytes,algorithm,seconds,socket_buffer" > "$out"
  for buf in 8192 32768 131072 524288 1048576; do
    run --nodes 4 --link-mbit 200 --core-mbit 2000 --bytes 16M --algorithm chain --socket-buffer "$buf" \
      --repeat 2 | while read -r l; do csv_line "$l" "$buf" >> "$out"; done
  done
fi
if [ "$what" = mpi ] || [ "$what" = all ]; then
  out="$here/results/mpi.csv"; echo "nodes,bytes,algorithm,seconds" > "$out"
  for bytes in 16M 64M; do
    for n in 1 2 4 8; do
      run --nodes "$n" --link-mbit 200 --core-mbit 2000 --bytes "$bytes" --algorithm mpi --repeat 2 \
        | while read -r l; do csv_line "$l" >> "$out"; done
    done
  done
fi
if [ "$what" = chain50 ] || [ "$what" = all ]; then
  # The same chain at 50 Mbit/s, a rate this 2-core host can emulate for 8 nodes.
  out="$here/results/chain50.csv"; echo "nodes,bytes,algorithm,seconds" > "$out"
  for n in 1 2 4 8; do
    run --nodes "$n" --link-mbit 50 --core-mbit 2000 --bytes 16M --algorithm chain --repeat 2 \
      | while read -r l; do csv_line "$l" >> "$out"; done
  done
fi
if [ "$what" = seam ]; then
  # The daemons' broadcast before and after they moved onto the transport seam, side by side:
  # OLD_VOCAB is a release build of commit 21b6607 (a broadcast of its own, per connection, with
  # acknowledgements up the chain); target/release/vocab runs the collectives of k-means over
  # the TCP transport (every copy's CRC gathered at the root). Alternating, same links, same host.
  old=${OLD_VOCAB:?set OLD_VOCAB to a release build of commit 21b6607}
  new="$here/../../target/release/vocab"
  out="$here/results/seam.csv"; echo "nodes,bytes,algorithm,seconds,link_mbit,build" > "$out"
  for cfg in "1 200 chain" "2 200 chain" "4 200 chain" "4 200 mst" "8 50 chain"; do
    read -r n mbit alg <<< "$cfg"
    for round in 1 2; do
      for build in old new; do
        bin=$new; [ "$build" = old ] && bin=$old
        run --vocab "$bin" --nodes "$n" --link-mbit "$mbit" --core-mbit 2000 --bytes 16M \
          --algorithm "$alg" --repeat 2 | while read -r l; do csv_line "$l" "$mbit" "$build" >> "$out"; done
      done
    done
  done
fi
if [ "$what" = auto ]; then
  # Measured-topology chains (issue 19): 8 nodes on 3 racks whose core uplinks differ
  # (AUTO_CORES Mbit/s per rack, default 40,30,25: slower than the 50 Mbit/s node links, so a
  # pair across racks sees its core; AUTO_CORES=100,75,60 makes the cores faster than any one
  # pair, so only concurrent streams feel them), racks interleaved in the file as a scheduler may
  # list them; then the same with node n4's upload at 10 Mbit/s. Orders: auto (measured), rack
  # (correct labels), none (no labels: file order), 20 random orders, and Open MPI's MPI_Bcast
  # when eval/.venv has it. Writes results/auto-$AUTO_TAG.csv and the calibrations beside it.
  cores=${AUTO_CORES:-40,30,25} tag=${AUTO_TAG:-slowcores}
  out="$here/results/auto-$tag.csv"; echo "nodes,bytes,algorithm,seconds,order,seed,scenario" > "$out"
  export calibration_log="$here/results/auto-$tag-calibration.txt"; : > "$calibration_log"
  for scenario in cores slow; do
    extra=(--cores "$cores"); [ "$scenario" = slow ] && extra+=(--slow 4:10)
    common=(--nodes 8 --racks 3 --link-mbit 50 --core-mbit 100 --bytes 16M "${extra[@]}")
    for order in auto rack none; do
      echo "== $scenario $order" >> "$calibration_log"
      run "${common[@]}" --algorithm chain --order "$order" --repeat 2 \
        | while read -r l; do csv_line "$l" "$order" 0 "$scenario" >> "$out"; done
    done
    for seed in $(seq 1 20); do
      run "${common[@]}" --algorithm chain --order random --seed "$seed" --repeat 1 \
        | while read -r l; do csv_line "$l" random "$seed" "$scenario" >> "$out"; done
    done
    if [ -x "$here/../.venv/bin/python" ]; then
      run "${common[@]}" --algorithm mpi --order none --repeat 2 \
        | while read -r l; do csv_line "$l" mpi 0 "$scenario" >> "$out"; done
    fi
  done
  python3 "$here/auto_report.py" "$out"
fi
if [ "$what" = trees ]; then
  # Measured trees (issue 19) on the cluster of `auto` (8 nodes, 3 racks behind cores of
  # AUTO_CORES Mbit/s, no rack labels), with and without n4's slow upload. mst broadcasts of
  # 16 MiB: auto (the measured tree, Algorithm 3), rack (the binomial tree down the rack-label
  # chain), none (binomial in file order), 20 random orders (binomial), Open MPI's MPI_Bcast.
  # Gathers of 2 MiB per worker (stage 3's pattern): auto (the gather tree, Algorithm 4, or the
  # direct gather where the model predicts that faster), rack (direct), Open MPI's MPI_Gather.
  # MPI rows when eval/.venv has Open MPI (eval/setup-venv.sh). Writes results/trees-$AUTO_TAG.csv.
  # TREES_PARTS (default "broadcast gather mpi") reruns only those parts, keeping the other rows
  # and calibrations of the files.
  cores=${AUTO_CORES:-40,30,25} tag=${AUTO_TAG:-slowcores} parts=${TREES_PARTS:-broadcast gather mpi}
  out="$here/results/trees-$tag.csv"
  export calibration_log="$here/results/trees-$tag-calibration.txt"
  has() { [[ " $parts " == *" $1 "* ]]; }
  if [ "$parts" = "broadcast gather mpi" ] || [ ! -f "$out" ]; then
    echo "nodes,bytes,algorithm,seconds,order,seed,scenario,collective" > "$out"; : > "$calibration_log"
  else
    # Keep the rows and calibration sections of the parts not rerun.
    python3 - "$out" "$calibration_log" $parts <<'PY'
import sys
out, log, parts = sys.argv[1], sys.argv[2], set(sys.argv[3:])
def part(order, collective):
    return "mpi" if order == "mpi" else collective
lines = open(out).read().splitlines()
keep = [lines[0]] + [l for l in lines[1:] if part(l.split(",")[4], l.split(",")[7]) not in parts]
open(out, "w").write("\n".join(keep) + "\n")
kept, skip = [], False
for l in open(log).read().splitlines():
    if l.startswith("== "):
        skip = ("gather" if l.split()[2] == "gather" else "broadcast") in parts
    if not skip:
        kept.append(l)
open(log, "w").write("".join(k + "\n" for k in kept))
PY
  fi
  mpi=false; [ -x "$here/../.venv/bin/python" ] && mpi=true; has mpi || mpi=false
  for scenario in cores slow; do
    extra=(--cores "$cores"); [ "$scenario" = slow ] && extra+=(--slow 4:10)
    common=(--nodes 8 --racks 3 --link-mbit 50 --core-mbit 100 "${extra[@]}")
    has broadcast && for order in auto rack none; do
      echo "== $scenario mst $order" >> "$calibration_log"
      run "${common[@]}" --bytes 16M --algorithm mst --order "$order" --repeat 2 \
        | while read -r l; do csv_line "$l" "$order" 0 "$scenario" broadcast >> "$out"; done
    done
    has broadcast && for seed in $(seq 1 20); do
      run "${common[@]}" --bytes 16M --algorithm mst --order random --seed "$seed" --repeat 1 \
        | while read -r l; do csv_line "$l" random "$seed" "$scenario" broadcast >> "$out"; done
    done
    has gather && for order in auto rack; do
      echo "== $scenario gather $order" >> "$calibration_log"
      run "${common[@]}" --bytes 2M --collective gather --order "$order" --repeat 2 \
        | while read -r l; do csv_line "$l" "$order" 0 "$scenario" gather >> "$out"; done
    done
    if $mpi; then
      for collective in broadcast gather; do
        bytes=16M; [ "$collective" = gather ] && bytes=2M
        run "${common[@]}" --bytes "$bytes" --algorithm mpi --collective "$collective" --order none \
          --repeat 2 | while read -r l; do csv_line "$l" mpi 0 "$scenario" "$collective" >> "$out"; done
      done
    fi
  done
  python3 "$here/trees_report.py" "$out" "$calibration_log" | tee "$here/results/trees.md"
fi
