//! Models read back (the second hardening round, issue 37): class names that need quoting keep
//! the CSV and Markdown reports whole, and a model is checked before it is used.

use std::path::Path;

use crate::util::*;

/// A photo set, its vocabulary, histograms and a model of `kind` trained on class names that
/// need quoting: (photos, histograms, labels, model).
fn odd_model(
    d: &Path,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let photos = photo_set(d);
    let feats = d.join("f.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--per-image",
        "20",
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
    let hist = d.join("hist.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&voc),
        "--input",
        s(&photos),
        "--out",
        s(&hist),
    ]);
    let names = [
        ("city", "ci,ty"),
        ("field", "fi\"eld"),
        ("hilltown", "hill|town"),
        ("mountain", "moun\ntain"),
    ];
    let mut out = csv::Writer::from_path(d.join("odd.csv")).expect("labels");
    out.write_record(["path", "kind"]).expect("header");
    for row in csv_rows(&photos.join("labels.csv")).iter().skip(1) {
        let odd = names.iter().find(|(k, _)| *k == row[1]).expect("kind").1;
        out.write_record([row[0].as_str(), odd]).expect("row");
    }
    out.flush().expect("flush");
    let labels = d.join("odd.csv");
    let model = d.join("m.json");
    ok(&[
        "train",
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--attribute",
        "kind",
        "--c",
        "1",
        "--out",
        s(&model),
    ]);
    (photos, hist, labels, model)
}

#[test]
fn names_that_need_quoting_keep_csv_and_markdown_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (photos, hist, labels, model) = odd_model(d);
    ok(&[
        "evaluate",
        "--model",
        s(&model),
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
    ]);
    let md = std::fs::read_to_string(d.join("m.json.metrics.md")).expect("metrics.md");
    // Every row of the confusion table has the header's cells: 1 + 4 classes.
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("town"))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    for row in rows {
        let cells = row.replace("\\|", "").matches('|').count();
        assert_eq!(cells, 6, "{row}");
    }
    let metrics = csv_rows(&d.join("m.json.metrics.csv"));
    assert!(
        metrics
            .iter()
            .any(|r| r[0] == "confusion ci,ty -> moun\ntain"),
        "{metrics:?}"
    );
    // Photos named with a comma and quote, and with a newline.
    let odd = d.join("odd");
    std::fs::create_dir(&odd).expect("mkdir");
    std::fs::copy(photos.join("city/city_000.jpg"), odd.join("a,b\"c.jpg")).expect("copy");
    std::fs::copy(photos.join("field/field_001.png"), odd.join("x\ny.png")).expect("copy");
    let out = d.join("labelled.csv");
    ok(&[
        "classify",
        "--model",
        s(&model),
        "--input",
        s(&odd),
        "--out",
        s(&out),
    ]);
    let rows = csv_rows(&out);
    let paths: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(paths, ["a,b\"c.jpg", "x\ny.png"]);
    assert!(rows.iter().all(|r| r.len() == 4), "{rows:?}");
}

#[test]
fn a_model_is_checked_before_it_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (photos, hist, labels, model) = odd_model(d);
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&model).expect("model")).expect("json");
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(s(&fifo)).expect("c path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    type Edit = fn(&mut serde_json::Value, &Path);
    let cases: [(&str, Edit, &str); 7] = [
        (
            "one class",
            |m, _| m["classifier"]["classes"] = serde_json::json!(["urban"]),
            "1 classes",
        ),
        (
            "an extra model",
            |m, _| {
                let first = m["classifier"]["models"][0].clone();
                m["classifier"]["models"]
                    .as_array_mut()
                    .expect("models")
                    .push(first);
            },
            "5 models for 4 classes",
        ),
        (
            "huge k",
            |m, _| m["encoding"]["k"] = serde_json::json!(1u64 << 40),
            "the model's encoding makes",
        ),
        (
            "pyramid 13",
            |m, _| m["encoding"]["pyramid"] = serde_json::json!(13),
            "pyramid = 13",
        ),
        (
            "no soft words",
            |m, _| m["encoding"]["soft"] = serde_json::json!({"words": 0, "sharpness": 1.0}),
            "soft = 0",
        ),
        (
            "a FIFO vocabulary",
            |m, d| m["encoding"]["vocabulary"] = serde_json::json!(d.join("fifo")),
            "is a FIFO",
        ),
        (
            "a device vocabulary",
            |m, _| m["encoding"]["vocabulary"] = serde_json::json!("/dev/zero"),
            "is a device",
        ),
    ];
    for (what, edit, want) in cases {
        let mut m = base.clone();
        edit(&mut m, d);
        let bad = d.join("bad.json");
        std::fs::write(&bad, m.to_string()).expect("write");
        let out = d.join("out.csv");
        let err = fails_within(
            &[
                "classify",
                "--model",
                s(&bad),
                "--input",
                s(&photos),
                "--out",
                s(&out),
            ],
            30,
        );
        assert!(err.contains(want), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        if !what.contains("vocabulary") {
            let err = fails_within(
                &[
                    "evaluate",
                    "--model",
                    s(&bad),
                    "--histograms",
                    s(&hist),
                    "--labels",
                    s(&labels),
                ],
                30,
            );
            assert!(err.contains(want), "{what}, evaluate: {err}");
        }
    }
    // A model file that is itself a FIFO.
    let err = fails_within(
        &[
            "classify",
            "--model",
            s(&fifo),
            "--input",
            s(&photos),
            "--out",
            s(&d.join("o.csv")),
        ],
        30,
    );
    assert!(err.contains("is a FIFO"), "{err}");
}

#[test]
fn the_cross_validation_chooses_c_among_the_grid_it_is_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, hist, labels, _) = odd_model(dir.path());
    let train = |grid: &str| {
        vocab(&[
            "train",
            "--histograms",
            s(&hist),
            "--labels",
            s(&labels),
            "--attribute",
            "kind",
            "--cv",
            "2",
            "--c-grid",
            grid,
            "--out",
            s(&dir.path().join("g.json")),
        ])
    };
    let one = train("7");
    let said = String::from_utf8_lossy(&one.stdout);
    assert!(
        one.status.success() && said.contains("C = 7 (cv accuracy"),
        "{said}"
    );
    for bad in ["1,1", "0", "1,-2"] {
        let refused = train(bad);
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success()
                && err.contains(&format!(
                    "--c-grid {bad}: must be distinct positive numbers"
                )),
            "{bad}: {err}"
        );
    }
}
