#!/usr/bin/env bash
# Slurm for real on one machine: Debian's slurmctld, slurmd and munge on localhost, with a
# private config, and the committed sbatch scripts (cluster/slurm/) submitted to it:
#   1. vocab-kmeans.sbatch with 3 tasks: its vocabulary equals `vocab kmeans` in one process,
#      byte for byte;
#   2. vocab-run.sbatch with 3 tasks: `vocab run configs/quickstart.toml` as an MPI job; its
#      vocabularies, histograms, models and report/accuracy.csv equal the single-process run's.
#
# usage (root, from anywhere): eval/slurm/run.sh [VOCAB] [OUT.md]
#   VOCAB   a vocab binary built with `--features mpi` [default: builds target/release/vocab]
#   OUT.md  the record of the run [default: eval/slurm/output.md]
# Installs slurmctld, slurmd, slurm-client and munge when missing (apt; skipped when present).
# Everything else lives in a temporary folder: slurm.conf (SLURM_CONF), the munge key and socket,
# spool, state and logs; the daemons are stopped and the folder removed on exit. Nothing listens
# beyond 127.0.0.1.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out_md=${2:-$repo/eval/slurm/output.md}
packages="slurmctld slurmd slurm-client munge"
if ! dpkg -s $packages >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $packages >/dev/null
fi
if [ -n "${1:-}" ]; then
  vocab=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
else
  (cd "$repo" && cargo build --release --features mpi -q)
  vocab=$repo/target/release/vocab
fi
"$vocab" --version >/dev/null

