"""Reference HOG vectors from scikit-image for vocab's parity tests.

usage: python eval/hog_parity/make_fixtures.py [--photos DIR]
       (run with the interpreter printed by eval/setup-venv.sh)

Writes into eval/hog_parity/fixtures/:

patches.bin   per-patch definition, hog(patch) of 40x40 luminance patches
    u32 count, then per patch: u32 kind, 1600 x f32 luminance (row-major), 512 x f64 expected
dense.bin     image definition, hog(image, feature_vector=False) of whole luminance images
    u32 count, then per image: u32 height, u32 width, height*width x f32 luminance,
    u32 block_rows, u32 block_cols, block_rows*block_cols*32 x f64 expected blocks
rgb.png, gray.png   lossless photos for the end-to-end test (decode -> luminance -> dense HOG)
decode.bin    for each of rgb.png and gray.png: u32 height, u32 width, luminance as f32
    computed with vocab's formula in float32 (0.2125 R + 0.7154 G + 0.0721 B), then the block
    grid as in dense.bin
kinds.txt     the names of the patch kinds, one per line, indexed by `kind`
jpeg/*.jpg    JPEG photos for the decoder's parity (libjpeg-turbo, as Pillow, OpenCV and scikit-image
    read them): the first scene15 photo as it is (gray, progressive, EXIF) and synthetic ones of
    odd sizes (gray baseline; RGB 4:2:0, 4:2:2 progressive, 4:4:4 with restart markers, and 4:2:0
    with an EXIF orientation of 6, turned as Pillow's exif_transpose turns it)
jpeg.bin      u32 count, then per JPEG: u32 name length, the name (in jpeg/), then the grid as in
    decode.bin, from the pixels Pillow decodes (libjpeg-turbo)

The luminance arrays are handed to scikit-image as float64 holding float32 values, which is the
precision vocab works in; all little-endian.
"""

import argparse
import pathlib
import shutil
import struct

import numpy as np
from PIL import Image, ImageOps
from skimage.feature import hog

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "fixtures"
PARAMS = dict(orientations=8, pixels_per_cell=(8, 8), cells_per_block=(2, 2), block_norm="L2-Hys")
WEIGHTS = np.array([0.2125, 0.7154, 0.0721], dtype=np.float32)


def luminance(rgb):
    """vocab's luminance, in float32 with the same operation order."""
    rgb = rgb.astype(np.float32)
    return WEIGHTS[0] * rgb[..., 0] + WEIGHTS[1] * rgb[..., 1] + WEIGHTS[2] * rgb[..., 2]


