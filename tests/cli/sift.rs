//! vocab's own dense SIFT (`--descriptor sift`, `[features] descriptor`): the same sample and
//! encodings as its descriptors written to files and read back through `--from`, byte for byte,
//! mirror images and loopback workers included; its models classify new photos; HOG's settings
//! that do not apply to it are refused.

use std::path::{Path, PathBuf};

use vocab_pipeline::features::SIFT_WINDOWS;
use vocab_pipeline::image_io::{MAX_PIXELS, load_luminance};
use vocab_pipeline::sift::{DenseSift, Grid, SIFT_DIMS};

use crate::util::*;

/// `dir/name`: every photo's dense SIFT every `step` px (mirrored when asked) as `--from` reads
/// it, a `.csv` a photo of rows x, y, window, then the 128 values.
fn sift_files(dir: &Path, photos: &Path, name: &str, step: usize, mirror: bool) -> PathBuf {
    let out = dir.join(name);
    let sift = DenseSift::new(step, SIFT_WINDOWS.to_vec(), Grid::Inside).expect("sift");
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    for line in labels.lines().skip(1) {
        let rel = line.split(',').next().expect("path");
        let mut lum = load_luminance(&photos.join(rel), None, MAX_PIXELS).expect("photo");
        if mirror {
            lum.mirror();
        }
        let (keys, values) = sift.describe(&lum);
        assert!(!keys.is_empty(), "{rel}");
        let mut text = String::new();
        for (k, d) in keys.iter().zip(values.chunks_exact(SIFT_DIMS)) {
            let row: Vec<String> = [k.x as f32, k.y as f32, k.window]
                .iter()
                .chain(d)
                .map(|v| format!("{v:?}"))
                .collect();
            text.push_str(&row.join(","));
            text.push('\n');
        }
        let file = out.join(rel).with_extension("csv");
        std::fs::create_dir_all(file.parent().expect("folder")).expect("folder");
        std::fs::write(file, text).expect("csv");
    }
    out
}

/// The bytes of `path`.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn sift_is_its_files_read_back_in_every_stage_here_and_on_nodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let path = |name: &str| dir.path().join(name);
    let files = sift_files(dir.path(), &photos, "sift", 6, false);
    let flipped = sift_files(dir.path(), &photos, "sift-flip", 6, true);
    let input = ["--input", s(&photos)];
    // The sample: the same rows drawn from the same keypoints, here and on 2 loopback workers.
    let sample = ["--per-image", "40", "--seed", "3"];
    let said = ok(&[
        &["features"][..],
        &input,
        &sample,
        &["--descriptor", "sift", "--out", s(&path("own.bin"))],
    ]
    .concat());
    assert!(
        said.contains("dense-rootsift-128") && said.contains("6-px grid at 24/42/60-px windows"),
        "{said}"
    );
    ok(&[
        &["features"][..],
        &input,
        &sample,
        &["--from", s(&files), "--out", s(&path("read.bin"))],
    ]
    .concat());
    assert!(bytes(&path("own.bin")) == bytes(&path("read.bin")));
    ok(&[
        &["features"][..],
        &input,
        &sample,
        &["--descriptor", "sift", "--local-nodes", "2"],
        &["--out", s(&path("nodes.bin"))],
    ]
    .concat());
    assert!(bytes(&path("own.bin")) == bytes(&path("nodes.bin")));
    // A mixture of the sample, then Fisher vectors of every photo and the mirror images.
    let mixture = path("g.json");
    ok(&[
        "mixture",
        "--features",
        s(&path("own.bin")),
        "--components",
        "2",
        "--pca-dims",
        "8",
        "--out",
        s(&mixture),
    ]);
    let fisher = [
        "--vocabulary",
        s(&mixture),
        "--method",
        "fisher",
        "--pyramid",
        "2",
    ];
    let own = ["--descriptor", "sift", "--stride", "6"];
    let encode = |extra: &[&str], out: &str| {
        ok(&[
            &["encode"][..],
            &input,
            &fisher,
            extra,
            &["--out", s(&path(out))],
        ]
        .concat())
    };
    encode(&own, "h.bin");
    encode(&["--from", s(&files)], "hr.bin");
    encode(&[&own[..], &["--local-nodes", "2"]].concat(), "hn.bin");
    encode(&[&own[..], &["--mirror"]].concat(), "hm.bin");
    encode(&["--from", s(&flipped)], "hmr.bin");
    assert!(bytes(&path("h.bin")) == bytes(&path("hr.bin")), "encode");
    assert!(bytes(&path("h.bin")) == bytes(&path("hn.bin")), "on nodes");
    assert!(
        bytes(&path("hm.bin")) == bytes(&path("hmr.bin")),
        "mirrored"
    );
    for suffix in [".images.csv", ".skipped.csv"] {
        let at = |name: &str| path(&format!("{name}{suffix}"));
        assert!(bytes(&at("h.bin")) == bytes(&at("hr.bin")), "{suffix}");
        assert!(bytes(&at("h.bin")) == bytes(&at("hn.bin")), "{suffix}");
    }
    let record = std::fs::read_to_string(path("h.bin.encoding.json")).expect("record");
    assert!(
        record.contains("\"descriptor\": \"sift\"") && record.contains("\"dims\": 128"),
        "{record}"
    );
    assert!(!record.contains("foreign"), "{record}");
    // A model of the photos and their mirror images classifies new photos by their own SIFT.
    let model = path("m.json");
    ok(&[
        "train",
        "--histograms",
        s(&path("h.bin")),
        "--labels",
        s(&photos.join("labels.csv")),
        "--attribute",
        "kind",
        "--cv",
        "2",
        "--mirrored",
        s(&path("hm.bin")),
        "--out",
        s(&model),
    ]);
    ok(&[
        &["classify", "--model", s(&model)][..],
        &input,
        &["--out", s(&path("l.csv"))],
    ]
    .concat());
    let rows = csv_rows(&path("l.csv"));
    assert_eq!(rows.len(), 8, "{rows:?}");
    let err = fails(
        &[
            &["classify", "--model", s(&model)][..],
            &input,
            &["--from", s(&files), "--out", s(&path("l2.csv"))],
        ]
        .concat(),
    );
    assert!(err.contains("trained on SIFT"), "{err}");
    // A HOG vocabulary's words are not SIFT's.
    let hog = sample_of(dir.path(), &photos);
    ok(&[
        "mixture",
        "--features",
        s(&hog),
        "--components",
        "2",
        "--pca-dims",
        "8",
        "--out",
        s(&path("hog.json")),
    ]);
    let err = fails(
        &[
            &["encode"][..],
            &input,
            &own,
            &["--vocabulary", s(&path("hog.json")), "--method", "fisher"],
            &["--out", s(&path("x.bin"))],
        ]
        .concat(),
    );
    assert!(err.contains("the SIFT descriptor has 128"), "{err}");
}

