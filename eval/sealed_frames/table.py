"""results.md from broadcast.csv and kmeans.csv: medians per version and their ratio."""
import csv
import statistics
from pathlib import Path

here = Path(__file__).parent


def by_version(rows, key):
    out = {}
    for r in rows:
        out.setdefault(r["version"], []).append(float(r[key]))
    return {v: statistics.median(xs) for v, xs in out.items()}


bc = list(csv.DictReader(open(here / "broadcast.csv")))
km = list(csv.DictReader(open(here / "kmeans.csv")))
print("| measure | before (median) | after (median) | after / before |")
print("|---|---|---|---|")
b = by_version(bc, "seconds")
size = int(bc[0]["bytes"])
print(f"| broadcast 256 MiB, chain of 3 workers, s | {b['before']:.3f} | {b['after']:.3f} | {b['after'] / b['before']:.2f} |")
print(f"| the same, GB/s | {size / b['before'] / 1e9:.2f} | {size / b['after'] / 1e9:.2f} | {b['before'] / b['after']:.2f} |")
for key, name in [("seconds_per_iteration", "k-means s/iteration"), ("broadcast_s", "its broadcast, s"),
                  ("stage2_s", "its stage 2, s"), ("stage3_s", "its stage 3 (gather), s")]:
    m = by_version(km, key)
    print(f"| {name} | {m['before']:.4f} | {m['after']:.4f} | {m['after'] / m['before']:.2f} |")
shas = {r["version"]: r["vocabulary_sha256"] for r in km}
same = len(set(r["vocabulary_sha256"] for r in km)) == 1
print()
print(f"Runs: {len(bc) // 2} broadcasts and {len(km) // 2} k-means runs a version, alternating. "
      f"Vocabularies the same bytes before and after: {'yes' if same else 'NO'} ({shas.get('after')}).")
