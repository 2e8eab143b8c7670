//! `vocab join`: HOG's and SIFT's Fisher vectors of the same photos in one vector a photo, each
//! part times 1/sqrt(2), with a record listing the parts; models trained on it check and
//! classify new photos by encoding every part; parts that do not join are refused.

use std::path::{Path, PathBuf};

use vocab_pipeline::classify::{ModelFile, read_histograms};

use crate::util::*;

/// In `dir`: a mixture of 2 Gaussians over 8 dims of each descriptor's sample of `photos`, and
/// the Fisher vectors of every photo (`h.bin`, `s.bin`) and mirrored (`hm.bin`, `sm.bin`).
fn encodings(dir: &Path, photos: &Path) {
    let path = |name: &str| dir.join(name);
    for (name, descriptor, stride) in [("h", "hog", "16"), ("s", "sift", "12")] {
        let sample = path(&format!("{name}-sample.bin"));
        let input = ["--input", s(photos)];
        ok(&[
            &["features"][..],
            &input,
            &["--per-image", "30", "--descriptor", descriptor],
            &["--out", s(&sample)],
        ]
        .concat());
        let mixture = path(&format!("{name}.json"));
        ok(&[
            &["mixture", "--features", s(&sample)][..],
            &["--components", "2", "--pca-dims", "8", "--out", s(&mixture)],
        ]
        .concat());
        for (suffix, mirror) in [("", &[][..]), ("m", &["--mirror"][..])] {
            let out = path(&format!("{name}{suffix}.bin"));
            ok(&[
                &["encode", "--vocabulary", s(&mixture)][..],
                &input,
                &["--method", "fisher", "--pyramid", "2", "--stride", stride],
                &["--descriptor", descriptor],
                mirror,
                &["--out", s(&out)],
            ]
            .concat());
        }
    }
}

#[test]
fn joined_fisher_vectors_train_check_and_classify_as_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    encodings(dir.path(), &photos);
    let path = |name: &str| dir.path().join(name);
    let said = ok(&[
        "join",
        s(&path("h.bin")),
        s(&path("s.bin")),
        "--out",
        s(&path("j.bin")),
    ]);
    assert!(
        said.contains("8 photos, 0 skipped, 2 encodings of 160 + 160 values each joined into 320"),
        "{said}"
    );
    // Each photo's row: HOG's vector, then SIFT's, each times 1/sqrt 2 (in f32).
    let (h, s_, j) = (
        read_histograms(&path("h.bin")).expect("h"),
        read_histograms(&path("s.bin")).expect("s"),
        read_histograms(&path("j.bin")).expect("j"),
    );
    let w = (0.5f64).sqrt() as f32;
    assert_eq!(
        (j.ids.clone(), j.paths.clone()),
        (h.ids.clone(), h.paths.clone())
    );
    for ((a, b), joined) in h.rows.iter().zip(&s_.rows).zip(&j.rows) {
        let want: Vec<f32> = a.iter().chain(b).map(|v| v * w).collect();
        assert_eq!(joined, &want);
        let norm: f32 = joined.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
    }
    for suffix in [".images.csv", ".skipped.csv"] {
        let read = |name: &str| std::fs::read(path(&format!("{name}{suffix}"))).expect("manifest");
        assert_eq!(read("j.bin"), read("h.bin"), "{suffix}");
    }
    let record = std::fs::read_to_string(path("j.bin.encoding.json")).expect("record");
    assert!(
        record.contains("\"joined\"") && record.matches("\"vocabulary_sha256\"").count() == 2,
        "{record}"
    );
    ok(&[
        "join",
        s(&path("hm.bin")),
        s(&path("sm.bin")),
        "--out",
        s(&path("jm.bin")),
    ]);
    // A model of the joined vectors and their mirror images.
    let labels = photos.join("labels.csv");
    let train = |mirrored: &Path, out: &Path| {
        vocab(&[
            "train",
            "--histograms",
            s(&path("j.bin")),
            "--labels",
            s(&labels),
            "--attribute",
            "kind",
            "--cv",
            "2",
            "--mirrored",
            s(mirrored),
            "--out",
            s(out),
        ])
    };
    let model = path("m.json");
    assert!(train(&path("jm.bin"), &model).status.success());
    // The mirror images of one part are not the joined encoding's.
    let refused = train(&path("hm.bin"), &path("x.json"));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("encoded otherwise"),
        "{err}"
    );
    // New photos are encoded by every part and joined: the model scores them as it scores the
    // joined rows.
    ok(&[
        "classify",
        "--model",
        s(&model),
        "--input",
        s(&photos),
        "--out",
        s(&path("l.csv")),
    ]);
    let m = ModelFile::load(&model).expect("model");
    let rows = csv_rows(&path("l.csv"));
    assert_eq!(rows.len(), j.rows.len());
    for (row, (p, hist)) in rows.iter().zip(j.paths.iter().zip(&j.rows)) {
        let (class, score) = m.scored(hist);
        assert_eq!(&row[1], p);
        assert_eq!(row[2], m.classifier.classes[class]);
        assert_eq!(row[3], score.to_string(), "{p}");
    }
    // The model scores the joined histograms only.
    let evaluate = |histograms: &Path| {
        vocab(&[
            "evaluate",
            "--model",
            s(&model),
            "--histograms",
            s(histograms),
            "--labels",
            s(&labels),
        ])
    };
    assert!(evaluate(&path("j.bin")).status.success());
    let refused = evaluate(&path("h.bin"));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("histograms of 160 values, the model takes 320"),
        "{err}"
    );
    // The same parts joined in the other order: as long, over other vocabularies part by part.
    ok(&[
        "join",
        s(&path("s.bin")),
        s(&path("h.bin")),
        "--out",
        s(&path("r.bin")),
    ]);
    let refused = evaluate(&path("r.bin"));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("encoded over another vocabulary than model"),
        "{err}"
    );
}

