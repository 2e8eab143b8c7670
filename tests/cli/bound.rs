//! Artifacts bound to their inputs by content (issue 49): models and histograms record the
//! SHA-256 of the vocabulary they were made over, and a test folder never reaches the dataset.

use std::path::Path;

use crate::encode::Scenes;
use crate::util::*;

/// `vocab train` of urbanicity on `hist` into `model`, with `extra` flags.
fn train(hist: &Path, labels: &Path, model: &Path, extra: &[&str]) -> Vec<String> {
    let args = [
        "train",
        "--histograms",
        s(hist),
        "--labels",
        s(labels),
        "--attribute",
        "urbanicity",
        "--cv",
        "2",
        "--out",
        s(model),
    ];
    args.iter().chain(extra).map(|a| a.to_string()).collect()
}

#[test]
fn a_model_is_bound_to_its_vocabularys_bytes_not_its_path() {
    let scenes = Scenes::new();
    let hist = scenes.hellinger();
    let d = scenes.dir.path();
    let record = std::fs::read_to_string(d.join("hist.bin.encoding.json")).expect("record");
    assert!(record.contains("\"vocabulary_sha256\""), "{record}");
    let model = d.join("m.json");
    ok(&strs(&train(&hist, &scenes.labels, &model, &[])));
    let labels_out = d.join("labels-out.csv");
    let classify = |out: &Path| {
        vec![
            "classify".to_string(),
            "--model".into(),
            s(&model).into(),
            "--input".into(),
            s(&scenes.photos).into(),
            "--out".into(),
            s(out).into(),
        ]
    };
    ok(&strs(&classify(&labels_out)));
    // The model's vocabulary is an input: classify never writes over it.
    let err = fails(&strs(&classify(&scenes.vocab)));
    assert!(err.contains("is the input the model's vocabulary"), "{err}");
    // Made again at the same path (another seed): the model no longer matches it.
    let other = d.join("other.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&d.join("sample.bin")),
        "--k",
        "32",
        "--iterations",
        "8",
        "--seed",
        "9",
        "--out",
        s(&other),
    ]);
    std::fs::copy(&other, &scenes.vocab).expect("copy");
    let err = fails(&strs(&classify(&d.join("again.csv"))));
    assert!(
        err.contains("another vocabulary") && err.contains(s(&scenes.vocab)),
        "{err}"
    );
    // Histograms over another vocabulary are refused by evaluate, naming both.
    let other_hist = d.join("other-hist.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&other),
        "--input",
        s(&scenes.photos),
        "--out",
        s(&other_hist),
        "--norm",
        "hellinger",
    ]);
    let err = fails(&[
        "evaluate",
        "--model",
        s(&model),
        "--histograms",
        s(&other_hist),
        "--labels",
        s(&scenes.labels),
    ]);
    assert!(
        err.contains("encoded over another vocabulary") && err.contains(s(&other_hist)),
        "{err}"
    );
    // Its digest taken out of the record: refused, never compared by path instead.
    let record = d.join("other-hist.bin.encoding.json");
    let text = std::fs::read_to_string(&record).expect("record");
    let mut json: serde_json::Value = serde_json::from_str(&text).expect("json");
    json.as_object_mut()
        .expect("object")
        .remove("vocabulary_sha256");
    std::fs::write(&record, json.to_string()).expect("write");
    let err = fails(&[
        "evaluate",
        "--model",
        s(&model),
        "--histograms",
        s(&other_hist),
        "--labels",
        s(&scenes.labels),
    ]);
    assert!(err.contains("do not both carry"), "{err}");
}

#[test]
fn mirror_images_are_checked_by_their_records_which_must_be_there() {
    let scenes = Scenes::new();
    let hist = scenes.hellinger();
    let d = scenes.dir.path();
    let mirrored = d.join("mirrored.bin");
    scenes.hellinger_into(&mirrored, &["--mirror"]);
    let model = d.join("m.json");
    ok(&strs(&train(
        &hist,
        &scenes.labels,
        &model,
        &["--mirrored", s(&mirrored)],
    )));
    // Without the mirrored file's record nothing says what its rows are: refused.
    std::fs::remove_file(d.join("mirrored.bin.encoding.json")).expect("rm");
    let err = fails(&strs(&train(
        &hist,
        &scenes.labels,
        &model,
        &["--mirrored", s(&mirrored)],
    )));
    assert!(
        err.contains("--mirrored") && err.contains("has no record"),
        "{err}"
    );
}

