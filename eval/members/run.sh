#!/usr/bin/env bash
# Team size (issue 36): vocab kmeans on 8, 32 and 125 members of each engine, on small data
# (20,000 blob vectors x 512 dims in 250 partitions, k = 16, 5 iterations), so what is measured
# is the team: the time to form it and the control overhead of an iteration (broadcast, map of
# 80 vectors a member, three-stage aggregation, update). Each run's vocabulary is compared with
# one process's, byte for byte. Then 3 of 125 TCP workers are killed mid-run (kill -9): the run
# must recover to the same vocabulary.
#   TCP: --local-nodes N (loopback worker daemons, started for the run);
#   MPI: mpirun --oversubscribe -n N vocab kmeans --engine mpi (build with --features mpi).
# usage: eval/members/run.sh   (VOCAB=binary built with --features mpi; default: builds one)
# Output: results.csv, results.md, kill.txt, machine.txt. 2 cores: 125 members share them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab=${VOCAB:-$root/target/release/vocab}
[ -n "${VOCAB:-}" ] || (cd "$root" && cargo build --release --quiet --features mpi)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; grep MemTotal /proc/meminfo; mpirun --version | head -1; } >"$here/machine.txt"

"$vocab" datasets synth --n 20000 --seed 1 --out "$work/s.bin" --quiet
"$vocab" partition --features "$work/s.bin" --parts 250 --out "$work/parts" --quiet
common=(kmeans --features "$work/parts" --k 16 --iterations 5 --tol 0 --init random)
"$vocab" "${common[@]}" --out "$work/one.bin" --quiet

# Mean seconds of iterations 2.. (the first also opens the partitions) from an iterations CSV.
per_iteration() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "seconds") c = i; next }
           NR > 2 { s += $c; n++ } END { printf "%.3f", s / n }' "$1"
}

csv="$here/results.csv"
echo "engine,members,trial,form_seconds,seconds_per_iteration,wall_seconds,same_vocabulary" >"$csv"
for n in 8 32 125; do
  for trial in 1 2 3; do
    for engine in tcp mpi; do
      out="$work/$engine-$n.bin"
      rm -rf "$out"*
      start=$(date +%s.%N)
      if [ "$engine" = tcp ]; then
        "$vocab" "${common[@]}" --local-nodes "$n" --out "$out" >"$work/log" 2>&1
      else
        mpirun --oversubscribe -n "$n" "$vocab" "${common[@]}" --engine mpi --out "$out" \
          >"$work/log" 2>&1
      fi
      wall=$(echo "$(date +%s.%N) - $start" | bc)
      form=$(sed -n 's/^kmeans: team formed in \([0-9.]*\) s.*/\1/p' "$work/log")
      same=$(cmp -s "$work/one.bin" "$out" && echo yes || echo no)
      echo "$engine,$n,$trial,$form,$(per_iteration "$out.iterations.csv"),$(printf %.2f "$wall"),$same" \
        | tee -a "$csv"
    done
  done
done

# 3 of 125 TCP workers killed during iteration 3 or so (20 iterations, tol 0).
long=(kmeans --features "$work/parts" --k 16 --iterations 20 --tol 0 --init random)
"$vocab" "${long[@]}" --out "$work/one-long.bin" --quiet
"$vocab" "${long[@]}" --local-nodes 125 --out "$work/kill.bin" >"$work/kill.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "^iter 2 " "$work/kill.log" 2>/dev/null && break; sleep 0.2; done
for w in w17 w58 w101; do pkill -9 -f "vocab worker .* --name $w( |$)" || true; done
wait "$pid"
{
  grep -v "^kmeans: on" "$work/kill.log"
  cmp "$work/one-long.bin" "$work/kill.bin" && echo "same vocabulary as one process: yes"
} >"$here/kill.txt"
cat "$here/kill.txt"
python3 "$here/summary.py" "$csv" >"$here/results.md"
cat "$here/results.md"
