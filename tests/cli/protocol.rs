//! `vocab run`'s protocols: repeated random splits of a number of training photos per class
//! (trials), and a separate test folder; each learns only from its own training photos.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::util::*;

/// `dir/name.toml`: the synthetic photos in `photos`, one vocabulary of 8 words in one process,
/// and `classify` added to `[classify]`.
fn config(dir: &Path, name: &str, photos: &Path, classify: &str) -> PathBuf {
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = {:?}\n\n[features]\nper_image = 20\nseed = 1\n\n[partition]\n\
             parts = 2\n\n[kmeans]\nk = [8]\niterations = 5\nseed = 1\nnodes = 0\n\n[encode]\n\
             stride = 16\n\n[classify]\nsplit_by = \"kind\"\ncv = 2\n{classify}\n",
            s(photos)
        ),
    )
    .expect("config");
    config
}

/// The one finished step folder of `stage` labelled `label` (its name is the label, a dash and
/// the key's hex digest).
fn step(work: &Path, stage: &str, label: &str) -> PathBuf {
    let prefix = format!("{stage}/{label}-");
    let found: Vec<String> = steps(work)
        .into_iter()
        .filter(|s| {
            s.strip_prefix(&prefix)
                .is_some_and(|key| key.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .collect();
    assert_eq!(found.len(), 1, "{stage}/{label}: {found:?}");
    work.join(&found[0])
}

/// The classifier a model holds (its split names the work directory's split file).
fn classifier(model: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(model).expect("model");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    json["classifier"].clone()
}

/// A copy of `photos` in which every photo not in `keep` is the photo of the same path in
/// `other` (another seed's set: same names, other pixels).
fn altered(photos: &Path, other: &Path, keep: &BTreeSet<String>, into: &Path) -> usize {
    let mut changed = 0;
    for row in csv_rows(&photos.join("labels.csv")) {
        let path = &row[0];
        let to = into.join(path);
        std::fs::create_dir_all(to.parent().expect("folder")).expect("mkdir");
        let from = if keep.contains(path) {
            photos.join(path)
        } else {
            changed += 1;
            other.join(path)
        };
        std::fs::copy(&from, &to).expect("copy photo");
    }
    std::fs::copy(photos.join("labels.csv"), into.join("labels.csv")).expect("labels");
    changed
}

#[test]
fn each_trial_learns_only_from_its_own_training_photos() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 6, 3);
    let other = photo_set_of(&dir.path().join("other"), 6, 99);
    let config = config(
        dir.path(),
        "trials",
        &photos,
        "train_per_class = 3\ntrials = 2\nmirror = true\n",
    );
    let first = dir.path().join("first");
    let out = ok(&["run", s(&config), "--work", s(&first)]);
    assert!(out.contains("== trial 2 of 2 (split seed 2)"), "{out}");
    let protocol = "2 random splits of 3 training photos per kind, seeds 1 to 2";
    assert!(out.contains(protocol), "{out}");

    // The report: the mean and standard deviation over both trials, each trial's scores, and an
    // opening line per attribute with the protocol.
    let report = first.join("report");
    let accuracy = csv_rows(&report.join("accuracy.csv"));
    let header = std::fs::read_to_string(report.join("accuracy.csv")).expect("csv");
    assert!(
        header.starts_with("k,attribute,accuracy,balanced_accuracy,held_out,std,trials\n"),
        "{header}"
    );
    let trials = csv_rows(&report.join("trials.csv"));
    assert_eq!((accuracy.len(), trials.len()), (3, 6));
    for row in &accuracy {
        let scores: Vec<f64> = trials
            .iter()
            .filter(|t| t[3] == row[1])
            .map(|t| t[4].parse().expect("accuracy"))
            .collect();
        let mean = (scores[0] + scores[1]) / 2.0;
        let std = (scores[0] - scores[1]).abs() / 2f64.sqrt();
        let got: (f64, f64) = (row[2].parse().expect("mean"), row[5].parse().expect("std"));
        // (Rates are written to 4 decimals.)
        assert!(
            (got.0 - mean).abs() < 2e-4 && (got.1 - std).abs() < 2e-4,
            "{row:?} {scores:?}"
        );
        // Three of each kind's six photos are held out per trial.
        assert_eq!((row[4].as_str(), row[6].as_str()), ("12", "2"), "{row:?}");
    }
    let md = std::fs::read_to_string(report.join("report.md")).expect("report");
    let opening = md.lines().nth(2).expect("opening line");
    assert!(
        opening.starts_with("- kind, 4 classes: ") && opening.contains(protocol),
        "{md}"
    );
    // Where it errs, for the attribute of more than two classes: each kind's accuracy and the
    // confusion, the mean over the trials, the diagonal the classes' accuracies; the trials'
    // mean accuracy is their mean, each kind held out as often as the others.
    assert!(md.contains("## Where it errs: kind at K = ") && md.contains("(mean of 2 trials)"));
    assert!(
        !report.join("classes-urbanicity.csv").exists(),
        "two classes: no confusion"
    );
    let classes = csv_rows(&report.join("classes-kind.csv"));
    let confusion = csv_rows(&report.join("confusion-kind.csv"));
    assert_eq!((classes.len(), confusion.len()), (4, 4));
    let value = |v: &String| v.parse::<f64>().expect("a number");
    for (i, (class, row)) in classes.iter().zip(&confusion).enumerate() {
        assert_eq!(
            (class[0].as_str(), class[3].as_str()),
            (row[0].as_str(), "3.0")
        );
        let shares: Vec<f64> = row[1..].iter().map(value).collect();
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-3, "{row:?}");
        assert_eq!(class[1], row[i + 1], "{class:?} {row:?}");
    }
    // The mean of the classes' accuracies is the balanced accuracy's mean.
    let kind = (accuracy.iter()).find(|r| r[1] == "kind").expect("kind");
    let per_class = classes.iter().map(|c| value(&c[1])).sum::<f64>() / 4.0;
    assert!(
        (per_class - value(&kind[3])).abs() < 2e-4,
        "{classes:?} {kind:?}"
    );
    assert!(report.join("confusion-kind.png").is_file());
    // A run from the cache reads each step's confusion back: the same report; a confusion
    // that no longer agrees with its step's metrics is refused, naming it.
    // A file of an earlier report that this one does not make goes with it.
    let before = std::fs::read(report.join("confusion-kind.csv")).expect("confusion");
    std::fs::write(report.join("classes-gone.csv"), "class\n").expect("stale");
    ok(&["run", s(&config), "--work", s(&first)]);
    let after = std::fs::read(report.join("confusion-kind.csv")).expect("confusion");
    assert!(before == after, "the cached run's confusion differs");
    assert!(
        !report.join("classes-gone.csv").exists(),
        "a stale file stayed"
    );
    let svm = (steps(&first).into_iter())
        .find(|s| s.starts_with("svm/") && s.contains("-t1-kind-"))
        .expect("trial 1's kind model");
    let kept = first.join(svm).join("model.json.confusion.csv");
    let text = std::fs::read_to_string(&kept).expect("kept");
    std::fs::write(&kept, text.replacen(",0,", ",9,", 1)).expect("write");
    let err = fails(&["run", s(&config), "--work", s(&first)]);
    assert!(
        err.contains("model.json.confusion.csv") && err.contains("--force svm"),
        "{err}"
    );
    std::fs::write(&kept, text).expect("restore");

    // Trial 1 trains on three photos of each kind, none of them held out.
    let split = csv_rows(&step(&first, "features", "sample-t1").join("split.csv"));
    let train: BTreeSet<String> = (split.iter())
        .filter(|r| r[1] == "train")
        .map(|r| r[0].clone())
        .collect();
    assert_eq!((train.len(), split.len()), (12, 24));

    // Every photo trial 1 does not train on replaced by another: trial 1's vocabulary and
    // models stay the same bytes, while trial 2 (which trains on some of them) changes.
    let copy = dir.path().join("copy");
    assert_eq!(altered(&photos, &other, &train, &copy), 12);
    let second = dir.path().join("second");
    ok(&[
        "run",
        s(&config),
        "--work",
        s(&second),
        "--dataset",
        s(&copy),
    ]);
    let vocabulary = |work: &Path, trial: &str| {
        std::fs::read(step(work, "kmeans", &format!("k8-{trial}")).join("vocabulary.bin"))
            .expect("vocabulary")
    };
    assert_eq!(vocabulary(&first, "t1"), vocabulary(&second, "t1"));
    assert_ne!(vocabulary(&first, "t2"), vocabulary(&second, "t2"));
    for attribute in ["kind", "urbanicity", "elevation"] {
        let model = |work: &Path| {
            classifier(&step(work, "svm", &format!("k8-t1-{attribute}")).join("model.json"))
        };
        assert_eq!(model(&first), model(&second), "{attribute}");
    }
    // The held-out photos did change (they are encoded and scored).
    let histograms = |work: &Path| {
        std::fs::read(step(work, "encode", "k8-t1").join("histograms.bin")).expect("histograms")
    };
    assert_ne!(histograms(&first), histograms(&second));
    // The mirror images are of the training photos alone.
    let mirrored = |work: &Path| {
        let dir = step(work, "encode", "k8-t1-mirrored");
        let listed = csv_rows(&dir.join("histograms.bin.images.csv"));
        let bytes = std::fs::read(dir.join("histograms.bin")).expect("histograms");
        (listed.len(), bytes)
    };
    assert_eq!(mirrored(&first).0, train.len());
    assert_eq!(mirrored(&first), mirrored(&second));
}