#[test]
fn parts_that_do_not_join_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    encodings(dir.path(), &photos);
    let path = |name: &str| dir.path().join(name);
    let out: PathBuf = path("j.bin");
    let join = |parts: &[&str]| fails(&[&["join"][..], parts, &["--out", s(&out)]].concat());
    let (h, hm, s_) = (path("h.bin"), path("hm.bin"), path("s.bin"));
    // Photos as they are beside mirror images.
    let err = join(&[s(&h), s(&path("sm.bin"))]);
    assert!(err.contains("all mirrored"), "{err}");
    // Other photos: the mirror images are the training photos only when labels say so; here a
    // part encoded over a subset of the photos.
    let subset = path("some.csv");
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    let kept: Vec<&str> = labels.lines().take(5).collect();
    std::fs::write(&subset, kept.join("\n") + "\n").expect("subset");
    let fewer = path("few.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&path("s.json")),
        "--input",
        s(&photos),
        "--labels",
        s(&subset),
        "--method",
        "fisher",
        "--descriptor",
        "sift",
        "--out",
        s(&fewer),
    ]);
    let err = join(&[s(&h), s(&fewer)]);
    assert!(
        err.contains("encodings of other photos") && err.contains("8 photos against 4"),
        "{err}"
    );
    // A part without its record, or written over.
    std::fs::copy(&s_, path("bare.bin")).expect("copy");
    for suffix in [".images.csv", ".skipped.csv"] {
        std::fs::copy(
            path(&format!("s.bin{suffix}")),
            path(&format!("bare.bin{suffix}")),
        )
        .expect("copy");
    }
    let err = join(&[s(&h), s(&path("bare.bin"))]);
    assert!(err.contains("has no record"), "{err}");
    let err = fails(&["join", s(&h), s(&s_), "--out", s(&h)]);
    assert!(
        err.contains("--out") && err.contains("is the input"),
        "{err}"
    );
    let err = fails(&["join", s(&h), "--out", s(&out)]);
    assert!(err.contains("2 values required"), "{err}");
    assert!(!out.exists());
    // The mirror images of the photos join, into their own file; a joined file is not a part
    // (its vectors are weighed already).
    ok(&["join", s(&hm), s(&path("sm.bin")), "--out", s(&out)]);
    // A part whose record says another length than its vectors hold.
    let record = std::fs::read_to_string(path("s.bin.encoding.json")).expect("record");
    std::fs::write(
        path("bare.bin.encoding.json"),
        record.replace("\"k\": 2", "\"k\": 3"),
    )
    .expect("record");
    let err = join(&[s(&h), s(&path("bare.bin"))]);
    assert!(
        err.contains("vectors of 160 values, its record's encoding makes 240"),
        "{err}"
    );
    let again = path("again.bin");
    let err = fails(&["join", s(&out), s(&hm), "--out", s(&again)]);
    assert!(err.contains("must be encodings of their own"), "{err}");
    assert!(!again.exists());
}
