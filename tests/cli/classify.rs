//! `vocab train`, `evaluate` and `classify`, on the labelled scenes of [`Scenes`].

use std::path::Path;

use crate::encode::Scenes;
use crate::util::*;

#[test]
fn train_evaluate_and_classify_with_a_held_out_split() {
    let scenes = Scenes::new();
    let hist = scenes.hellinger();
    let Scenes {
        dir,
        photos,
        labels,
        ..
    } = scenes;

    let model = dir.path().join("urban.json");
    let out = ok(&[
        "train",
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--attribute",
        "urbanicity",
        "--cv",
        "3",
        "--holdout",
        "0.5",
        "--out",
        s(&model),
    ]);
    assert!(
        out.contains("24 labelled photos, 12 trained on, 12 held out"),
        "{out}"
    );
    let out = ok(&[
        "evaluate",
        "--model",
        s(&model),
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--held-out",
    ]);
    assert!(
        out.contains(
            "model trained on a seeded stratified split (seed 1, 50% of each class held out)"
        ) && out.contains("12 held-out photos scored"),
        "{out}"
    );
    let mut lines = out.lines().skip(1);
    let accuracy: f64 = lines
        .next()
        .and_then(|l| l.strip_prefix("accuracy "))
        .expect("accuracy line")
        .parse()
        .expect("number");
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("balanced_accuracy ")),
        "{out}"
    );
    assert!(
        accuracy >= 0.75,
        "synthetic urban/rural scenes should be easy: {out}"
    );
    assert!(dir.path().join("urban.json.metrics.md").is_file());

    // By default train fits on every labelled photo and evaluate scores every labelled photo
    // it is given (as scikit-learn's fit and score do); --held-out then has nothing to score.
    let all = dir.path().join("urban-all.json");
    let out = ok(&[
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
        s(&all),
    ]);
    assert!(
        out.contains("24 labelled photos, 24 trained on, 0 held out"),
        "{out}"
    );
    let args = [
        "evaluate",
        "--model",
        s(&all),
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
    ];
    let out = ok(&args);
    assert!(
        out.contains("model trained on every labelled photo")
            && out.contains("24 labelled photos scored"),
        "{out}"
    );
    let held_out: Vec<&str> = args.iter().copied().chain(["--held-out"]).collect();
    let err = fails(&held_out);
    assert!(
        err.contains("--held-out") && err.contains("nothing held out"),
        "{err}"
    );
    let err = fails(&[
        "train",
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--attribute",
        "urbanicity",
        "--holdout",
        "1.5",
        "--out",
        s(&all),
    ]);
    assert!(err.contains("--holdout 1.5"), "{err}");

    let labelled = dir.path().join("labelled.csv");
    ok(&[
        "classify",
        "--model",
        s(&model),
        "--input",
        s(&photos),
        "--out",
        s(&labelled),
    ]);
    let rows = csv_rows(&labelled);
    assert_eq!(rows.len(), 24);
    assert!(rows.iter().all(|r| r[2] == "urban" || r[2] == "rural"));
    // The score is the decision value that chose the class: positive for urban (classes in
    // order, rural first), and the photos not labelled are listed with why.
    let header = std::fs::read_to_string(&labelled).expect("labels");
    assert!(
        header.starts_with("picture_id,path,urbanicity,score\n"),
        "{header}"
    );
    for r in &rows {
        let score: f64 = r[3].parse().expect("a number");
        assert_eq!(score > 0.0, r[2] == "urban", "{r:?}");
    }
    let new = dir.path().join("new");
    std::fs::create_dir(&new).expect("mkdir");
    std::fs::copy(photos.join("city/city_000.jpg"), new.join("a.jpg")).expect("copy");
    std::fs::write(new.join("b.jpg"), b"").expect("empty photo");
    let out = ok(&[
        "classify",
        "--model",
        s(&model),
        "--input",
        s(&new),
        "--out",
        s(&labelled),
    ]);
    assert!(
        out.contains("1 photos labelled (1 skipped, reasons in")
            && out.contains("labelled.csv.skipped.csv"),
        "{out}"
    );
    let skipped = csv_rows(&dir.path().join("labelled.csv.skipped.csv"));
    assert_eq!(skipped, [["1", "b.jpg", "empty file"]]);

    // A model's encoding is checked by the rules of vocab encode before any photo is encoded:
    // a hostile one is refused naming the broken rule, never a panic or a huge allocation.
    let text = std::fs::read_to_string(&model).expect("model");
    let hostile = dir.path().join("hostile.json");
    for (from, to, want) in [
        (
            "\"pyramid\":1",
            "\"pyramid\":40",
            "pyramid = 40: must be 1 to 5 levels",
        ),
        (
            "\"stride\":8",
            "\"stride\":0",
            "stride = 0: must be at least 1 pixel",
        ),
        (
            "\"norm\":\"hellinger\"",
            "\"norm\":\"l7\"",
            "norm = l7: must be l1 or hellinger",
        ),
        (
            "\"max_side\":null",
            "\"max_side\":null,\"soft\":{\"words\":0,\"sharpness\":10.0}",
            "soft = 0: must be 0 (the nearest word alone) or 2 to 64 words",
        ),
    ] {
        assert!(text.contains(from), "{from} in {text}");
        std::fs::write(&hostile, text.replacen(from, to, 1)).expect("write");
        let args = [
            "classify",
            "--model",
            s(&hostile),
            "--input",
            s(&photos),
            "--out",
        ];
        let err = fails(&[&args[..], &[s(&labelled)]].concat());
        assert!(err.contains(want), "{want}: {err}");
    }

    let err = fails(&[
        "train",
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--attribute",
        "altitude",
        "--out",
        s(&model),
    ]);
    assert!(
        err.contains("no attribute column \"altitude\"") && err.contains("elevation"),
        "{err}"
    );
}

