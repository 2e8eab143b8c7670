#!/usr/bin/env bash
# vocab run on the emulated cluster (root needed): the whole chain (features, k-means, encode)
# on N worker daemons in network namespaces (eval/netsim/lib.sh), each held to a CPU quota, the
# driver in its own namespace; the photos and the work folder on the shared filesystem. Also the
# same config on one machine without namespaces, for the byte-for-byte comparison.
#
# usage: eval/distributed/photos.sh [--nodes "1 2 4"] [--cpu-per-node 0.45] [--config FILE]
#          [--link-mbit 1000] [--out DIR]
# Writes DIR/<label>.log (the driver's output), DIR/<label>-steps.csv (the report's step times),
# and DIR/files-<label>.txt (checksums of every features, kmeans, encode and svm output).
# With a config whose [partition] at = "nodes" (scene15-k256-born.toml) the one-machine run
# makes its partitions as usual and the node runs keep theirs at the nodes (no sample file at
# the driver: the report says so).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab="$root/target/release/vocab"
node_counts="1 2 4" cpu=0.45 link=1000 config="$here/scene15-k256.toml" out="$here/results/photos"
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) node_counts=$2; shift 2 ;;
    --cpu-per-node) cpu=$2; shift 2 ;;
    --link-mbit) link=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "photos.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
(cd "$root" && cargo build --release --quiet)
mkdir -p "$out"
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
# The config with its dataset path made absolute, engine settings left to the command line.
resolved=$(mktemp /tmp/vocab-photos-config.XXXXXX.toml)
trap 'rm -f "$resolved"' EXIT
python3 - "$config" "$resolved" <<'PY'
import os, re, sys
src, dst = sys.argv[1], sys.argv[2]
base = os.path.dirname(src)
text = open(src).read()
text = re.sub(r'^path = "(.*)"', lambda m: 'path = "%s"' % os.path.normpath(os.path.join(base, m.group(1))), text, flags=re.M)
text = re.sub(r'^nodes = .*$', 'nodes = 0', text, flags=re.M)
open(dst, "w").write(text)
PY
checksums() { # work label (a model records its vocabulary's path: the work folder is cut out;
  # step keys too, in names and contents, since partitions born on the nodes key the features
  # step by its partitioning as well)
  (cd "$1" && find features kmeans encode svm -type f \
     \( -name '*.bin' -o -name 'sample.bin.*.csv' -o -name 'histograms.bin.*.csv' -o -name 'model.json' -o -name '*.metrics.csv' \) \
     ! -path '*workers*' | sort | while read -r f; do
       printf '%s  %s\n' "$(sed -E "s|$1||g; s/-[0-9a-f]{12}//g" "$f" | md5sum | cut -d' ' -f1)" \
         "$(echo "$f" | sed -E 's/-[0-9a-f]{12}//g')"
     done) > "$out/files-$2.txt"
}
steps() { # work label
  cp "$1/report/steps.csv" "$out/$2-steps.csv"
}

# One machine: both cores, no namespaces.
work=$(mktemp -d /tmp/vocab-photos-local.XXXXXX)
"$vocab" run "$resolved" --work "$work" > "$out/local.log" 2>&1
steps "$work" local; checksums "$work" local; rm -rf "$work"

for nodes in $node_counts; do
  (
    racks=1 core=$((link * 4)) chunk=1048576 sockbuf=4194304 chains=1 order=rack seed=1
    . "$root/eval/netsim/lib.sh"
    netsim_init
    netsim_topology
    netsim_cluster_file
    netsim_start_workers "$cpu" 1
    runwork="$work-n$nodes"
    ip netns exec vs-drv "$vocab" run "$resolved" --work "$runwork" --cluster "$work/cluster.toml" \
      > "$out/n$nodes.log" 2>&1 || { tail -30 "$out/n$nodes.log" >&2; rm -rf "$runwork"; exit 1; }
    steps "$runwork" "n$nodes"; checksums "$runwork" "n$nodes"; rm -rf "$runwork"
  )
done
python3 "$here/photos_report.py" "$out" $node_counts > "$out/results.md"
cat "$out/results.md"
