"""Runs the jpeg_decode example and checks its luminance against Pillow and OpenCV (see run.sh)."""

import argparse
import csv
import pathlib
import platform
import subprocess
import tempfile

import cv2
import numpy as np
import PIL
from PIL import Image, ImageOps, features

HERE = pathlib.Path(__file__).resolve().parent
WEIGHTS = np.array([0.2125, 0.7154, 0.0721], dtype=np.float32)


def luminance(rgb):
    """vocab's luminance, in float32 with the same operation order."""
    rgb = rgb.astype(np.float32)
    return WEIGHTS[0] * rgb[..., 0] + WEIGHTS[1] * rgb[..., 1] + WEIGHTS[2] * rgb[..., 2]


def reference(path, reader):
    if reader == "pillow":
        img = ImageOps.exif_transpose(Image.open(path))
        return np.asarray(img).astype(np.float32) if img.mode == "L" else luminance(np.asarray(img.convert("RGB")))
    # IMREAD_ANYCOLOR keeps gray as gray and, unlike IMREAD_UNCHANGED, applies EXIF orientation.
    img = cv2.imread(str(path), cv2.IMREAD_ANYCOLOR)
    return img.astype(np.float32) if img.ndim == 2 else luminance(img[..., ::-1])


def read_f32(path):
    raw = path.read_bytes()
    h, w = np.frombuffer(raw[:8], "<u4")
    return np.frombuffer(raw[8:], "<f4").reshape(h, w)


def cpu_model():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decoder", required=True)
    ap.add_argument("--photos", type=pathlib.Path, required=True)
    ap.add_argument("--extra", type=pathlib.Path, help="more JPEGs (without EXIF rotation)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    photos = sorted(p for p in args.photos.rglob("*") if p.suffix.lower() in {".jpg", ".jpeg"})
    extra = sorted(p for p in args.extra.glob("*.jpg") if "orientation" not in p.name) if args.extra else []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "list.txt").write_text("".join(f"{p}\n" for p in photos + extra))
        out = subprocess.run([args.decoder, str(tmp / "list.txt"), str(tmp), str(args.repeat)],
                             check=True, capture_output=True, text=True).stdout
        timings = list(csv.DictReader(out.splitlines()))
        rows = []
        for name, group in [("scene15 (gray, progressive)", photos), ("synthetic (gray and RGB)", extra)]:
            offset = 0 if group is photos else len(photos)
            for decoder in ["vocab", "image"]:
                for reader in ["pillow", "opencv"]:
                    differ, worst = 0, 0.0
                    for i, p in enumerate(group):
                        ours = read_f32(tmp / f"{offset + i}.{decoder}.f32")
                        ref = reference(p, reader)
                        d = float(np.abs(ours - ref).max()) if ours.shape == ref.shape else float("inf")
                        differ += d > 0
                        worst = max(worst, d)
                    rows.append(dict(photos=name, count=len(group), decoder=decoder, reference=reader,
                                     differing=differ, max_abs_luminance_diff=worst))
    with open(HERE / "results.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "what", "photos", "decoder", "reference", "value"])
        for t in timings:
            w.writerow(["ms_per_photo", "decode to luminance", t["photos"], t["decoder"], "", t["ms_per_photo"]])
        for r in rows:
            w.writerow(["photos_differing", r["photos"], r["count"], r["decoder"], r["reference"], r["differing"]])
            w.writerow(["max_abs_luminance_diff", r["photos"], r["count"], r["decoder"], r["reference"],
                        r["max_abs_luminance_diff"]])
    base = float(timings[1]["ms_per_photo"])
    lines = [
        "# JPEG decoding: vocab (libjpeg-turbo's decoder) against the image crate's",
        "",
        "Command: `eval/jpeg_decode/run.sh` (results.csv holds the same numbers).",
        "",
        f"Machine: {cpu_model()}, {len(__import__('os').sched_getaffinity(0))} cores; "
        f"references: Pillow {PIL.__version__} (libjpeg-turbo {features.version('libjpeg_turbo')}), "
        f"OpenCV {cv2.__version__}.",
        "",
        f"Decode to luminance, one thread, {timings[0]['photos']} photos x {args.repeat} rounds, interleaved:",
        "",
        "| decoder | ms per photo | vs image crate |",
        "|---|---|---|",
    ]
    for t in timings:
        lines.append(f"| {t['decoder']} | {float(t['ms_per_photo']):.3f} | {float(t['ms_per_photo']) / base:.2f}x |")
    lines += ["", "Luminance against the references' decode (bit-identical means 0 photos differing):", "",
              "| photos | decoder | reference | photos differing | max abs difference |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['photos']} ({r['count']}) | {r['decoder']} | {r['reference']} | {r['differing']} "
                     f"| {r['max_abs_luminance_diff']:g} |")
    (HERE / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
