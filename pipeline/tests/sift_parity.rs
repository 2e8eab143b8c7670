//! Dense SIFT beside OpenCV's SIFT, from fixtures made by `eval/sift_parity/make_fixtures.py`.
//!
//! vocab's SIFT is OpenCV's descriptor with the image's edges repeated where OpenCV reflects
//! them, an exact `atan2` where OpenCV approximates it, and `f32` values where OpenCV rounds to
//! bytes (`pipeline/src/sift.rs`), so the two agree closely, not to the bit: the test bounds the
//! angle between each pair of RootSIFT vectors (both have unit L2 norm, so the cosine is their
//! dot product).

use std::path::{Path, PathBuf};

mod common;

use common::Cursor;

use vocab_pipeline::image_io::{MAX_PIXELS, load_luminance};
use vocab_pipeline::sift::{DenseSift, Grid, Keypoint, SIFT_DIMS};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn dense_sift_agrees_with_opencvs_sift_at_the_same_keypoints() {
    let path = root().join("eval/sift_parity/fixtures/opencv.bin");
    let mut cur = Cursor::open(&path);
    let mut cosines = Vec::new();
    for _ in 0..cur.u32() {
        let len = cur.u32();
        let name = String::from_utf8(cur.take(len).to_vec()).expect("a UTF-8 name");
        let step = cur.u32();
        let n = cur.u32();
        let windows = cur.f32s(n);
        let lum = load_luminance(&root().join(&name), None, MAX_PIXELS)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        let sift = DenseSift::new(step, windows, Grid::Inside).expect("the fixture's settings");
        let (keys, values) = sift.describe(&lum);
        let count = cur.u32();
        assert_eq!(keys.len(), count, "{name}: keypoints");
        for (k, ours) in keys.iter().zip(values.chunks_exact(SIFT_DIMS)) {
            let (x, y) = (cur.u32(), cur.u32());
            let window = cur.f32s(1)[0];
            assert_eq!(*k, Keypoint { x, y, window }, "{name}: the grid");
            let theirs = cur.f32s(SIFT_DIMS);
            let dot: f32 = ours.iter().zip(&theirs).map(|(a, b)| a * b).sum();
            cosines.push(dot);
        }
    }
    assert!(cur.done(), "the whole fixture read");
    cosines.sort_by(f32::total_cmp);
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    let (worst, tenth) = (cosines[0], cosines[cosines.len() / 10]);
    eprintln!(
        "{} descriptors: cosine mean {mean:.4}, worst {worst:.4}, 10th percentile {tenth:.4}",
        cosines.len()
    );
    assert!(mean > 0.998 && tenth > 0.995 && worst > 0.97);
}