#[test]
fn a_chi2_kernel_map_is_kept_by_the_model_and_needs_l1_histograms() {
    let scenes = Scenes::new();
    let Scenes {
        dir,
        photos,
        labels,
        ..
    } = &scenes;
    let labelled = dir.path().join("labelled.csv");
    // A chi-squared kernel map on L1 histograms: the model keeps it and applies it to every
    // photo it scores, in evaluate and in classify.
    let l1 = dir.path().join("hist-l1.bin");
    scenes.encode_l1(&l1, &[]);
    let mapped = dir.path().join("urban-chi2.json");
    let train_map = |hist: &Path| -> Vec<String> {
        [
            "train",
            "--histograms",
            s(hist),
            "--labels",
            s(labels),
            "--attribute",
            "urbanicity",
            "--c",
            "1",
            "--kernel-map",
            "chi2",
            "--out",
            s(&mapped),
        ]
        .map(String::from)
        .to_vec()
    };
    let args = train_map(&l1);
    let out = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.contains("chi2 kernel map of order 3"), "{out}");
    let saved = std::fs::read_to_string(&mapped).expect("model");
    assert!(
        saved.contains(r#""kernel_map":{"kernel":"chi2","order":3"#),
        "{saved}"
    );
    let out = ok(&[
        "evaluate",
        "--model",
        s(&mapped),
        "--histograms",
        s(&l1),
        "--labels",
        s(labels),
    ]);
    assert!(out.contains("24 labelled photos scored"), "{out}");
    ok(&[
        "classify",
        "--model",
        s(&mapped),
        "--input",
        s(photos),
        "--out",
        s(&labelled),
    ]);
    assert_eq!(csv_rows(&labelled).len(), 24);
    // Histograms of another length are refused with both lengths, not scored wrongly.
    let pyramid = dir.path().join("hist-p2.bin");
    scenes.encode_l1(&pyramid, &["--pyramid", "2"]);
    let err = fails(&[
        "evaluate",
        "--model",
        s(&mapped),
        "--histograms",
        s(&pyramid),
        "--labels",
        s(labels),
    ]);
    assert!(
        err.contains(
            "histograms of 160 values (1120 through the model's chi2 map), the model takes 224"
        ),
        "{err}"
    );
    let hist = scenes.hellinger();
    // The map takes L1 histograms: on Hellinger ones it says how to encode.
    let args = train_map(&hist);
    let err = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("--kernel-map chi2") && err.contains("--norm l1"),
        "{err}"
    );
}

