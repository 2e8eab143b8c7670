"""Markdown table of encodings.sh: per variant its method, dictionary (K words or G Gaussians),
PCA dims, pyramid levels, values a photo, accuracy per attribute (mean ± sd over the folds), and
per fold the encode rate (photos/s; 1,500 photos over the seconds of every encode the variant
runs, the training photos' mirror images too) and the 15-class SVM seconds (C by inner 5-fold CV, final
fit, scoring).

usage: python3 eval/accuracy/encodings_report.py [encodings.csv [encodings-timings.csv]]
"""
import csv
import re
import statistics
import sys
from collections import defaultdict

here = sys.argv[0].rsplit("/", 1)[0] if "/" in sys.argv[0] else "."
results = sys.argv[1] if len(sys.argv) > 1 else f"{here}/encodings.csv"
timings = sys.argv[2] if len(sys.argv) > 2 else results.replace(".csv", "-timings.csv")
PHOTOS = 1500

acc, values, order = defaultdict(list), {}, []
for r in csv.DictReader(open(results)):
    if r["variant"] not in order:
        order.append(r["variant"])
    acc[(r["variant"], r["attribute"])].append(100 * float(r["accuracy"]))
    values[r["variant"]] = int(r["values"])
seconds = defaultdict(list)
for r in csv.DictReader(open(timings)):
    seconds[(r["variant"], r["stage"])].append(float(r["seconds"]))


def parts(name):
    method = name.split("-")[0]
    k = re.search(r"-[kg](\d+)", name).group(1)
    d = re.search(r"-d(\d+)", name)
    p = re.search(r"-p(\d)(x\d)?", name)
    p = p.group(1) + (f" + {p.group(2)[1:]} strips" if p.group(2) else "")
    notes = []
    if "-chi2" in name:
        notes.append("chi2 map")
    stride = 4 if "-s4" in name else 8
    patch = re.search(r"-patch(\d+)", name)
    up = re.search(r"-up(\d+)", name)
    if stride == 4 and not (patch or up):
        notes.append("stride 4")
    if patch:
        side = int(patch.group(1))
        notes.append(f"{side}-px patches (--patch {side}: photos enlarged {40 / side:.3g}x), stride {stride} of them")
    if up:
        factor = int(up.group(1)) / 1000
        notes.append(f"photos upscaled {factor:.3g}x (patches {40 / factor:.0f} px), stride {stride} of them")
    scales = re.search(r"-sc(\d+(?:-\d+)*)", name)
    if scales:
        notes.append("scales 40, " + ", ".join(scales.group(1).split("-")))
    if "-mirror" in name:
        notes.append("+ mirror images")
    places = re.search(r"-places(\d+)", name)
    if places:
        notes.append(f"spatial terms x {places.group(1)} (spatial-fisher.patch)")
    if name.endswith("-tta"):
        notes.append("scored with mirror images")
    if name.endswith("-tta:single"):
        notes.append("(the same models, photos alone)")
    return method, k, d.group(1) if d else "-", p, ", ".join(notes)


def mean_sd(xs):
    if not xs:
        return "-"
    return f"{statistics.mean(xs):.1f} ± {statistics.stdev(xs):.1f}" if len(xs) > 1 else f"{xs[0]:.1f}"


known = ("class", "urbanicity", "elevation")
attributes = sorted({a for _, a in acc}, key=lambda a: known.index(a) if a in known else 9)
print("| method | K or G | PCA dims | pyramid | values a photo | notes | "
      + " | ".join(f"{a} (%)" for a in attributes)
      + " | folds | encode photos/s | 15-class SVM s / fold |")
print("|---|---|---|---|---|---|" + "---|" * len(attributes) + "---|---|---|")
for v in order:
    method, k, d, p, notes = parts(v)
    cells = [mean_sd(acc.get((v, a), [])) for a in attributes]
    folds = max(len(acc.get((v, a), [])) for a in attributes)
    # With mirror images, their encoding (the training photos again) counts in the rate.
    base = v.removesuffix(":single")
    mirrored = seconds.get((base, "encode-mirrored"), []) or seconds.get((base, "encode-mirrored-all"), [])
    enc = [a + b for a, b in zip(seconds.get((base, "encode"), []), mirrored)] or seconds.get((base, "encode"), [])
    rate = f"{PHOTOS / statistics.mean(enc):.0f}" if enc else "-"
    svm = seconds.get((base, "svm-class"), [])
    print(f"| {method} | {k} | {d} | {p} | {values[v]:,} | {notes} | " + " | ".join(cells)
          + f" | {folds} | {rate} | {statistics.mean(svm):.1f} |" if svm else
          f"| {method} | {k} | {d} | {p} | {values[v]:,} | {notes} | " + " | ".join(cells) + f" | {folds} | {rate} | - |")
