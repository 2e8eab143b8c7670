#!/usr/bin/env python3
"""A same-size stand-in for the published 15-Scene photos, to time `configs/scene15.toml` where the
published set is not at hand: each class gets the published count of photos (Bedroom 216 ...
OpenCountry 410; 4,485 in all), copies of the development set's photos of that class taken in
turn, so the sizes and content are real but every photo appears two to four times (its
accuracies mean nothing).

usage: standin.py DEV OUT      (DEV: scene15-train with labels.csv; OUT: a folder for
       `vocab datasets scene15 --from OUT --out DIR`)
"""
import csv
import shutil
import sys
from collections import defaultdict
from pathlib import Path

PUBLISHED = {
    "Bedroom": 216, "Coast": 360, "Forest": 328, "Highway": 260, "Industrial": 311,
    "InsideCity": 308, "Kitchen": 210, "LivingRoom": 289, "Mountain": 374, "Office": 215,
    "OpenCountry": 410, "Store": 315, "Street": 292, "Suburb": 241, "TallBuilding": 356,
}


def main():
    dev, out = Path(sys.argv[1]), Path(sys.argv[2])
    by_class = defaultdict(list)
    with open(dev / "labels.csv", newline="") as f:
        for row in csv.DictReader(f):
            by_class[row["class"]].append(row["path"])
    for name, count in PUBLISHED.items():
        photos = sorted(by_class[name])
        if not photos:
            sys.exit(f"standin.py: {dev} has no photo of {name}")
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            shutil.copyfile(dev / photos[i % len(photos)], folder / f"image_{i + 1:04d}.jpg")
    print(f"{sum(PUBLISHED.values())} photos in {out}")


if __name__ == "__main__":
    main()
