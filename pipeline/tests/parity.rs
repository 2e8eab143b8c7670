//! HOG parity with scikit-image, from fixtures made by `eval/hog_parity/make_fixtures.py`.
//!
//! Every descriptor value must be within 1e-5 of the reference (absolute).

use std::path::{Path, PathBuf};

mod common;

use common::Cursor;

use vocab_pipeline::hog::{BLOCK_LEN, BlockGrid, DIMS, PATCH_SIDE, PatchDescriber};
use vocab_pipeline::image_io::load_luminance;

const TOLERANCE: f64 = 1e-5;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../eval/hog_parity/fixtures")
}

/// Largest absolute difference and where it is.
fn max_diff(actual: &[f32], expected: &[f64]) -> (f64, usize) {
    assert_eq!(actual.len(), expected.len());
    actual
        .iter()
        .zip(expected)
        .map(|(&a, &e)| (f64::from(a) - e).abs())
        .enumerate()
        .fold(
            (0.0, 0),
            |(best, at), (i, d)| if d > best { (d, i) } else { (best, at) },
        )
}

/// Reads one image + expected block grid and checks vocab's grid against it.
fn check_grid(cur: &mut Cursor, what: &str) -> usize {
    let (h, w) = (cur.u32(), cur.u32());
    let lum = cur.f32s(h * w);
    let (br, bc) = (cur.u32(), cur.u32());
    let expected = cur.f64s(br * bc * BLOCK_LEN);
    check_grid_against(&lum, w, h, (br, bc), &expected, what);
    br * bc
}

fn check_grid_against(
    lum: &[f32],
    w: usize,
    h: usize,
    shape: (usize, usize),
    expected: &[f64],
    what: &str,
) {
    let mut grid = BlockGrid::default();
    grid.compute(lum, w, h);
    assert_eq!(grid.shape(), shape, "{what}: block grid shape");
    let mut actual = Vec::with_capacity(expected.len());
    for r in 0..shape.0 {
        for c in 0..shape.1 {
            actual.extend_from_slice(grid.block(r, c));
        }
    }
    let (d, at) = max_diff(&actual, expected);
    assert!(
        d <= TOLERANCE,
        "{what} ({w}x{h}): value {at} differs by {d:e}"
    );
    // And the patch windows cut from it equal the reference's block windows.
    let mut window = vec![0f32; DIMS];
    for r in 0..shape.0.saturating_sub(3) {
        for c in 0..shape.1.saturating_sub(3) {
            grid.window(r, c, &mut window);
            let mut want = Vec::with_capacity(DIMS);
            for dr in 0..4 {
                let start = ((r + dr) * shape.1 + c) * BLOCK_LEN;
                want.extend_from_slice(&expected[start..start + 4 * BLOCK_LEN]);
            }
            let (d, at) = max_diff(&window, &want);
            assert!(
                d <= TOLERANCE,
                "{what}: window ({r}, {c}) value {at} differs by {d:e}"
            );
        }
    }
}

#[test]
fn patch_descriptors_match_scikit_image() {
    let kinds = std::fs::read_to_string(fixtures().join("kinds.txt")).expect("kinds.txt");
    let kinds: Vec<&str> = kinds.lines().collect();
    let mut cur = Cursor::open(&fixtures().join("patches.bin"));
    let count = cur.u32();
    assert!(
        count >= 200,
        "at least 200 reference patches, found {count}"
    );
    let mut describer = PatchDescriber::default();
    let mut out = vec![0f32; DIMS];
    let mut worst = 0.0f64;
    for idx in 0..count {
        let kind = kinds[cur.u32()];
        let patch = cur.f32s(PATCH_SIDE * PATCH_SIDE);
        let expected = cur.f64s(DIMS);
        describer.describe(&patch, PATCH_SIDE, 0, 0, &mut out);
        let (d, at) = max_diff(&out, &expected);
        assert!(
            d <= TOLERANCE,
            "patch {idx} ({kind}): value {at} differs by {d:e}"
        );
        worst = worst.max(d);
    }
    assert!(cur.done(), "trailing bytes in patches.bin");
    eprintln!("{count} patches, worst absolute difference {worst:e}");
}

