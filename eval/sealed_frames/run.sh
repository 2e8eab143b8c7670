#!/usr/bin/env bash
# What sealing every frame costs (issue 49): the commit before it (BEFORE) and a commit with it
# (AFTER), both built in release from worktrees, measured alternately in one run on loopback:
#   - `vocab bench broadcast` of 256 MiB down a chain of 3 worker daemons (the collective alone:
#     on loopback, links of several GB/s, so the tags' share is as large as it gets);
#   - `vocab kmeans` on 2 loopback workers (--local-nodes 2): 200,000 x 128 blobs, k = 4,096,
#     f32 kernel, 4 iterations; seconds per iteration, its broadcast and gather (agg3) stages,
#     and the vocabulary's checksum (the same bytes before and after).
# Writes broadcast.csv, kmeans.csv, results.md and machine.txt beside this script.
# usage: eval/sealed_frames/run.sh BEFORE AFTER [REPEATS]   (WORK=/tmp/sealed-work by default)
# e.g. eval/sealed_frames/run.sh 4fd583a~1 4fd583a
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
before=$(git -C "$root" rev-parse --short "$1")
after=$(git -C "$root" rev-parse --short "$2")
repeats=${3:-3}
work=${WORK:-/tmp/sealed-work}
mkdir -p "$work"
cd "$root"
for v in before after; do
  if [ ! -d "$work/$v-src" ]; then
    git worktree add --detach "$work/$v-src" "${!v}" >/dev/null
  fi
  (cd "$work/$v-src" && git checkout --quiet --detach "${!v}" && cargo build --release --quiet)
done
declare -A bin=([before]="$work/before-src/target/release/vocab" [after]="$work/after-src/target/release/vocab")
{ lscpu | grep -E '^(Model name|CPU\(s\)|Flags)'; echo "before: $before"; echo "after: $after"; } >"$here/machine.txt"

# A cluster file of 3 loopback workers.
secret="$work/secret"
[ -f "$secret" ] || { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret"; chmod 600 "$secret"; }
cluster="$work/cluster.toml"
printf '[settings]\nsecret_file = "secret"\nchunk_size = 1048576\n' >"$cluster"
ports=(47311 47312 47313)
for i in 0 1 2; do printf '[[nodes]]\nname = "w%d"\naddress = "127.0.0.1:%d"\n' "$i" "${ports[$i]}" >>"$cluster"; done

pids=()
stop_workers() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop_workers EXIT
start_workers() {
  for i in 0 1 2; do
    "$1" worker --listen "127.0.0.1:${ports[$i]}" --name "w$i" --cluster "$cluster" 2>/dev/null &
    pids+=($!)
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  done
}

echo "version,round,run,bytes,seconds" >"$here/broadcast.csv"
if [ ! -f "$work/blobs.bin" ]; then
  "${bin[after]}" datasets synth --n 200000 --dims 128 --clusters 4096 --seed 1 --out "$work/blobs.bin" >/dev/null
  "${bin[after]}" partition --features "$work/blobs.bin" --parts 4 --out "$work/parts" >/dev/null
fi
echo "version,round,seconds_per_iteration,broadcast_s,stage2_s,stage3_s,vocabulary_sha256" >"$here/kmeans.csv"
for round in $(seq "$repeats"); do
  for v in before after; do
    start_workers "${bin[$v]}"
    rm -f "$work/bc-$v.csv"
    "${bin[$v]}" bench broadcast --bytes 256M --algorithm chain --cluster "$cluster" --repeat 3 \
      --csv "$work/bc-$v.csv" >/dev/null
    stop_workers
    awk -F, -v v="$v" -v r="$round" 'NR > 1 { n++; printf "%s,%s,%d,%s,%s\n", v, r, n, $2, $5 }' \
      "$work/bc-$v.csv" >>"$here/broadcast.csv"
    dir="$work/km-$v"
    rm -rf "$dir" && mkdir -p "$dir"
    "${bin[$v]}" kmeans --features "$work/parts" --k 4096 --iterations 4 --tol 0 --seed 1 \
      --init random --local-nodes 2 --out "$dir/vocab.bin" --quiet >"$dir/log"
    sha=$(sha256sum <"$dir/vocab.bin" | cut -c1-16)
    python3 - "$dir/vocab.bin" "$v" "$round" "$sha" >>"$here/kmeans.csv" <<'PY'
import csv, sys
mean = lambda rows, k: sum(float(r[k]) for r in rows) / len(rows)
its = list(csv.DictReader(open(sys.argv[1] + ".iterations.csv")))
st = list(csv.DictReader(open(sys.argv[1] + ".stages.csv")))
print(f"{sys.argv[2]},{sys.argv[3]},{mean(its, 'seconds'):.4f},{mean(st, 'broadcast_seconds'):.4f},"
      f"{mean(st, 'stage2_seconds'):.4f},{mean(st, 'stage3_seconds'):.4f},{sys.argv[4]}")
PY
  done
done
python3 "$here/table.py" >"$here/results.md"
cat "$here/results.md"