#[test]
fn evaluate_scores_a_photo_with_its_mirror_image_by_the_mean_of_their_decisions() {
    use vocab_pipeline::classify::{ModelFile, read_histograms};
    let scenes = Scenes::new();
    let hist = scenes.hellinger();
    let d = scenes.dir.path();
    let mirrored = d.join("mirrored.bin");
    let encode = |out: &Path, extra: &[&str]| {
        scenes.hellinger_into(out, &[&["--mirror"][..], extra].concat());
    };
    encode(&mirrored, &[]);
    let model = d.join("m.json");
    ok(&strs(&train(
        &hist,
        &scenes.labels,
        &model,
        &["--holdout", "0.5"],
    )));
    let args = |extra: &[&'static str]| {
        let base = [
            "evaluate",
            "--model",
            s(&model),
            "--histograms",
            s(&hist),
            "--labels",
            s(&scenes.labels),
            "--held-out",
        ];
        [&base[..], extra].concat()
    };
    let evaluate = |extra: &[&str]| {
        let said = ok(&args(&[])
            .into_iter()
            .chain(extra.iter().copied())
            .collect::<Vec<_>>());
        (said, csv_rows(&d.join("m.json.predictions.csv")))
    };
    let refused = |mirrored: &Path| {
        let mut all = args(&["--mirrored"]);
        all.push(s(mirrored));
        fails(&all)
    };
    // Each scored photo's row: path, truth, predicted, then the one model's decision value
    // (urbanicity has two classes), whose sign is the prediction.
    let (_, alone) = evaluate(&[]);
    let read = |text: &str| text.parse::<f64>().expect("a decision value");
    let classes = &ModelFile::load(&model).expect("model").classifier.classes;
    for row in &alone {
        assert_eq!(row.len(), 4, "{row:?}");
        assert_eq!(row[2], classes[usize::from(read(&row[3]) > 0.0)], "{row:?}");
    }
    let (said, both) = evaluate(&["--mirrored", s(&mirrored)]);
    assert!(said.contains("with their mirror images"), "{said}");
    // Each photo's value is the mean of its own and its mirror image's, the class its sign.
    let loaded = ModelFile::load(&model).expect("model");
    let mirror = read_histograms(&mirrored).expect("mirrored");
    assert_eq!(both.len(), alone.len());
    for (one, two) in alone.iter().zip(&both) {
        assert_eq!(one[..2], two[..2]);
        let at = mirror
            .paths
            .iter()
            .position(|p| *p == one[0])
            .expect("mirrored row");
        let theirs = loaded.decisions(&mirror.rows[at])[0];
        let want = (read(&one[3]) + theirs) / 2.0;
        assert!(
            (read(&two[3]) - want).abs() <= 1e-5 * (1.0 + want.abs()),
            "{two:?} {want}"
        );
        assert_eq!(two[2], classes[usize::from(read(&two[3]) > 0.0)], "{two:?}");
    }
    // Mirror images of only some photos, or none at all (the photos as they are), are refused.
    let some = d.join("some.bin");
    let train_half = d.join("half.csv");
    let rows = csv_rows(&scenes.labels);
    let kept: Vec<String> = std::iter::once("path".to_string())
        .chain(rows.iter().step_by(4).map(|r| r[0].clone()))
        .collect();
    std::fs::write(&train_half, kept.join("\n") + "\n").expect("write");
    encode(&some, &["--labels", s(&train_half)]);
    let err = refused(&some);
    assert!(err.contains("has no row for the scored photo"), "{err}");
    let err = refused(&hist);
    assert!(err.contains("holds the photos as they are"), "{err}");
}

#[test]
fn a_test_folder_that_reaches_the_datasets_photos_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set_of(d, 3, 5);
    let config = small_config(d, &photos);
    let other = photo_set_of(&d.join("other"), 1, 9);
    let rows = csv_rows(&other.join("labels.csv"));
    let first = rows[0][0].clone();
    for how in ["hard link", "copy", "symlink"] {
        let test = d.join(format!("test-{}", how.replace(' ', "-")));
        let _ = std::fs::remove_dir_all(&test);
        // The other set, but for one photo that is the dataset's (by link or by bytes).
        copy_tree(&other, &test);
        let theirs = test.join(&first);
        let ours = photos.join(&first);
        std::fs::remove_file(&theirs).expect("rm");
        match how {
            "hard link" => std::fs::hard_link(&ours, &theirs).expect("link"),
            "copy" => {
                std::fs::copy(&ours, &theirs).expect("copy");
            }
            _ => std::os::unix::fs::symlink(&ours, &theirs).expect("symlink"),
        }
        let work = d.join(format!("work-{}", how.replace(' ', "-")));
        let err = fails(&["run", s(&config), "--work", s(&work), "--test", s(&test)]);
        assert!(
            err.contains("reaches the dataset's own photos") && err.contains(&first),
            "{how}: {err}"
        );
    }
}

#[test]
fn a_mixture_of_huge_values_stops_the_encode_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set_of(d, 2, 4);
    sample_of(d, &photos);
    let mixture = crate::encode::small_mixture(d);
    // Finite, and far too large: every Fisher vector over it would be NaN.
    let text = std::fs::read_to_string(&mixture).expect("mixture");
    let mut json: serde_json::Value = serde_json::from_str(&text).expect("json");
    for m in json["gmm"]["means"].as_array_mut().expect("means") {
        *m = serde_json::json!(m.as_f64().expect("number") * 1e300);
    }
    let huge = d.join("huge.json");
    std::fs::write(&huge, json.to_string()).expect("write");
    let out = d.join("fv.bin");
    let err = fails(&[
        "encode",
        "--vocabulary",
        s(&huge),
        "--input",
        s(&photos),
        "--stride",
        "16",
        "--method",
        "fisher",
        "--out",
        s(&out),
    ]);
    assert!(
        err.contains(s(&huge)) && err.contains("not finite"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written");
}