tmp=$(mktemp -d /tmp/vocab-slurm.XXXXXX)
out_failed=${out_md%.md}.failed-logs
cleanup() {
  status=$?
  # The daemons by their pid files, whether or not the run got far enough to read them.
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munge/munged.pid"; do
    [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
  done
  sleep 1
  if [ "$status" -ne 0 ]; then
    # The evidence of a failed run is kept: the record so far, the jobs' and daemons' logs.
    mkdir -p "$out_failed"
    cp -r "$tmp/log" "$tmp"/record.md "$tmp"/jobs/*.log "$out_failed"/ 2>/dev/null || true
    echo "slurm: failed; logs kept in $out_failed" >&2
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# munge: a fresh key and a private socket.
mkdir -p "$tmp/munge" && chmod 700 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
munged --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" \
  --seed-file="$tmp/munge/munged.seed"

# One node, named vocab1, on 127.0.0.1, declared with at least 4 CPUs (config_overrides: slurmd
# takes the declared figures) so that 3 ranks fit on a 2-core machine; memory as it has.
cpus=$(( $(nproc) > 4 ? $(nproc) : 4 ))
mem=$(($(awk '/MemTotal/ { print $2 }' /proc/meminfo) / 1024 - 1024))
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
cat >"$tmp/slurm.conf" <<CONF
ClusterName=vocab
SlurmctldHost=$(hostname)(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=60
NodeName=vocab1 NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=vocab1 Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N vocab1
for _ in $(seq 60); do
  sinfo -h -o %t 2>/dev/null | grep -qx idle && break
  sleep 1
done
sinfo -h -o %t | grep -qx idle || { cat "$tmp/log/"*.log >&2; echo "slurm: the node never became idle" >&2; exit 1; }

# The jobs run this build's vocab (sbatch passes the environment on).
export PATH=$(dirname "$vocab"):$PATH
work=$tmp/jobs
mkdir -p "$work"
cd "$work"
record=$tmp/record.md
{
  echo "# Slurm for real: the committed sbatch scripts on a one-node Slurm"
  echo
  echo "\`eval/slurm/run.sh\` on $(date -u +%Y-%m-%d), $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2 }'), $(nproc) cores:"
  echo "Slurm $(sinfo --version | awk '{ print $2 }') (Debian's slurmctld, slurmd, munge) on 127.0.0.1,"
  echo "$(mpirun --version | head -1), vocab built with \`--features mpi\`."
  echo
  echo '```'
  echo "\$ sinfo"
  sinfo
  echo "\$ srun --mpi=list"
  srun --mpi=list 2>&1
  echo '```'
} >"$record"

# 1. k-means: one process, then the sbatch script with 3 tasks.
vocab datasets synth --n 6000 --dims 64 --clusters 16 --seed 4 --out synth.bin >/dev/null
vocab partition --features synth.bin --parts 6 --out "$work/parts" >/dev/null
vocab kmeans --features "$work/parts" --k 32 --iterations 10 --tol 0 --seed 3 --out single.bin >/dev/null
started=$(date +%s.%N)
sbatch --wait --nodes=1 --ntasks-per-node=3 --output=kmeans-%j.log \
  "$repo/cluster/slurm/vocab-kmeans.sbatch" "$work/parts" 32 "$work/slurm.bin" \
  --iterations 10 --tol 0 --seed 3 >/dev/null
kmeans_s=$(echo "$(date +%s.%N) - $started" | bc)
{
  echo
  echo "## 1. \`cluster/slurm/vocab-kmeans.sbatch\`, 3 tasks"
  echo
  echo '```'
  echo "\$ vocab kmeans --features parts --k 32 --iterations 10 --tol 0 --seed 3 --out single.bin"
  echo "\$ sbatch --wait --nodes=1 --ntasks-per-node=3 \\"
  echo "    cluster/slurm/vocab-kmeans.sbatch parts 32 slurm.bin --iterations 10 --tol 0 --seed 3"
  cat kmeans-*.log
  echo "\$ cmp single.bin slurm.bin"
  if cmp single.bin slurm.bin; then echo "(equal: $(stat -c %s single.bin) bytes)"; else echo "DIFFERENT"; fi
  echo '```'
  echo
  echo "The job took ${kmeans_s%.*} s from submission to its end."
} >>"$record"
kmeans_equal=0
cmp -s single.bin slurm.bin || kmeans_equal=1

# 2. vocab run: one process, then the sbatch script with 3 tasks.
config=$repo/configs/quickstart.toml
vocab run "$config" --work "$work/single-run" >/dev/null
started=$(date +%s.%N)
sbatch --wait --nodes=1 --ntasks-per-node=3 --output=run-%j.log \
  "$repo/cluster/slurm/vocab-run.sbatch" "$config" "$work/slurm-run" >/dev/null
run_s=$(echo "$(date +%s.%N) - $started" | bc)
compared=0
differ=0
files=$(cd "$work/single-run" && find kmeans encode svm report -name vocabulary.bin -o \
  -name histograms.bin -o -name model.json -o -name accuracy.csv | sort)
for f in $files; do
  compared=$((compared + 1))
  # A model names the files it came from, under its own work directory.
  sed "s|$work/slurm-run|$work/single-run|g" "$work/slurm-run/$f" | cmp -s - "$work/single-run/$f" ||
    { differ=$((differ + 1)); echo "differs: $f" >&2; }
done
{
  echo
  echo "## 2. \`cluster/slurm/vocab-run.sbatch\`, 3 tasks"
  echo
  echo '```'
  echo "\$ vocab run configs/quickstart.toml --work single-run"
  echo "\$ sbatch --wait --nodes=1 --ntasks-per-node=3 \\"
  echo "    cluster/slurm/vocab-run.sbatch configs/quickstart.toml slurm-run"
  grep -E '^(== |run: |kmeans: on|  on MPI|.*ranks)' run-*.log | head -40
  echo '```'
  echo
  echo "The job took ${run_s%.*} s. Compared with the single-process run, byte for byte: $compared files"
  echo "(every \`vocabulary.bin\`, \`histograms.bin\`, \`model.json\` (its work directory's name"
  echo "replaced by the other's) and \`report/accuracy.csv\`):"
  echo "$((compared - differ)) equal, $differ different."
} >>"$record"
cp "$record" "$out_md"
cat "$out_md"
[ "$kmeans_equal" -eq 0 ] && [ "$differ" -eq 0 ] && [ "$compared" -gt 0 ]