#[test]
fn a_test_folder_is_scored_whole_and_never_learned_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 4, 3);
    let test = photo_set_of(&dir.path().join("test"), 3, 11);
    let other = photo_set_of(&dir.path().join("other"), 3, 12);
    let config = config(dir.path(), "plain", &photos, "");
    let first = dir.path().join("first");
    let out = ok(&["run", s(&config), "--work", s(&first), "--test", s(&test)]);
    assert!(out.contains("every one of the 16 photos trains"), "{out}");
    let accuracy = csv_rows(&first.join("report/accuracy.csv"));
    for row in &accuracy {
        // Every labelled test photo scored, once.
        assert_eq!(
            (&row[4][..], &row[5][..], &row[6][..]),
            ("12", "0.0000", "1")
        );
    }
    let md = std::fs::read_to_string(first.join("report/report.md")).expect("report");
    assert!(
        md.contains("the test folder") && md.contains(s(&test)),
        "{md}"
    );
    // Other photos in the test folder: the same vocabulary and models, other test histograms.
    let second = dir.path().join("second");
    ok(&["run", s(&config), "--work", s(&second), "--test", s(&other)]);
    let bytes = |work: &Path, stage: &str, label: &str, file: &str| {
        std::fs::read(step(work, stage, label).join(file)).expect("file")
    };
    assert_eq!(
        bytes(&first, "kmeans", "k8", "vocabulary.bin"),
        bytes(&second, "kmeans", "k8", "vocabulary.bin")
    );
    assert_eq!(
        bytes(&first, "encode", "k8", "histograms.bin"),
        bytes(&second, "encode", "k8", "histograms.bin")
    );
    assert_ne!(
        bytes(&first, "encode", "k8-test", "histograms.bin"),
        bytes(&second, "encode", "k8-test", "histograms.bin")
    );
    for attribute in ["kind", "urbanicity", "elevation"] {
        let model = |work: &Path| {
            classifier(&step(work, "svm", &format!("k8-{attribute}")).join("model.json"))
        };
        assert_eq!(model(&first), model(&second), "{attribute}");
    }
    // `config check` takes the test folder too.
    let checked = ok(&["config", "check", s(&config), "--test", s(&test)]);
    assert!(checked.contains("the test folder"), "{checked}");
    // `[dataset] test` in the config does what --test does.
    let keyed = dir.path().join("keyed.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text.replacen(
        "\n\n[features]",
        &format!("\ntest = {:?}\n\n[features]", s(&test)),
        1,
    );
    std::fs::write(&keyed, text).expect("keyed config");
    let third = dir.path().join("third");
    ok(&["run", s(&keyed), "--work", s(&third)]);
    let read = |work: &Path| std::fs::read(work.join("report/accuracy.csv")).expect("accuracy");
    assert_eq!(read(&first), read(&third));
    // Mirror images: of every photo of the dataset (each trains), none of the test folder's.
    let mirrored = self::config(dir.path(), "mirrored", &photos, "mirror = true\n");
    ok(&["run", s(&mirrored), "--work", s(&first), "--test", s(&test)]);
    let listed = step(&first, "encode", "k8-mirrored").join("histograms.bin.images.csv");
    assert_eq!(csv_rows(&listed).len(), 16);
    assert!(!steps(&first).iter().any(|s| s.contains("test-mirrored")));
}

