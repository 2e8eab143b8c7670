#!/usr/bin/env bash
# Final inertia of faiss and vocab (pruned-int8, exact) from several starts: k = 16,384 on the
# 201,000 HOG vectors of run.sh, 20 iterations, starts drawn with numpy seeds 1..S (seed 0 is
# run.sh's own run). Each start runs run.py (results-starts-SEED.*); starts.csv and starts.md
# gather the final inertias. usage: eval/large_k/starts.sh [S]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
starts=${1:-3}
for seed in $(seq 1 "$starts"); do
  "$here/run.sh" --ks 16384 --modes faiss,pruned-int8 --init-seed "$seed" --name "starts-$seed"
done
python3 - "$here" "$starts" <<'PY'
import csv, pathlib, sys
here, starts = pathlib.Path(sys.argv[1]), int(sys.argv[2])
rows = []
for seed in range(1, starts + 1):
    got = {r["mode"]: r for r in csv.DictReader(open(here / f"results-starts-{seed}.csv"))}
    f, v = float(got["faiss"]["final_inertia"]), float(got["pruned-int8"]["final_inertia"])
    rows.append(dict(seed=seed, faiss=f, vocab=v, difference=(v - f) / f,
                     faiss_seconds=got["faiss"]["seconds_to_all"], vocab_seconds=got["pruned-int8"]["seconds_to_all"]))
with open(here / "starts.csv", "w", newline="") as out:
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
lines = ["| start (numpy seed) | faiss inertia | vocab pruned-int8 inertia | vocab - faiss | faiss s | vocab s |",
         "|---|---|---|---|---|---|"]
for r in rows:
    lines.append(f"| {r['seed']} | {r['faiss']:.6e} | {r['vocab']:.6e} | {100 * r['difference']:+.4f}% | "
                 f"{float(r['faiss_seconds']):.0f} | {float(r['vocab_seconds']):.0f} |")
(here / "starts.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
