//! Outputs never destroy inputs (the second hardening round, issue 37): an output that is,
//! holds or lies inside an input is refused naming both, before anything is written.

use std::path::Path;

use crate::util::*;

/// Every file below `dir`, with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    (files_below(dir).into_iter())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect()
}

#[test]
fn an_output_that_is_an_input_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set(d);
    let labels = photos.join("labels.csv");
    let feats = d.join("b.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "400",
        "--dims",
        "8",
        "--clusters",
        "4",
        "--out",
        s(&feats),
    ]);
    let voc = d.join("voc.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&feats),
        "--k",
        "4",
        "--out",
        s(&voc),
    ]);
    let parts = d.join("parts");
    ok(&[
        "partition",
        "--features",
        s(&feats),
        "--parts",
        "4",
        "--out",
        s(&parts),
    ]);
    let hog_voc = d.join("hog-voc.bin");
    let hog = d.join("hog.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--per-image",
        "20",
        "--out",
        s(&hog),
    ]);
    ok(&[
        "kmeans",
        "--features",
        s(&hog),
        "--k",
        "4",
        "--out",
        s(&hog_voc),
    ]);
    let hist = d.join("hist.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&hog_voc),
        "--input",
        s(&photos),
        "--out",
        s(&hist),
    ]);
    let model = d.join("m.json");
    ok(&[
        "train",
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--attribute",
        "urbanicity",
        "--c",
        "1",
        "--out",
        s(&model),
    ]);
    let before = snapshot(d);
    let city = photos.join("city").join("city_000.png");
    let part0 = parts.join("part-0000.bin");
    let voc_link = d.join("voc-link.bin");
    std::fs::hard_link(&voc, &voc_link).expect("hard link");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![
                "kmeans",
                "--features",
                s(&feats),
                "--k",
                "4",
                "--out",
                s(&feats),
            ],
            format!("--out {}: is the input --features {}", s(&feats), s(&feats)),
        ),
        (
            vec!["features", "--input", s(&photos), "--out", s(&city)],
            format!("lies inside the input folder --input {}", s(&photos)),
        ),
        (
            vec![
                "encode",
                "--vocabulary",
                s(&hog_voc),
                "--input",
                s(&photos),
                "--out",
                s(&hog_voc),
            ],
            format!("is the input --vocabulary {}", s(&hog_voc)),
        ),
        (
            vec![
                "encode",
                "--vocabulary",
                s(&voc_link),
                "--input",
                s(&photos),
                "--out",
                s(&voc),
            ],
            format!("is the input --vocabulary {}", s(&voc_link)),
        ),
        (
            vec![
                "train",
                "--histograms",
                s(&hist),
                "--labels",
                s(&labels),
                "--attribute",
                "urbanicity",
                "--out",
                s(&hist),
            ],
            format!("is the input --histograms {}", s(&hist)),
        ),
        (
            vec![
                "train",
                "--histograms",
                s(&hist),
                "--labels",
                s(&labels),
                "--attribute",
                "urbanicity",
                "--out",
                s(&labels),
            ],
            format!("is the input --labels {}", s(&labels)),
        ),
        (
            vec![
                "classify",
                "--model",
                s(&model),
                "--input",
                s(&photos),
                "--out",
                s(&model),
            ],
            format!("is the input --model {}", s(&model)),
        ),
        (
            vec![
                "partition",
                "--features",
                s(&part0),
                "--parts",
                "2",
                "--out",
                s(&parts),
            ],
            format!("holds the input --features {}", s(&part0)),
        ),
        (
            vec!["convert", "--input", s(&feats), "--out", s(&feats)],
            format!("is the input --input {}", s(&feats)),
        ),
        (
            vec!["datasets", "photos", "--out", s(&photos)],
            "already holds files".to_string(),
        ),
        (
            vec![
                "kmeans",
                "--features",
                s(&feats),
                "--k",
                "4",
                "--out",
                s(&parts),
            ],
            "is an existing folder".to_string(),
        ),
        (
            vec!["partition", "--features", s(&feats), "--out", s(&voc)],
            "is an existing file".to_string(),
        ),
    ];
    for (args, want) in cases {
        let err = fails(&args);
        assert!(err.contains(&want), "{args:?}: {err}");
    }
    std::fs::remove_file(&voc_link).expect("rm link");
    assert!(snapshot(d) == before, "an input changed");
}

#[test]
fn a_work_directory_inside_the_photo_folder_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 12, 7);
    let before = snapshot(&photos);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let work = photos.join("work");
    let err = fails(&["run", config, "--dataset", s(&photos), "--work", s(&work)]);
    assert!(
        err.contains("lies inside the input folder --dataset") && err.contains(s(&work)),
        "{err}"
    );
    assert!(snapshot(&photos) == before && !work.exists());
}