#[test]
fn protocols_that_cannot_work_are_refused_before_any_stage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 3, 3);
    let work = dir.path().join("work");
    let trials = config(
        dir.path(),
        "trials",
        &photos,
        "train_per_class = 1\ntrials = 3\n",
    );
    let plan = ok(&["run", s(&trials), "--plan"]);
    assert!(
        plan.contains("3 random splits of 1 training photos per kind")
            && plan.contains("each of the 3 trials")
            && plan.contains("a trial, ")
            && plan.contains("for the 3 trials: features "),
        "{plan}"
    );
    // The field's config plans without its photos: `[plan] photos` and `classes` size it.
    let scene15 = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/scene15.toml");
    let plan = ok(&[
        "run",
        scene15,
        "--plan",
        "--dataset",
        s(&dir.path().join("absent")),
    ]);
    assert!(
        plan.contains("4485 photos; 10 random splits of 100 training photos per class")
            && plan.contains("1500 photos train each trial's vocabularies and models")
            && plan.contains("for the 10 trials")
            && plan.contains("weighed by every Gaussian's posterior"),
        "{plan}"
    );
    let plain = config(dir.path(), "plain", &photos, "");
    let (labels, city) = (photos.join("labels.csv"), photos.join("city"));
    let cases: Vec<(Vec<&str>, PathBuf, &str)> = vec![
        // A test folder with trials, or with a number per class.
        (vec!["--test", s(&photos)], trials.clone(), "scored once"),
        (
            vec!["--test", s(&photos)],
            config(dir.path(), "two", &photos, "train_per_class = 2"),
            "drop train_per_class",
        ),
        (
            vec!["--test-labels", s(&labels)],
            plain.clone(),
            "give --test DIR too",
        ),
        // Three photos of each kind, all of them training.
        (
            vec![],
            config(dir.path(), "three", &photos, "train_per_class = 3"),
            "has 3 photos, and train_per_class = 3 leaves none",
        ),
        // The test folder inside the photos.
        (vec!["--test", s(&city)], plain.clone(), "overlap"),
    ];
    for (args, config, want) in cases {
        let mut all = vec!["run", s(&config), "--work", s(&work)];
        all.extend(&args);
        let err = fails(&all);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!work.join("features").exists(), "{args:?}: no stage ran");
    }
    // Test labels that give an attribute other classes.
    let test = photo_set_of(&dir.path().join("test"), 1, 5);
    let labels = std::fs::read_to_string(test.join("labels.csv")).expect("labels");
    let odd = dir.path().join("odd.csv");
    std::fs::write(&odd, labels.replace(",city,", ",town,")).expect("odd labels");
    let err = fails(&[
        "run",
        s(&plain),
        "--work",
        s(&work),
        "--test",
        s(&test),
        "--test-labels",
        s(&odd),
    ]);
    assert!(err.contains("odd.csv") && err.contains("\"town\""), "{err}");
    assert!(!work.join("features").exists());
    // Config rules name their key and line.
    for (classify, want) in [
        (
            "trials = 0",
            "[classify] trials, line 23: must be 1 to 1000 random splits",
        ),
        (
            "train_per_class = 0",
            "[classify] train_per_class, line 23: must be at least 1",
        ),
    ] {
        let bad = config(dir.path(), "bad", &photos, classify);
        let err = fails(&["config", "check", s(&bad)]);
        assert!(err.contains(want), "{classify}: {err}");
    }
}
