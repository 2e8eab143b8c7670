"""The stratified, seeded folds of the 5-fold experiments (cv.sh, levers.sh): fold i's photos
are held out in round i. Writes WORK/split-<i>.csv (path,split with train/test) and
WORK/train-<i>.csv (the training photos) for each fold.

usage: python3 eval/accuracy/folds.py LABELS.csv WORK SEED FOLDS
"""
import collections
import csv
import random
import sys

labels, work, seed, folds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
by = collections.defaultdict(list)
for r in csv.DictReader(open(labels)):
    by[r["class"]].append(r["path"])
rng = random.Random(seed)
fold = {}
for cls in sorted(by):
    paths = sorted(by[cls])
    rng.shuffle(paths)
    for i, p in enumerate(paths):
        fold[p] = i % folds
for f in range(folds):
    with open(f"{work}/split-{f}.csv", "w") as out:
        out.write("path,split\n" + "".join(f"{p},{'test' if fold[p] == f else 'train'}\n" for p in sorted(fold)))
    with open(f"{work}/train-{f}.csv", "w") as out:
        out.write("path\n" + "".join(p + "\n" for p in sorted(fold) if fold[p] != f))
