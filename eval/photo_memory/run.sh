#!/usr/bin/env bash
# Peak memory of the photo stages on one 100-Mpix photo (10000 x 10000 PNG), one thread: the
# figure issue 37 asked to bound (`image_io::BYTES_PER_PIXEL`, 12 bytes a pixel of the limit).
# Writes results/photo_memory.csv and prints it. Peak resident memory from /usr/bin/time, in MB
# (10^6 bytes).
#
# usage: eval/photo_memory/run.sh [--vocab PATH]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab="$root/target/release/vocab"
[ "${1:-}" = --vocab ] && vocab=$2
[ -x "$vocab" ] || (cd "$root" && cargo build --release --quiet)
work=$(mktemp -d /tmp/vocab-photo-memory.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rgb" "$work/gray" "$here/results"
python3 - "$work" <<'PY'
import random, struct, sys, zlib
w = h = 10000
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
def png(path, color, rows):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)
    z = zlib.compressobj(6)
    body = b"".join(z.compress(b"\0" + rows(i)) for i in range(h)) + z.flush()
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b""))
png(sys.argv[1] + "/rgb/zeros.png", 2, lambda i: b"\0" * (3 * w))
row = bytes(random.Random(1).randrange(256) for _ in range(w))
png(sys.argv[1] + "/gray/noise.png", 0, lambda i: row[i % 7:] + row[:i % 7])
PY
"$vocab" --quiet datasets synth --n 2000 --dims 512 --clusters 16 --out "$work/f.bin" >/dev/null
"$vocab" --quiet kmeans --features "$work/f.bin" --k 16 --out "$work/voc.bin" >/dev/null
csv="$here/results/photo_memory.csv"
echo "photo,stage,peak_mb,bound_mb" > "$csv"
measure() { # photo stage bound_mb args...
  local photo=$1 stage=$2 bound=$3; shift 3
  /usr/bin/time -f "%M" -o "$work/peak" "$vocab" --quiet --threads 1 "$@" >/dev/null
  echo "$photo,$stage,$(( $(tail -1 "$work/peak") * 1024 / 1000000 )),$bound" >> "$csv"
}
for photo in rgb gray; do
  # Bounds: 12 bytes a pixel (1,200 MB at 100 Mpix) + what the stage keeps (--plan's figures).
  measure $photo "features random 5" 1200 features --input "$work/$photo" --out "$work/r.bin"
  measure $photo "features dense stride 32" 1400 features --input "$work/$photo" --mode dense --stride 32 --out "$work/d.bin"
  measure $photo "encode stride 8" 1250 encode --vocabulary "$work/voc.bin" --input "$work/$photo" --out "$work/h.bin"
  measure $photo "encode stride 8 scales 40+80" 1440 encode --vocabulary "$work/voc.bin" --input "$work/$photo" --scales 40,80 --out "$work/h2.bin"
done
column -s, -t "$csv"
