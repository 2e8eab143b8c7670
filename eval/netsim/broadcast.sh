#!/usr/bin/env bash
# An emulated cluster on this machine (root needed): one network namespace per node, one Linux
# bridge per rack, racks joined through a core bridge, every link shaped with tc; vocab workers
# run inside the namespaces and a driver namespace broadcasts to them. Everything is torn down on
# exit, also on failure.
#
# usage: eval/netsim/broadcast.sh --nodes N --racks R --link-mbit M --core-mbit C --bytes SIZE
#          --algorithm chain|simple|mst|multichain|mpi [--order rack|random] [--repeat K]
#          [--chunk BYTES] [--socket-buffer BYTES] [--chains C] [--seed S] [--vocab PATH]
# prints one line per run:  nodes=N bytes=B algorithm=A seconds=S
#
# Topology: namespace vs-sw holds the bridges br-r0..br-r{R-1} and br-core; node i (namespace
# vs-n<i>, address 10.77.0.<i+10>) hangs off rack i % R; the driver (vs-drv, 10.77.0.2) hangs off
# rack 0. Node and driver links are shaped to M Mbit/s in both directions, each rack's uplink to
# the core to C Mbit/s in both directions. `--algorithm mpi` runs Open MPI's MPI_Bcast instead
# (eval/.venv wheels; ranks in the same namespaces, rank 0 in the driver's), as in
# shared/notes/mpi-in-netns.md. MPI_BCAST_ALGORITHM=N in the environment forces Open MPI's tuned
# bcast algorithm N (e.g. 3 = pipeline, 6 = binomial) instead of its default decision, and
# MPI_BCAST_SEGMENT=BYTES its segment size. Ranks yield when idle: N+1 busy-polling ranks on this
# 2-core host would otherwise starve each other.
set -euo pipefail

nodes=4 racks=1 link=200 core=1000 bytes=16M algorithm=chain order=rack repeat=1
chunk=65536 sockbuf=4194304 chains=2 seed=1
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
    *) echo "broadcast.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "broadcast.sh: needs root (network namespaces)" >&2; exit 2; }
[ -x "$vocab" ] || { echo "broadcast.sh: no vocab binary at $vocab (cargo build --release)" >&2; exit 2; }
[ "$nodes" -ge 1 ] && [ "$racks" -ge 1 ] || { echo "broadcast.sh: --nodes and --racks must be >= 1" >&2; exit 2; }
case "$order" in rack|random) ;; *) echo "broadcast.sh: --order is rack or random" >&2; exit 2 ;; esac

work=$(mktemp -d /tmp/vocab-netsim.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for ns in $(ip netns list | awk '/^vs-/ {print $1}'); do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
# Leftovers of an interrupted earlier run.
for ns in $(ip netns list | awk '/^vs-/ {print $1}'); do ip netns del "$ns" 2>/dev/null || true; done

# tbf needs a burst of at least rate/HZ; 1 ms worth of traffic, and never under 16 KiB.
shape() { # netns dev mbit
  local burst=$(( $3 * 1000000 / 8 / 1000 ))
  [ "$burst" -lt 16384 ] && burst=16384
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "${3}mbit" burst "$burst" latency 100ms
}

ip netns add vs-sw
ip netns exec vs-sw ip link set lo up
ip netns exec vs-sw ip link add br-core type bridge
ip netns exec vs-sw ip link set br-core up
for r in $(seq 0 $((racks - 1))); do
  ip netns exec vs-sw ip link add "br-r$r" type bridge
  ip netns exec vs-sw ip link set "br-r$r" up
  ip netns exec vs-sw ip link add "up-r$r" type veth peer name "dn-r$r"
  ip netns exec vs-sw ip link set "up-r$r" master "br-r$r" up
  ip netns exec vs-sw ip link set "dn-r$r" master br-core up
  shape vs-sw "up-r$r" "$core"
  shape vs-sw "dn-r$r" "$core"
done

attach() { # netns address rack
  local ns=$1 addr=$2 rack=$3 port="p-$1"
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  ip link add "$port" type veth peer name eth0 netns "$ns"
  ip link set "$port" netns vs-sw
  ip netns exec vs-sw ip link set "$port" master "br-r$rack" up
  ip netns exec "$ns" ip addr add "$addr/16" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  shape "$ns" eth0 "$link"
  shape vs-sw "$port" "$link"
}

attach vs-drv 10.77.0.2 0
names=()
for i in $(seq 0 $((nodes - 1))); do
  attach "vs-n$i" "10.77.0.$((i + 10))" $((i % racks))
  names+=("n$i")
done

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret"
{
  echo "[settings]"
  echo "secret_file = \"secret\""
  echo "chunk_size = $chunk"
  echo "socket_buffer = $sockbuf"
  echo "chains = $(( chains < nodes ? chains : nodes ))"
  echo "io_timeout_ms = 600000"
  if [ "$order" = random ]; then
    printf 'order = [%s]\n' "$(printf '%s\n' "${names[@]}" | shuf --random-source=<(yes "$seed") | sed 's/.*/"&"/' | paste -sd, -)"
  fi
  for i in $(seq 0 $((nodes - 1))); do
    printf '\n[[nodes]]\nname = "n%d"\naddress = "10.77.0.%d:7070"\nrack = "r%d"\n' "$i" $((i + 10)) $((i % racks))
  done
} > "$work/cluster.toml"
# In a TOML file `order` must come before the first table.
if [ "$order" = random ]; then
  { grep '^order' "$work/cluster.toml"; grep -v '^order' "$work/cluster.toml"; } > "$work/c.toml"
  mv "$work/c.toml" "$work/cluster.toml"
fi

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
  cat > "$work/agent" <<AGENT
#!/bin/bash
h=\$1; shift
ns=\$(awk -v h="\$h" '\$1 == h {print \$2}' "$work/hosts")
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns; \$*"
AGENT
  chmod +x "$work/agent"
  ip netns exec vs-drv "$mpirun" --allow-run-as-root --host "$hosts" -np $((nodes + 1)) \
    --mca plm_rsh_agent "$work/agent" --mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 \
    --mca btl_tcp_if_include 10.77.0.0/16 --mca oob_tcp_if_include 10.77.0.0/16 \
    ${MPI_BCAST_ALGORITHM:+--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm "$MPI_BCAST_ALGORITHM"} \
    ${MPI_BCAST_SEGMENT:+--mca coll_tuned_bcast_algorithm_segmentsize "$MPI_BCAST_SEGMENT"} \
    "$python" "$here/mpi_bcast.py" "$size_bytes" "$repeat" 2>>"$work/mpi.log" | grep '^nodes='
  exit "${PIPESTATUS[0]}"
fi

for i in $(seq 0 $((nodes - 1))); do
  ip netns exec "vs-n$i" "$vocab" worker --listen "10.77.0.$((i + 10)):7070" --name "n$i" \
    --cluster "$work/cluster.toml" 2>>"$work/workers.log" &
  pids+=($!)
done
for _ in $(seq 100); do
  ip netns exec vs-drv "$vocab" cluster status --cluster "$work/cluster.toml" >/dev/null 2>&1 && break
  sleep 0.1
done
ip netns exec vs-drv "$vocab" cluster status --cluster "$work/cluster.toml" >/dev/null

ip netns exec vs-drv "$vocab" bench broadcast --cluster "$work/cluster.toml" --bytes "$bytes" \
  --algorithm "$algorithm" --repeat "$repeat" \
  | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(nodes|bytes|algorithm|seconds)=/) printf "%s%s", (n++ ? " " : ""), $i; n = 0; print "" }'
