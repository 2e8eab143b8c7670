//! `vocab datasets`: data sets made from photos on disk.

use crate::util::*;

#[test]
fn datasets_scene15_makes_the_unpacked_folders_a_dataset_or_says_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set(d);
    let photo = photos.join("city/city_000.jpg");
    // The published spelling, two photos a class.
    let published = [
        "bedroom",
        "CALsuburb",
        "industrial",
        "kitchen",
        "livingroom",
        "MITcoast",
        "MITforest",
        "MIThighway",
        "MITinsidecity",
        "MITmountain",
        "MITopencountry",
        "MITstreet",
        "MITtallbuilding",
        "PARoffice",
        "store",
    ];
    let from = d.join("scene_categories");
    for class in published {
        std::fs::create_dir_all(from.join(class)).expect("mkdir");
        for i in 1..=2 {
            std::fs::copy(&photo, from.join(class).join(format!("image_000{i}.jpg")))
                .expect("copy");
        }
    }
    let out = d.join("scene15");
    let text = ok(&["datasets", "scene15", "--from", s(&from), "--out", s(&out)]);
    assert!(text.contains("30 photos of 15 classes"), "{text}");
    assert!(text.contains("Coast: 2 photos, 360 published"), "{text}");
    let rows = csv_rows(&out.join("labels.csv"));
    assert_eq!(rows.len(), 30);
    for want in [
        ["Coast/image_0001.jpg", "Coast", "rural", "flat"],
        ["Mountain/image_0002.jpg", "Mountain", "rural", "hilly"],
        ["Suburb/image_0001.jpg", "Suburb", "urban", ""],
        ["Office/image_0001.jpg", "Office", "", ""],
    ] {
        assert!(rows.iter().any(|r| r == &want), "{want:?} in {rows:?}");
    }
    assert!(out.join("LivingRoom/image_0002.jpg").is_file());
    // What is wrong is said: a class missing, a folder that is no class, an output in use.
    std::fs::remove_dir_all(from.join("PARoffice")).expect("rm");
    let err = fails(&[
        "datasets",
        "scene15",
        "--from",
        s(&from),
        "--out",
        s(&d.join("a")),
    ]);
    assert!(err.contains("no photos of Office"), "{err}");
    std::fs::create_dir(from.join("PARoffice")).expect("mkdir");
    std::fs::create_dir(from.join("Garden")).expect("mkdir");
    let err = fails(&[
        "datasets",
        "scene15",
        "--from",
        s(&from),
        "--out",
        s(&d.join("b")),
    ]);
    assert!(err.contains("\"Garden\" is not a 15-Scene class"), "{err}");
    let err = fails(&["datasets", "scene15", "--from", s(&from), "--out", s(&out)]);
    assert!(err.contains("already holds files"), "{err}");
    assert!(!d.join("a").exists() && !d.join("b").exists());
}

#[test]
fn config_check_takes_the_photos_run_would_be_given() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 12, 7);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let out = ok(&["config", "check", config, "--dataset", s(&photos)]);
    assert!(
        out.contains(&format!("photos in {}", s(&photos))) && out.contains("48 photos, 24 train"),
        "{out}"
    );
    let labels = dir.path().join("some.csv");
    let text = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    let some: Vec<&str> = text.lines().take(1 + 40).collect();
    std::fs::write(&labels, some.join("\n") + "\n").expect("write");
    let out = ok(&[
        "config",
        "check",
        config,
        "--dataset",
        s(&photos),
        "--labels",
        s(&labels),
    ]);
    assert!(out.contains("40 photos"), "{out}");
    let err = fails(&[
        "config",
        "check",
        config,
        "--dataset",
        s(&dir.path().join("none")),
    ]);
    assert!(err.contains("none does not exist"), "{err}");
}

#[test]
fn config_show_fills_in_the_defaults_the_labels_decide() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n").expect("write");
    let shown = ok(&["config", "show", s(&config)]);
    assert!(
        shown.contains("attributes = [\n    \"kind\",\n    \"urbanicity\",\n    \"elevation\",\n]")
            && shown.contains("split_by = \"kind\"")
            && shown.contains("from the synthetic set's labels.csv"),
        "{shown}"
    );
    // Photos not at hand: said so, the rest shown.
    std::fs::write(
        &config,
        "[dataset]\npath = \"nowhere\"\n[kmeans]\nk = [4]\n",
    )
    .expect("write");
    let shown = ok(&["config", "show", s(&config)]);
    assert!(
        shown.contains("the photos are not here") && shown.contains("[kmeans]"),
        "{shown}"
    );
}
