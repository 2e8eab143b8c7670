#!/usr/bin/env bash
# Reruns the hostile cases of issue #18 against a release build and writes a table of attempts
# and outcomes: results/robustness.csv and results/README.md. Root is needed for the tmpfs case.
# Every loop is bounded; everything runs on loopback and in a temporary folder removed on exit.
#
# usage: eval/robustness/run.sh [--vocab PATH]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
vocab="$root/target/release/vocab"
[ "${1:-}" = --vocab ] && vocab=$2
[ -x "$vocab" ] || (cd "$root" && cargo build --release --quiet)
work=$(mktemp -d /tmp/vocab-robust.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
  mountpoint -q "$work/small" && umount "$work/small"
  mountpoint -q "$work/tiny" && umount "$work/tiny"
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$here/results"
csv="$here/results/robustness.csv"
echo "case,attempt,expected,outcome,detail" > "$csv"
row() { # case attempt expected ok(0/1) detail
  local verdict=held; [ "$4" = 0 ] || verdict=FAILED
  printf '%s,"%s","%s",%s,"%s"\n' "$1" "$2" "$3" "$verdict" "${5//\"/\'}" >> "$csv"
  echo "$verdict: $1 - $5"
}
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

"$vocab" datasets photos --out "$work/photos" --per-kind 2 --seed 3 >/dev/null

# 1. A decompression bomb: a 3.5 KB PNG declaring 60000 x 60000 pixels.
python3 - "$work/photos/bomb.png" <<'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 60000, 60000, 8, 0, 0, 0, 0))
png += chunk(b"IDAT", zlib.compress(b"\0" * 3000)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
PY
/usr/bin/time -f "%M" -o "$work/peak" "$vocab" features --input "$work/photos" --out "$work/f.bin" --quiet >/dev/null 2>"$work/err"
rc=$?; peak=$(tail -1 "$work/peak")
grep -q -E 'bomb.png,"?too many pixels' "$work/f.bin.skipped.csv"; listed=$?
row bomb "features over a folder with a PNG declaring 60000x60000" "skipped with its reason; memory bounded" \
  $(( rc != 0 || listed != 0 || peak > 1000000 )) "exit $rc; listed as too many pixels: $([ $listed = 0 ] && echo yes || echo no); peak RSS $((peak / 1024)) MB"
rm -f "$work/photos/bomb.png"

# 2. Link loops and dangling links in the photo folder.
ln -s . "$work/photos/loop"; ln -s nowhere.jpg "$work/photos/gone.jpg"
"$vocab" features --input "$work/photos" --out "$work/g.bin" --quiet >/dev/null 2>"$work/err"; rc=$?
n=$(grep -c -E "loop,symbolic link loop|gone.jpg,dangling" "$work/g.bin.skipped.csv")
row links "features over a folder with a link loop and a dangling link" "both listed as skipped; the run goes on" \
  $(( rc != 0 || n != 2 )) "exit $rc; $n of 2 listed"
rm -f "$work/photos/loop" "$work/photos/gone.jpg"

# 3. Absurd patch counts.
timeout 20 "$vocab" features --input "$work/photos" --out "$work/h.bin" --per-image 100000000 --quiet >/dev/null 2>"$work/err"; rc=$?
row per_image "features --per-image 100000000" "refused before allocating" $(( rc != 1 )) "exit $rc: $(head -c 120 "$work/err")"

# 4-6. A worker daemon under pre-authentication abuse.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n" > "$work/secret")
printf '[settings]\nsecret_file = "secret"\n\n[[nodes]]\nname = "w0"\naddress = "127.0.0.1:%s"\n' "$port" > "$work/cluster.toml"
"$vocab" worker --listen "127.0.0.1:$port" --cluster "$work/cluster.toml" --name w0 2>"$work/worker.log" &
wpid=$!; pids+=("$wpid")
for _ in $(seq 50); do "$vocab" cluster status --cluster "$work/cluster.toml" >/dev/null 2>&1 && break; sleep 0.1; done
before=$(rss_kb "$wpid")
python3 - "$port" <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
conns = []
for _ in range(64):
    s = socket.create_connection(("127.0.0.1", port))
    # A frame header announcing 16 MiB, then 1 MiB of its payload.
    s.sendall(b"VC" + bytes([1, 1]) + struct.pack("<I", 16 << 20) + b"\0" * 4)
    try:
        s.sendall(b"\0" * (1 << 20))
    except OSError:
        pass
    conns.append(s)
time.sleep(1)
PY
after=$(rss_kb "$wpid"); log=$(stat -c %s "$work/worker.log")
row preauth_frames "64 connections announcing 16 MiB frames before authenticating" "worker memory and log stay small" \
  $(( after - before > 65536 || log > 65536 )) "RSS $((before / 1024)) -> $((after / 1024)) MB; log $log bytes"
python3 - "$port" <<'PY' &
import socket, sys, time
conns = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(300)]
time.sleep(6)
PY
flood=$!; sleep 0.5
start=$(date +%s.%N)
"$vocab" cluster status --cluster "$work/cluster.toml" >/dev/null 2>&1; rc=$?
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
wait "$flood" 2>/dev/null
row idle_flood "300 idle connections, then vocab cluster status" "status answers at once (every handshake starts as it arrives)" \
  $(( rc != 0 || $(python3 -c "print(int($took > 2))") )) "exit $rc after $took s"
chmod 644 "$work/secret"
timeout 10 "$vocab" worker --listen 127.0.0.1:0 --cluster "$work/cluster.toml" --name w0 >/dev/null 2>"$work/err"; rc=$?
grep -q "chmod 600" "$work/err"; named=$?
row open_secret "a worker started with a world-readable secret" "refused, naming the file" $(( rc == 0 || named != 0 )) "exit $rc: $(head -c 100 "$work/err")"
chmod 600 "$work/secret"

# 7. One huge outlier in the features.
python3 - "$work/out.txt" <<'PY'
import sys
rows = [f"{i} 0 0 " + " ".join(str((i * 7 + d) % 10 / 10) for d in range(8)) for i in range(300)]
rows[137] = "137 0 0 1e30 " + " ".join("0.5" for _ in range(7))
open(sys.argv[1], "w").write("\n".join(rows) + "\n")
PY
for kernel in f32 int8; do
  "$vocab" kmeans --features "$work/out.txt" --k 4 --out "$work/o-$kernel.bin" --kernel "$kernel" --quiet >/dev/null 2>"$work/err"; rc=$?
  grep -q -E "record 137|line 138" "$work/err"; named=$?
  row "outlier_$kernel" "k-means ($kernel) on data with one 1e30 value" "refused naming the record; no vocabulary" \
    $(( rc == 0 || named != 0 || $([ -e "$work/o-$kernel.bin" ] && echo 1 || echo 0) )) "exit $rc: $(head -c 140 "$work/err")"
done

# 8. A partition set rebuilt onto a full disk.
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$work/small"; mount -t tmpfs -o size=3m tmpfs "$work/small"
  "$vocab" datasets synth --n 200 --dims 64 --clusters 4 --out "$work/s.bin" >/dev/null
  "$vocab" partition --features "$work/s.bin" --parts 2 --out "$work/small/parts" >/dev/null
  sum_before=$(cat "$work/small/parts"/* | md5sum)
  "$vocab" datasets synth --n 20000 --dims 64 --clusters 4 --out "$work/big.bin" >/dev/null
  "$vocab" partition --features "$work/big.bin" --parts 4 --out "$work/small/parts" >/dev/null 2>"$work/err"; rc=$?
  sum_after=$(cat "$work/small/parts"/* | md5sum)
  row disk_full "vocab partition over an existing set onto a full 3 MB tmpfs" "fails; the old set is untouched" \
    $(( rc == 0 || ${#sum_before} == 0 )) "exit $rc; old set $([ "$sum_before" = "$sum_after" ] && echo identical || echo CHANGED): $(head -c 100 "$work/err")"
  [ "$sum_before" = "$sum_after" ] || sed -i '$ s/,held,/,FAILED,/' "$csv"
fi

# 9. Two runs on one work directory.
"$vocab" run "$root/configs/quickstart.toml" --work "$work/run" --quiet >/dev/null 2>&1 &
first=$!; sleep 0.3
"$vocab" run "$root/configs/quickstart.toml" --work "$work/run" --quiet >/dev/null 2>"$work/err"; rc=$?
wait "$first"; first_rc=$?
grep -q "in use by another vocab run" "$work/err"; refused=$?
row two_runs "a second vocab run on a work directory in use" "refused naming the holder; the first finishes" \
  $(( rc == 0 || refused != 0 || first_rc != 0 )) "second exit $rc ($(head -c 90 "$work/err")); first exit $first_rc"

# 10. A run killed at a random moment, then run again.
"$vocab" run "$root/configs/quickstart.toml" --work "$work/clean" --quiet >/dev/null 2>&1
"$vocab" run "$root/configs/quickstart.toml" --work "$work/killed" --quiet >/dev/null 2>&1 &
victim=$!; sleep 0.$((RANDOM % 9 + 1)); kill -9 "$victim" 2>/dev/null; wait "$victim" 2>/dev/null
"$vocab" run "$root/configs/quickstart.toml" --work "$work/killed" --quiet >/dev/null 2>"$work/err"; rc=$?
same=0
for v in "$work"/clean/kmeans/*/vocabulary.bin; do
  cmp -s "$v" "$work/killed/kmeans/$(basename "$(dirname "$v")")/vocabulary.bin" || same=1
done
row killed_run "vocab run killed (SIGKILL) mid-way, then run again" "resumes; vocabularies identical to an uninterrupted run" \
  $(( rc != 0 || same != 0 )) "rerun exit $rc; vocabularies $([ $same = 0 ] && echo identical || echo DIFFER)"

# 11. A worker killed in the middle of distributed k-means.
"$vocab" datasets synth --n 200000 --dims 64 --clusters 32 --seed 2 --out "$work/k.bin" >/dev/null
"$vocab" partition --features "$work/k.bin" --parts 12 --out "$work/kparts" >/dev/null
"$vocab" kmeans --features "$work/kparts" --k 512 --iterations 8 --tol 0 --seed 1 --out "$work/local.bin" --quiet >/dev/null
"$vocab" kmeans --features "$work/kparts" --k 512 --iterations 8 --tol 0 --seed 1 --out "$work/dist.bin" \
  --local-nodes 3 --quiet >"$work/dist.log" 2>&1 &
driver=$!
# Kill worker w1 once iteration 2 is under way (bounded wait).
for _ in $(seq 300); do grep -q "^iter 2 " "$work/dist.log" && break; sleep 0.1; done
victim=$(pgrep -f "vocab worker .*--name w1" | head -1)
[ -n "$victim" ] && kill -9 "$victim"
wait "$driver"; rc=$?
cmp -s "$work/local.bin" "$work/dist.bin"; same=$?
row killed_worker "one of 3 loopback workers killed (SIGKILL) during k-means" "dropped; vocabulary identical to one process" \
  $(( rc != 0 || same != 0 || ${#victim} == 0 )) "killed pid ${victim:-none}; exit $rc; vocabulary $([ $same = 0 ] && echo identical || echo DIFFERS)"

# 12-14. One way out (issue 49): vocab words over its own vocabulary, a photo, or the labels
# through its CSV; a FIFO given as --out; a work folder vocab did not make.
"$vocab" features --input "$work/photos" --per-image 20 --out "$work/w.bin" --quiet >/dev/null
"$vocab" kmeans --features "$work/w.bin" --k 4 --out "$work/wv.bin" --quiet >/dev/null
cp "$work/photos/labels.csv" "$work/lab.csv"
sum_before=$(cat "$work/wv.bin" "$work/lab.csv" "$work"/photos/city/* | sha256sum)
held=0; said=""
for attempt in "--out $work/wv.bin" "--out $(ls -d "$work"/photos/city/* | head -1)" "--out $work/photos/montage.png" "--out $work/lab --labels $work/lab.csv"; do
  # shellcheck disable=SC2086
  "$vocab" words --vocabulary "$work/wv.bin" --input "$work/photos" --words 2 --patches 2 --per-image 5 $attempt >/dev/null 2>"$work/err"
  rc=$?; [ $rc = 1 ] || held=1; said="$said; $(head -c 90 "$work/err")"
done
sum_after=$(cat "$work/wv.bin" "$work/lab.csv" "$work"/photos/city/* | sha256sum)
[ ! -e "$work/photos/montage.png" ] || held=1
row words_outputs "vocab words --out its vocabulary, a photo, a new file among the photos, the labels through <out>.csv" \
  "each refused naming both; every input unchanged" $(( held != 0 )) "inputs $([ "$sum_before" = "$sum_after" ] && echo unchanged || echo CHANGED)${said}"
mkfifo "$work/pipe.bin"; held=0; said=""
for cmd in "convert --input $work/w.bin" "kmeans --features $work/w.bin --k 4" "features --input $work/photos --per-image 5"; do
  # shellcheck disable=SC2086
  timeout 20 "$vocab" $cmd --out "$work/pipe.bin" >/dev/null 2>"$work/err"; rc=$?
  [ $rc = 1 ] && grep -q "is a FIFO" "$work/err" || held=1
done
[ -p "$work/pipe.bin" ] || held=1
row fifo_out "convert, kmeans and features with --out a FIFO" "refused naming it; the FIFO stays a FIFO" $(( held != 0 )) \
  "$(head -c 120 "$work/err")"
mkdir -p "$work/mine/report"; echo notes > "$work/mine/report/report.md"
"$vocab" run "$root/configs/quickstart.toml" --work "$work/mine" >/dev/null 2>"$work/err"; rc=$?
row foreign_work "vocab run --work a folder holding report/report.md of another tool" "refused; the folder untouched" \
  $(( rc != 1 || $(cat "$work/mine/report/report.md" | grep -c notes) != 1 )) "exit $rc: $(head -c 120 "$work/err")"

# 15. A vocabulary made again at its path after a model was trained over it.
"$vocab" encode --vocabulary "$work/wv.bin" --input "$work/photos" --out "$work/h.bin" --stride 16 >/dev/null
"$vocab" train --histograms "$work/h.bin" --labels "$work/photos/labels.csv" --attribute urbanicity --cv 2 --out "$work/m.json" >/dev/null
"$vocab" kmeans --features "$work/w.bin" --k 4 --seed 9 --out "$work/wv.bin" --quiet >/dev/null
"$vocab" classify --model "$work/m.json" --input "$work/photos" --out "$work/labels-out.csv" >/dev/null 2>"$work/err"; rc=$?
row remade_vocabulary "classify after k-means wrote another vocabulary to the model's vocabulary path" \
  "refused by its digest; no labels written" $(( rc != 1 || $([ -e "$work/labels-out.csv" ] && echo 1 || echo 0) )) "exit $rc: $(head -c 140 "$work/err")"

# 16. A mixture learned on HOG x 1e6.
python3 - "$work/w.bin" "$work/big.npy" <<'PY'
import struct, sys
raw = open(sys.argv[1], "rb").read()
dims, n = struct.unpack_from("<IQ", raw, 12)
rec = 8 + 4 * dims
vals = []
for i in range(n):
    vals.extend(struct.unpack_from(f"<{dims}f", raw, 32 + i * rec + 8))
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, dims)
hdr += " " * (63 - (len(hdr) + 10) % 64) + "\n"
with open(sys.argv[2], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
    f.write(struct.pack(f"<{len(vals)}f", *[v * 1e6 for v in vals]))
PY
"$vocab" mixture --features "$work/big.npy" --components 3 --pca-dims 8 --seed 1 --out "$work/big-gmm.json" >/dev/null 2>"$work/err"; rc=$?
spread=$(python3 -c "import json,sys; w=json.load(open(sys.argv[1]))['gmm']['weights']; print(f'{max(w)-min(w):.3f}')" "$work/big-gmm.json" 2>/dev/null || echo none)
row mixture_scale "vocab mixture on HOG values x 1e6" "the mixture of the values, not equal weights and zero means" \
  $(( rc != 0 )) "exit $rc; weights spread $spread (equal weights: 0.000)"

# 17. Settings of vocab words whose memory together is too large.
/usr/bin/time -f "%M" -o "$work/peak" "$vocab" words --vocabulary "$work/wv.bin" --input "$work/photos" --out "$work/x.png" \
  --words 1024 --patches 64 --zoom 8 >/dev/null 2>"$work/err"; rc=$?; peak=$(tail -1 "$work/peak")
row words_memory "vocab words --words 1024 --patches 64 --zoom 8 (6.4 GB asked)" "refused with the figure before allocating" \
  $(( rc != 1 || peak > 200000 )) "exit $rc; peak RSS $((peak / 1024)) MB: $(head -c 160 "$work/err")"

# 18. A CSV input with a 200 MB line, and a quote never closed.
python3 -c "import sys; open(sys.argv[1],'w').write('1,' * 100_000_000 + '1\n')" "$work/long.csv"
/usr/bin/time -f "%M" -o "$work/peak" "$vocab" convert --input "$work/long.csv" --out "$work/long.bin" >/dev/null 2>"$work/err"; rc=$?; peak=$(tail -1 "$work/peak")
row csv_line "convert of a CSV whose one line is 200 MB" "refused past 4 MiB, memory bounded" \
  $(( rc != 1 || peak > 100000 )) "exit $rc; peak RSS $((peak / 1024)) MB: $(head -c 140 "$work/err")"
python3 -c "import sys; open(sys.argv[1],'w').write('1,\"' + 'x' * 200_000_000)" "$work/quote.csv"
/usr/bin/time -f "%M" -o "$work/peak" "$vocab" convert --input "$work/quote.csv" --out "$work/quote.bin" >/dev/null 2>"$work/err"; rc=$?; peak=$(tail -1 "$work/peak")
row csv_quote "convert of a CSV with a quote never closed, 200 MB long" "refused saying so, memory bounded" \
  $(( rc != 1 || peak > 100000 )) "exit $rc; peak RSS $((peak / 1024)) MB: $(head -c 140 "$work/err")"
rm -f "$work/long.csv" "$work/quote.csv"

# 19. A 300 MB model.
python3 -c "import sys; open(sys.argv[1],'w').write('{\"weights\": [' + '0,' * 150_000_000 + '0]}')" "$work/huge.json"
/usr/bin/time -f "%M" -o "$work/peak" "$vocab" classify --model "$work/huge.json" --input "$work/photos" --out "$work/y.csv" >/dev/null 2>"$work/err"; rc=$?; peak=$(tail -1 "$work/peak")
row json_size "classify with a 300 MB model file" "refused by its size before it is parsed" \
  $(( rc != 1 || peak > 100000 )) "exit $rc; peak RSS $((peak / 1024)) MB: $(head -c 140 "$work/err")"
rm -f "$work/huge.json"

# 20. A seed no record can hold.
"$vocab" kmeans --features "$work/w.bin" --k 4 --seed 9223372036854775808 --out "$work/seed.bin" >/dev/null 2>"$work/err"; rc=$?
row seed "kmeans --seed 2^63" "refused before any work" $(( rc != 2 || $([ -e "$work/seed.bin" ] && echo 1 || echo 0) )) "exit $rc: $(head -c 140 "$work/err")"

# 21. convert onto a full disk: the error gives its reason.
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$work/tiny" && mount -t tmpfs -o size=1m tmpfs "$work/tiny"
  "$vocab" datasets synth --n 5000 --dims 64 --clusters 4 --out "$work/c.bin" >/dev/null
  "$vocab" convert --input "$work/c.bin" --out "$work/tiny/c.csv" >/dev/null 2>"$work/err"; rc=$?
  grep -q "No space left" "$work/err"; said=$?
  left=$(ls -A "$work/tiny" | wc -l)
  umount "$work/tiny"
  row convert_full "convert of 1.3 MB of vectors to CSV onto a full 1 MB tmpfs" "fails saying why; nothing left behind" \
    $(( rc != 1 || said != 0 || left != 0 )) "exit $rc; $left files left: $(head -c 140 "$work/err")"
fi

# The mutants' section (written by the mutants example's run) is kept after the table.
mutants=$(sed -n '/^# Mutants/,$p' "$here/results/README.md" 2>/dev/null)
python3 - "$csv" > "$here/results/README.md" <<'PY'
import csv, subprocess, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if l.startswith("Model name")), "?")
print("# Hostile inputs and peers: what holds\n")
print(f"Command: `eval/robustness/run.sh` (root, release build). Machine: {model}, 2 cores.")
print("Rows: `robustness.csv`. Stalled workers and fuzzed frames are covered by the test suite (cluster")
print("driver tests; `frame` and `auth` proptests: `PROPTEST_CASES=20000 cargo test -p vocab-cluster")
print("handshake_fuzz` for a longer fuzz of the handshake).\n")
print("| case | attempt | expected | outcome | detail |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['case']} | {r['attempt']} | {r['expected']} | {r['outcome']} | {r['detail']} |")
held = sum(r["outcome"] == "held" for r in rows)
print(f"\n{held} of {len(rows)} held.")
PY
[ -n "$mutants" ] && printf '\n%s\n' "$mutants" >> "$here/results/README.md"
cat "$here/results/README.md"
