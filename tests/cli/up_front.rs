//! `vocab run`'s up-front checks: bad labels and a newcomer's mistakes are refused before the
//! first heavy stage, naming each thing once.

use crate::util::*;

#[test]
fn bad_labels_are_refused_before_the_first_heavy_stage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    let mut lines = labels.lines();
    let header = lines.next().expect("header");
    let first = lines.next().expect("a row");
    let config = dir.path().join("c.toml");
    let work = dir.path().join("work");
    for (name, text, want) in [
        // The first photo listed twice.
        ("dup.csv", format!("{labels}{first}\n"), "listed twice"),
        // One attribute whose every photo has the same class.
        (
            "one.csv",
            std::iter::once(format!("{header},constant"))
                .chain(labels.lines().skip(1).map(|l| format!("{l},same")))
                .collect::<Vec<_>>()
                .join("\n"),
            "need two or more",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("labels");
        std::fs::write(
            &config,
            format!(
                "[dataset]\npath = {:?}\nlabels = {:?}\n\n[kmeans]\nk = [4]\n",
                s(&photos),
                s(&path)
            ),
        )
        .expect("config");
        let err = fails(&["run", s(&config), "--work", s(&work)]);
        assert!(err.contains(want) && err.contains(name), "{name}: {err}");
        assert!(!work.join("features").exists(), "{name}: no stage ran");
    }
}

#[test]
fn a_newcomers_mistakes_are_refused_up_front_naming_each_thing_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    // A missing file is named once, with its cause once.
    let err = fails(&[
        "encode",
        "--vocabulary",
        "nope.bin",
        "--input",
        s(&photos),
        "--out",
        s(&dir.path().join("h.bin")),
    ]);
    assert_eq!(err.matches("nope.bin").count(), 1, "{err}");
    assert_eq!(err.matches("No such file").count(), 1, "{err}");
    // An output folder that does not exist is named before any work.
    let err = fails(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&dir.path().join("missing/f.bin")),
    ]);
    assert!(
        err.contains("--out") && err.contains("does not exist"),
        "{err}"
    );

    // A vocabulary larger than its sample: refused by config check, --plan and run alike,
    // before any stage.
    let config = dir.path().join("big.toml");
    std::fs::write(
        &config,
        "[dataset]\npath = \"photos\"\n[features]\nper_image = 5\n[kmeans]\nk = [8, 1000]\nnodes = 0\n",
    )
    .expect("write");
    let work = dir.path().join("work");
    for args in [
        vec!["config", "check", s(&config)],
        vec!["run", s(&config), "--plan"],
        vec!["run", s(&config), "--work", s(&work)],
    ] {
        let err = fails(&args);
        // 8 photos, half of each kind train: 4 x 5 patches.
        assert!(
            err.contains("k = 1000") && err.contains("20 vectors"),
            "{args:?}: {err}"
        );
    }
    assert!(!work.join("features").exists());

    // A photo folder that is not there says how to point at one; labels elsewhere take --labels.
    let err = fails(&[
        "run",
        s(&config),
        "--dataset",
        s(&dir.path().join("elsewhere")),
        "--plan",
    ]);
    assert!(
        err.contains("--dataset DIR") && err.contains("--labels"),
        "{err}"
    );
    let labels = dir.path().join("labels.csv");
    std::fs::rename(photos.join("labels.csv"), &labels).expect("move labels");
    let err = fails(&["run", s(&config), "--plan"]);
    assert!(err.contains("--labels FILE"), "{err}");
    let small = dir.path().join("small.toml");
    std::fs::write(
        &small,
        "[dataset]\npath = \"photos\"\n[kmeans]\nk = [8]\nnodes = 0\n",
    )
    .expect("write");
    let plan = ok(&["run", s(&small), "--labels", s(&labels), "--plan"]);
    assert!(plan.contains("8 photos"), "{plan}");

    // The help says what a newcomer would otherwise find out the hard way.
    let help = ok(&["cluster", "local", "--help"]);
    assert!(
        help.contains("foreground") && help.contains("Ctrl-C"),
        "{help}"
    );
    let help = ok(&["kmeans", "--help"]);
    assert!(help.contains("one centroid per line"), "{help}");
}