#[test]
fn patch_descriptor_is_position_independent_inside_a_larger_image() {
    // The same patch embedded at an offset in a bigger image must give the same descriptor:
    // patch-local gradients ignore the surrounding pixels.
    let mut cur = Cursor::open(&fixtures().join("patches.bin"));
    cur.u32();
    cur.u32();
    let patch = cur.f32s(PATCH_SIDE * PATCH_SIDE);
    let expected = cur.f64s(DIMS);
    let (w, h, r0, c0) = (61, 53, 9, 17);
    let mut img: Vec<f32> = (0..w * h).map(|i| (i * 37 % 255) as f32).collect();
    for r in 0..PATCH_SIDE {
        img[(r0 + r) * w + c0..][..PATCH_SIDE]
            .copy_from_slice(&patch[r * PATCH_SIDE..][..PATCH_SIDE]);
    }
    let mut out = vec![0f32; DIMS];
    PatchDescriber::default().describe(&img, w, r0, c0, &mut out);
    assert!(max_diff(&out, &expected).0 <= TOLERANCE);
}

#[test]
fn dense_block_grids_match_scikit_image() {
    let mut cur = Cursor::open(&fixtures().join("dense.bin"));
    let count = cur.u32();
    let blocks: usize = (0..count)
        .map(|i| check_grid(&mut cur, &format!("dense image {i}")))
        .sum();
    assert!(cur.done(), "trailing bytes in dense.bin");
    assert!(blocks > 500, "fixtures hold {blocks} blocks");
}

#[test]
fn decoded_photos_give_the_reference_luminance_and_grid() {
    let mut cur = Cursor::open(&fixtures().join("decode.bin"));
    for name in ["rgb.png", "gray.png"] {
        let (h, w) = (cur.u32(), cur.u32());
        let want_lum = cur.f32s(h * w);
        let (br, bc) = (cur.u32(), cur.u32());
        let expected = cur.f64s(br * bc * BLOCK_LEN);
        let lum = load_luminance(
            &fixtures().join(name),
            None,
            vocab_pipeline::image_io::MAX_PIXELS,
        )
        .expect("decodes");
        assert_eq!((lum.width, lum.height), (w, h), "{name}: size");
        assert_eq!(
            lum.data, want_lum,
            "{name}: luminance must be bit-identical"
        );
        check_grid_against(&lum.data, w, h, (br, bc), &expected, name);
    }
}

#[test]
fn jpeg_photos_decode_to_the_pixels_libjpeg_turbo_gives() {
    // Luminance from Pillow's decode (libjpeg-turbo, as OpenCV and scikit-image read JPEGs):
    // bit-identical, then the block grid within the tolerance.
    let mut cur = Cursor::open(&fixtures().join("jpeg.bin"));
    let count = cur.u32();
    assert!(count >= 6, "at least 6 JPEG cases, found {count}");
    for _ in 0..count {
        let len = cur.u32();
        let name = String::from_utf8(cur.take(len).to_vec()).expect("name");
        let (h, w) = (cur.u32(), cur.u32());
        let want_lum = cur.f32s(h * w);
        let (br, bc) = (cur.u32(), cur.u32());
        let expected = cur.f64s(br * bc * BLOCK_LEN);
        let path = fixtures().join("jpeg").join(&name);
        let lum = load_luminance(&path, None, vocab_pipeline::image_io::MAX_PIXELS)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((lum.width, lum.height), (w, h), "{name}: size");
        let differing = lum.data.iter().zip(&want_lum).filter(|(a, b)| a != b);
        assert_eq!(
            differing.count(),
            0,
            "{name}: luminance must be bit-identical to libjpeg-turbo's"
        );
        check_grid_against(&lum.data, w, h, (br, bc), &expected, &name);
    }
    assert!(cur.done(), "trailing bytes in jpeg.bin");
}
