# Shared by broadcast.sh and kmeans.sh (source it; root needed): an emulated cluster of network
# namespaces. Namespace vs-sw holds the bridges br-r0..br-r{R-1} and br-core; node i (namespace
# vs-n<i>, address 10.77.0.<i+10>) hangs off rack i % R; the driver (vs-drv, 10.77.0.2) hangs off
# rack 0. Node and driver links are shaped to M Mbit/s in both directions, each rack's uplink to
# the core to C Mbit/s in both directions. Optionally each worker runs in a cgroup (v1 cpu
# controller) with a CPU quota, so N emulated nodes of equal capacity share the host's cores.
#
# Uneven clusters: `cores` (comma-separated Mbit/s per rack) overrides `core` rack by rack, and
# `slow` ("I:MBIT") shapes node I's upload (what it sends) to MBIT instead of `link`. Orders: `rack` (rack
# labels in the cluster file), `random` (an explicit shuffled order), `none` (no labels: file
# order, racks interleaved as a scheduler may list them) and `auto` (no labels; the caller asks
# vocab to measure the links).
#
# The caller sets: nodes racks link core chunk sockbuf chains order seed vocab (and optionally
# cores slow), and calls
#   netsim_init; netsim_topology; netsim_cluster_file; netsim_start_workers [cpu-cores] [threads]
# Everything (namespaces, cgroups, processes, the work folder) is removed on exit.

netsim_init() {
  [ "$(id -u)" = 0 ] || { echo "$0: needs root (network namespaces)" >&2; exit 2; }
  [ -x "$vocab" ] || { echo "$0: no vocab binary at $vocab (cargo build --release)" >&2; exit 2; }
  [ "$nodes" -ge 1 ] && [ "$racks" -ge 1 ] || { echo "$0: --nodes and --racks must be >= 1" >&2; exit 2; }
  case "$order" in rack|random|none|auto) ;; *) echo "$0: --order is rack, random, none or auto" >&2; exit 2 ;; esac
  work=$(mktemp -d /tmp/vocab-netsim.XXXXXX)
  pids=()
  trap netsim_cleanup EXIT INT TERM
  netsim_remove_leftovers
}

netsim_remove_leftovers() {
  for ns in $(ip netns list | awk '/^vs-/ {print $1}'); do ip netns del "$ns" 2>/dev/null || true; done
  for cg in /sys/fs/cgroup/cpu/vs-n*; do [ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true; done
}

netsim_cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  netsim_remove_leftovers
  rm -rf "$work"
}

# tbf needs a burst of at least rate/HZ; 1 ms worth of traffic, and never under 16 KiB.
netsim_shape() { # netns dev mbit
  local burst=$(( $3 * 1000000 / 8 / 1000 ))
  [ "$burst" -lt 16384 ] && burst=16384
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "${3}mbit" burst "$burst" latency 100ms
}

netsim_attach() { # netns address rack [upload mbit]
  local ns=$1 addr=$2 rack=$3 port="p-$1" up=${4:-$link}
  ip netns add "$ns"
  ip netns exec "$ns" ip link set lo up
  ip link add "$port" type veth peer name eth0 netns "$ns"
  ip link set "$port" netns vs-sw
  ip netns exec vs-sw ip link set "$port" master "br-r$rack" up
  ip netns exec "$ns" ip addr add "$addr/16" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  netsim_shape "$ns" eth0 "$up"
  netsim_shape vs-sw "$port" "$link"
}

netsim_topology() {
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
    local rate=$core
    if [ -n "${cores:-}" ]; then
      rate=$(echo "$cores" | cut -d, -f$((r + 1)))
      [ -n "$rate" ] || rate=$core
    fi
    netsim_shape vs-sw "up-r$r" "$rate"
    netsim_shape vs-sw "dn-r$r" "$rate"
  done
  netsim_attach vs-drv 10.77.0.2 0
  names=()
  for i in $(seq 0 $((nodes - 1))); do
    local rate=$link
    [ -n "${slow:-}" ] && [ "${slow%%:*}" = "$i" ] && rate=${slow#*:}
    netsim_attach "vs-n$i" "10.77.0.$((i + 10))" $((i % racks)) "$rate"
    names+=("n$i")
  done
}

netsim_cluster_file() {
  (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret")
  {
    if [ "$order" = random ]; then
      # In a TOML file `order` must come before the first table.
      printf 'order = [%s]\n' "$(printf '%s\n' "${names[@]}" | shuf --random-source=<(yes "$seed") | sed 's/.*/"&"/' | paste -sd, -)"
    fi
    echo "[settings]"
    echo "secret_file = \"secret\""
    echo "chunk_size = $chunk"
    echo "socket_buffer = $sockbuf"
    echo "chains = $(( chains < nodes ? chains : nodes ))"
    echo "io_timeout_ms = 600000"
    for i in $(seq 0 $((nodes - 1))); do
      printf '\n[[nodes]]\nname = "n%d"\naddress = "10.77.0.%d:7070"\n' "$i" $((i + 10))
      if [ "$order" = rack ]; then printf 'rack = "r%d"\n' $((i % racks)); fi
    done
  } > "$work/cluster.toml"
}

netsim_start_workers() { # [cpu cores per worker, e.g. 0.25; empty = no limit] [map threads]
  local cpu=${1:-} threads=${2:-}
  for i in $(seq 0 $((nodes - 1))); do
    if [ -n "$cpu" ]; then
      local cg=/sys/fs/cgroup/cpu/vs-n$i
      mkdir -p "$cg"
      echo 100000 > "$cg/cpu.cfs_period_us"
      local quota
      quota=$(awk -v c="$cpu" 'BEGIN { printf "%d", c * 100000 }')
      echo "$quota" > "$cg/cpu.cfs_quota_us"
    fi
    ( [ -n "$cpu" ] && echo $BASHPID > "/sys/fs/cgroup/cpu/vs-n$i/cgroup.procs"
      ${threads:+export RAYON_NUM_THREADS=$threads}
      exec ip netns exec "vs-n$i" "$vocab" worker --listen "10.77.0.$((i + 10)):7070" --name "n$i" \
        --cluster "$work/cluster.toml" ) 2>>"$work/workers.log" &
    pids+=($!)
  done
  for _ in $(seq 100); do
    ip netns exec vs-drv "$vocab" cluster status --cluster "$work/cluster.toml" >/dev/null 2>&1 && break
    sleep 0.1
  done
  ip netns exec vs-drv "$vocab" cluster status --cluster "$work/cluster.toml" >/dev/null
}

# Writes $work/agent, Open MPI's launch agent (--mca plm_rsh_agent) for ranks in namespaces:
# `agent ADDRESS CMD...` enters the namespace that $work/hosts ("address namespace" lines) names
# for ADDRESS, with a hostname of its own (shared/notes/mpi-in-netns.md). With `cgroup`, the
# rank also joins its namespace's CPU cgroup (/sys/fs/cgroup/cpu/<namespace>, made by the caller).
netsim_mpi_agent() { # [cgroup]
  local join=
  # mpirun runs in a namespace whose /sys hides the cgroup tree: the agent reaches it through
  # the mounts of this script's process (/proc/PID/root), which sees the host's.
  [ "${1:-}" = cgroup ] && join="echo \$\$ > \"/proc/$$/root/sys/fs/cgroup/cpu/\$ns/cgroup.procs\""
  cat > "$work/agent" <<AGENT
#!/bin/bash
h=\$1; shift
ns=\$(awk -v h="\$h" '\$1 == h {print \$2}' "$work/hosts")
$join
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns; \$*"
AGENT
  chmod +x "$work/agent"
}