def patch_kinds(rng):
    """Yields (kind, 40x40 float32 patch) for the synthetic cases."""
    yy, xx = np.mgrid[0:40, 0:40].astype(np.float64)
    # Step edges at every 7.5 degrees, including the exact bin boundaries and axis/diagonal ties.
    for deg in np.arange(0, 180, 7.5):
        t = np.deg2rad(deg)
        side = (np.cos(t) * (xx - 19.5) + np.sin(t) * (yy - 19.5)) > 0
        yield "edge", np.where(side, 200.0, 40.0)
    # Linear ramps: constant gradients, many exactly on the 0/45/90/135 ties.
    for dx, dy in [(1, 0), (0, 1), (1, 1), (1, -1), (2, 1), (-3, 2), (0.5, 0.25), (0.37, 0.91)]:
        yield "ramp", np.clip(100 + dx * (xx - 20) + dy * (yy - 20), 0, 255)
    # Flat areas, including black and white.
    for v in [0.0, 255.0, 127.0, 33.3]:
        yield "flat", np.full((40, 40), v)
    # Integer noise (8-bit-like) and float noise.
    for _ in range(20):
        yield "int-noise", rng.integers(0, 256, size=(40, 40)).astype(np.float64)
    for _ in range(20):
        yield "float-noise", rng.uniform(0, 255, size=(40, 40))
    # Saturated: high-contrast noise clipped at 0 and 255.
    for _ in range(15):
        yield "saturated", np.clip(rng.normal(128, 200, size=(40, 40)), 0, 255)
    # Checkerboards and stripes (dense ties), and a few mixed scenes.
    for period in [1, 2, 3, 8]:
        yield "checker", (((xx // period) + (yy // period)) % 2) * 255.0
    for period in [2, 4, 5]:
        yield "diagonal-stripes", (((xx + yy) // period) % 2) * 180.0 + 20
        yield "antidiagonal-stripes", (((xx - yy) // period) % 2) * 180.0 + 20
    for _ in range(10):
        base = np.where((xx - rng.uniform(5, 35)) ** 2 + (yy - rng.uniform(5, 35)) ** 2 < rng.uniform(30, 200), 220.0, 30.0)
        yield "blob-noise", np.clip(base + rng.normal(0, 8, size=(40, 40)), 0, 255)
    # A flat half and a noisy half: cells with and without gradient in one block.
    for _ in range(5):
        p = np.full((40, 40), 90.0)
        p[:, 20:] = rng.uniform(0, 255, size=(40, 20))
        yield "half-flat", p


def photo_luminances(photos, n):
    """Luminance of up to n photos found below `photos` (sorted, deterministic)."""
    if photos is None or not photos.is_dir():
        return []
    paths = sorted(p for p in photos.rglob("*") if p.suffix.lower() in {".jpg", ".jpeg", ".png"})
    step = max(1, len(paths) // n)
    return [luminance(np.asarray(Image.open(p).convert("RGB"))) for p in paths[::step][:n]]


def write_grid(f, lum):
    h, w = lum.shape
    f.write(struct.pack("<II", h, w))
    f.write(lum.astype("<f4").tobytes())
    blocks = hog(lum.astype(np.float64), feature_vector=False, **PARAMS)
    f.write(struct.pack("<II", blocks.shape[0], blocks.shape[1]))
    f.write(blocks.astype("<f8").tobytes())


def jpeg_luminance(path):
    """Luminance of a JPEG as Pillow decodes it (libjpeg-turbo), turned by its EXIF orientation."""
    img = ImageOps.exif_transpose(Image.open(path))
    if img.mode == "L":
        return np.asarray(img).astype(np.float32)
    return luminance(np.asarray(img.convert("RGB")))


def write_jpegs(rng, photos):
    """The JPEG parity cases (see the module doc); returns their names."""
    folder = OUT / "jpeg"
    folder.mkdir(exist_ok=True)
    names = []
    if photos is not None and photos.is_dir():
        first = sorted(p for p in photos.rglob("*") if p.suffix.lower() in {".jpg", ".jpeg"})[0]
        shutil.copyfile(first, folder / "scene15.jpg")
        names.append("scene15.jpg")
    h, w = 97, 131
    rgb = np.clip(rng.normal(0, 1, size=(h, w, 3)).cumsum(axis=1) * 18 + 128, 0, 255).astype(np.uint8)
    rgb[30:70, 40:90] = [40, 200, 90]
    rgb[::9, :] = 255
    cases = [
        ("gray_baseline.jpg", Image.fromarray(rgb[..., 0], "L"), dict(quality=90)),
        ("rgb_420.jpg", Image.fromarray(rgb, "RGB"), dict(quality=85, subsampling=2)),
        ("rgb_422_progressive.jpg", Image.fromarray(rgb, "RGB"),
         dict(quality=80, subsampling=1, progressive=True)),
        ("rgb_444_restart.jpg", Image.fromarray(rgb, "RGB"),
         dict(quality=95, subsampling=0, restart_marker_blocks=5)),
    ]
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: turn 90 degrees clockwise to show
    cases.append(("rgb_420_orientation6.jpg", Image.fromarray(rgb, "RGB"),
                  dict(quality=85, subsampling=2, exif=exif.tobytes())))
    for name, img, options in cases:
        img.save(folder / name, **options)
        names.append(name)
    with open(OUT / "jpeg.bin", "wb") as f:
        f.write(struct.pack("<I", len(names)))
        for name in names:
            f.write(struct.pack("<I", len(name)))
            f.write(name.encode())
            write_grid(f, jpeg_luminance(folder / name))
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--photos", type=pathlib.Path,
                    default=HERE.parents[2] / "shared" / "datasets" / "scene15-train")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261122)

    cases = [(k, np.float32(p)) for k, p in patch_kinds(rng)]
    photos = photo_luminances(args.photos, 40)
    for lum in photos:
        for _ in range(3):
            r = rng.integers(0, lum.shape[0] - 40 + 1)
            c = rng.integers(0, lum.shape[1] - 40 + 1)
            cases.append(("photo", lum[r:r + 40, c:c + 40]))
    kinds = sorted({k for k, _ in cases})
    with open(OUT / "patches.bin", "wb") as f:
        f.write(struct.pack("<I", len(cases)))
        for kind, patch in cases:
            patch = np.ascontiguousarray(patch, dtype=np.float32)
            expected = hog(patch.astype(np.float64), **PARAMS)
            assert expected.shape == (512,)
            f.write(struct.pack("<I", kinds.index(kind)))
            f.write(patch.astype("<f4").tobytes())
            f.write(expected.astype("<f8").tobytes())
    (OUT / "kinds.txt").write_text("\n".join(kinds) + "\n")

    images = [
        np.float32(rng.integers(0, 256, size=(57, 83))),
        np.float32(np.clip(rng.normal(120, 60, size=(96, 136)), 0, 255)),
    ]
    yy, xx = np.mgrid[0:88, 0:120]
    images.append(np.float32(np.where((xx > 30) & (yy > 20) & (xx - yy < 50), 210, 25)))
    for lum in photos[:3]:
        images.append(lum[: min(lum.shape[0], 160), : min(lum.shape[1], 200)].copy())
    with open(OUT / "dense.bin", "wb") as f:
        f.write(struct.pack("<I", len(images)))
        for lum in images:
            write_grid(f, lum)

    # End-to-end: lossless photos whose decode + luminance + dense HOG vocab must reproduce.
    rgb = np.clip(rng.normal(0, 1, size=(72, 104, 3)).cumsum(axis=1) * 20 + 128, 0, 255).astype(np.uint8)
    rgb[20:50, 30:70] = [250, 30, 30]
    Image.fromarray(rgb, "RGB").save(OUT / "rgb.png")
    gray = rgb[..., 1].copy()
    Image.fromarray(gray, "L").save(OUT / "gray.png")
    with open(OUT / "decode.bin", "wb") as f:
        write_grid(f, luminance(np.asarray(Image.open(OUT / "rgb.png").convert("RGB"))))
        write_grid(f, np.asarray(Image.open(OUT / "gray.png")).astype(np.float32))
    jpegs = write_jpegs(rng, args.photos)
    print(f"{len(jpegs)} JPEG photos")
    print(f"{len(cases)} patches ({len(photos) * 3} from photos), {len(images)} dense images -> {OUT}")


if __name__ == "__main__":
    main()