#[test]
fn mirror_images_of_the_training_photos_train_beside_them() {
    let scenes = Scenes::new();
    let path = |name: &str| scenes.dir.path().join(name);
    let encode = |out: &str, extra: &[&str]| {
        let args = scenes.encode_args(&path(out), extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args)
    };
    encode("h.bin", &[]);
    encode("m.bin", &["--mirror"]);
    encode("plain.bin", &[]);
    encode("m-p2.bin", &["--mirror", "--pyramid", "2"]);
    // Mirror images of a few photos only.
    let few = path("few.csv");
    let rows = csv_rows(&scenes.labels);
    let listed: String = rows[..3].iter().map(|r| format!("{}\n", r[0])).collect();
    std::fs::write(&few, format!("path\n{listed}")).expect("few");
    encode("m-few.bin", &["--mirror", "--labels", s(&few)]);
    let train = |histograms: &str, mirrored: Option<&str>, out: &str| {
        let (h, model) = (path(histograms), path(out));
        let mirrored = mirrored.map(path);
        let mut args = vec![
            "train",
            "--histograms",
            s(&h),
            "--labels",
            s(&scenes.labels),
            "--attribute",
            "urbanicity",
            "--cv",
            "3",
            "--holdout",
            "0.5",
            "--out",
            s(&model),
        ];
        if let Some(m) = &mirrored {
            args.extend(["--mirrored", s(m)]);
        }
        vocab(&args)
    };
    let said = train("h.bin", Some("m.bin"), "with.json");
    let text = String::from_utf8_lossy(&said.stdout).to_string();
    assert!(said.status.success(), "{said:?}");
    assert!(
        text.contains("12 trained on (and their 12 mirror images), 12 held out"),
        "{text}"
    );
    assert!(train("h.bin", None, "without.json").status.success());
    let model = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path(name)).expect("model")).expect("json")
    };
    let (with, without) = (model("with.json"), model("without.json"));
    assert_eq!(with["mirrored"], serde_json::json!(true));
    assert!(without.get("mirrored").is_none());
    assert_ne!(with["classifier"], without["classifier"]);
    // The model scores photos as they are, as any other.
    let said = ok(&[
        "evaluate",
        "--model",
        s(&path("with.json")),
        "--histograms",
        s(&path("h.bin")),
        "--labels",
        s(&scenes.labels),
        "--held-out",
    ]);
    assert!(said.contains("12 held-out photos scored"), "{said}");
    // Refused, naming the files: the histograms themselves, photos as they are, mirrored
    // photos as --histograms, other settings, training photos without a mirror image.
    for (histograms, mirrored, want) in [
        ("h.bin", "h.bin", "is the --histograms file"),
        (
            "h.bin",
            "plain.bin",
            "plain.bin: holds the photos as they are",
        ),
        ("m.bin", "h.bin", "m.bin: holds mirrored photos"),
        (
            "h.bin",
            "m-p2.bin",
            "m-p2.bin: encoded otherwise than --histograms",
        ),
        (
            "h.bin",
            "m-few.bin",
            "m-few.bin: has no row for the training photo",
        ),
    ] {
        let said = train(histograms, Some(mirrored), "refused.json");
        let err = String::from_utf8_lossy(&said.stderr).to_string();
        assert!(
            !said.status.success() && err.contains(want),
            "{mirrored}: {err}"
        );
        assert!(!path("refused.json").exists());
    }
}
