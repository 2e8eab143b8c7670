"""Reference dense SIFT descriptors from OpenCV for vocab's SIFT parity test.

usage: python eval/sift_parity/make_fixtures.py   (the interpreter eval/setup-venv.sh prints)

For each photo below (committed with the HOG parity fixtures), OpenCV's SIFT describes upright
keypoints (angle 0) at the centres vocab's dense grid lays out (`pipeline/src/sift.rs`: from
ceil(w / 2) px in, every STEP px while the window of w px stays inside), each of OpenCV's size
w / 6 (its window is 4 cells of 1.5 x size px), and every descriptor is RootSIFT-normalised (L1,
then the square root), as make_sift.py does for eval/descriptors. The photos are decoded by
Pillow (libjpeg-turbo, as vocab decodes JPEG) to 8-bit gray.

Writes fixtures/opencv.bin: u32 count of photos, then per photo: u32 name length, the name
(relative to the repository's root), u32 step, u32 windows, the window sides (f32), u32
keypoints, then per keypoint u32 x, u32 y, f32 window, 128 x f32 descriptor; all little-endian.
"""

import math
import pathlib
import struct

import cv2
import numpy as np
from PIL import Image, ImageOps

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHOTOS = ["eval/hog_parity/fixtures/jpeg/scene15.jpg", "eval/hog_parity/fixtures/gray.png"]
STEP = 10
WINDOWS = [24.0, 42.0]


def centres(length, window, step):
    half = math.ceil(window / 2)
    return list(range(half, length - half + 1, step)) if length >= 2 * half else []


def main():
    out = bytearray(struct.pack("<I", len(PHOTOS)))
    for name in PHOTOS:
        gray = np.asarray(ImageOps.exif_transpose(Image.open(ROOT / name)).convert("L"))
        h, w = gray.shape
        keys = []
        for window in WINDOWS:
            for y in centres(h, window, STEP):
                keys += [(x, y, window) for x in centres(w, window, STEP)]
        kps = [cv2.KeyPoint(float(x), float(y), window / 6.0, 0.0) for x, y, window in keys]
        kept, desc = cv2.SIFT_create().compute(gray, kps)
        assert len(kept) == len(kps), f"{name}: OpenCV dropped keypoints"
        desc = desc.astype(np.float64)
        desc /= np.maximum(desc.sum(axis=1, keepdims=True), 1e-12)
        desc = np.sqrt(desc).astype(np.float32)
        encoded = name.encode()
        out += struct.pack("<I", len(encoded)) + encoded
        out += struct.pack("<II", STEP, len(WINDOWS)) + struct.pack(f"<{len(WINDOWS)}f", *WINDOWS)
        out += struct.pack("<I", len(keys))
        for (x, y, window), d in zip(keys, desc):
            out += struct.pack("<IIf", x, y, window) + d.astype("<f4").tobytes()
        print(f"{name}: {w} x {h}, {len(keys)} keypoints")
    dest = ROOT / "eval/sift_parity/fixtures/opencv.bin"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(bytes(out))
    print(f"wrote {dest} ({len(out)} bytes)")


if __name__ == "__main__":
    main()