#[test]
fn settings_of_hog_that_sift_has_no_use_for_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let out = dir.path().join("x.bin");
    let base = [
        "--input",
        s(&photos),
        "--out",
        s(&out),
        "--descriptor",
        "sift",
    ];
    let err = fails(&[&["features"][..], &base, &["--patch", "24"]].concat());
    assert!(
        err.contains("--patch 24") && err.contains("dense SIFT"),
        "{err}"
    );
    let err = fails(&[&["features"][..], &base, &["--from", s(&photos)]].concat());
    assert!(err.contains("--descriptor sift"), "{err}");
    let vocabulary = dir.path().join("v.bin");
    std::fs::write(&vocabulary, b"not read").expect("file");
    let words = ["--vocabulary", s(&vocabulary)];
    let err = fails(&[&["encode"][..], &base, &words, &["--scales", "40,64"]].concat());
    assert!(
        err.contains("--scales 40,64") && err.contains("SIFT"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn a_run_of_sift_samples_encodes_and_scores_its_keypoints_on_the_workers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("sift.toml");
    std::fs::write(
        &config,
        "[dataset]\nsynthetic = { per_kind = 4 }\n[features]\nper_image = 40\n\
         descriptor = \"sift\"\n[kmeans]\nk = [4]\nnodes = 2\n\
         [encode]\nmethod = \"fisher\"\nstride = 12\npyramid = 2\n\
         [mixture]\ncomponents = [3]\npca_dims = 6\niterations = 10\n\
         [classify]\nattributes = [\"urbanicity\"]\nmirror = true\ncv = 2\n",
    )
    .expect("config");
    let work = dir.path().join("work");
    let out = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(out.contains("report in"), "{out}");
    let done = steps(&work);
    let encode = (done.iter())
        .find(|s| s.starts_with("encode/g3-") && !s.contains("mirrored"))
        .expect("encode step");
    let record = std::fs::read_to_string(work.join(encode).join("histograms.bin.encoding.json"))
        .expect("record");
    assert!(
        record.contains("\"descriptor\": \"sift\"") && record.contains("\"stride\": 12"),
        "{record}"
    );
    let accuracy = csv_rows(&work.join("report").join("accuracy.csv"));
    assert_eq!(accuracy.len(), 1);
}

#[test]
fn a_run_joins_hog_and_sift_fisher_vectors_and_trains_on_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("joined.toml");
    std::fs::write(
        &config,
        "[dataset]\nsynthetic = { per_kind = 4 }\n[features]\nper_image = 40\n\
         [kmeans]\nk = [4]\nnodes = 2\n\
         [encode]\nmethod = \"fisher\"\nstride = 16\npyramid = 2\n\
         [mixture]\ncomponents = [3]\npca_dims = 6\niterations = 10\n\
         [classify]\nattributes = [\"urbanicity\"]\nmirror = true\ncv = 2\n\
         [[join]]\ndescriptor = \"sift\"\nper_image = 30\nstride = 12\n",
    )
    .expect("config");
    let work = dir.path().join("work");
    let out = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(out.contains("report in"), "{out}");
    let done = steps(&work);
    let count = |prefix: &str| done.iter().filter(|s| s.starts_with(prefix)).count();
    // Two samples, two mixtures, each part's encodings and their mirror images, joined.
    assert_eq!(
        (count("features/"), count("mixture/g3-")),
        (2, 2),
        "{done:?}"
    );
    assert_eq!(count("encode/g3-joined-mirrored-"), 1, "{done:?}");
    let joined = (done.iter())
        .find(|s| s.starts_with("encode/g3-joined-") && !s.contains("mirrored"))
        .expect("joined step");
    let record = std::fs::read_to_string(work.join(joined).join("histograms.bin.encoding.json"))
        .expect("record");
    assert!(
        record.contains("\"joined\"") && record.contains("\"descriptor\": \"sift\""),
        "{record}"
    );
    let model = (done.iter())
        .find(|s| s.starts_with("svm/"))
        .expect("svm step");
    let model = std::fs::read_to_string(work.join(model).join("model.json")).expect("model");
    assert!(
        model.contains("\"joined\""),
        "the model is not the joined one's"
    );
    // Cached on a second run.
    let again = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(
        !again.contains("EM steps") && !again.contains("join:"),
        "{again}"
    );
    // The joined parts' rules, named.
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("stride = 12", "stride = 0")).expect("config");
    let err = fails(&["run", s(&config), "--work", s(&work)]);
    assert!(
        err.contains("[join] stride") && err.contains("at least 1"),
        "{err}"
    );
}
