//! `vocab datasets`: data sets made from photos on disk.

use crate::util::*;

#[test]
fn datasets_scene15_makes_the_unpacked_folders_a_dataset_or_says_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (from, _) = unpacked(d, 2);
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

#[test]
fn datasets_scene15_copies_only_what_lies_inside_and_labels_every_photo_once() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (from, photo) = unpacked(d, 1);
    // A link out of --from: a file from elsewhere is never copied as a photo.
    let elsewhere = d.join("elsewhere.jpg");
    std::fs::copy(&photo, &elsewhere).expect("copy");
    let link = from.join("kitchen").join("image_0002.jpg");
    std::os::unix::fs::symlink(&elsewhere, &link).expect("symlink");
    let err = fails(&[
        "datasets",
        "scene15",
        "--from",
        s(&from),
        "--out",
        s(&d.join("a")),
    ]);
    assert!(
        err.contains("image_0002.jpg") && err.contains("leads out of the folder given"),
        "{err}"
    );
    std::fs::remove_file(&link).expect("rm");
    // A link inside --from is a photo like any other, under its own name.
    std::os::unix::fs::symlink(from.join("store/image_0001.jpg"), &link).expect("symlink");
    let out = d.join("inside");
    ok(&["datasets", "scene15", "--from", s(&from), "--out", s(&out)]);
    assert!(out.join("Kitchen/image_0002.jpg").is_file());
    std::fs::remove_file(&link).expect("rm");
    // A class folder that is another class's folder: the same photos labelled twice.
    std::fs::remove_dir_all(from.join("store")).expect("rm");
    std::os::unix::fs::symlink(from.join("kitchen"), from.join("store")).expect("symlink");
    let err = fails(&[
        "datasets",
        "scene15",
        "--from",
        s(&from),
        "--out",
        s(&d.join("b")),
    ]);
    assert!(err.contains("store") && err.contains("kitchen"), "{err}");
    std::fs::remove_file(from.join("store")).expect("rm");
    std::fs::create_dir(from.join("store")).expect("mkdir");
    std::fs::copy(&photo, from.join("store/image_0001.jpg")).expect("copy");
    // A name that is not UTF-8 would be labelled as no file.
    let bad = from
        .join("kitchen")
        .join(std::ffi::OsStr::from_bytes(b"image_\xff.jpg"));
    std::fs::copy(&photo, &bad).expect("copy");
    let err = fails(&[
        "datasets",
        "scene15",
        "--from",
        s(&from),
        "--out",
        s(&d.join("c")),
    ]);
    assert!(err.contains("not named in UTF-8"), "{err}");
    for made in ["a", "b", "c"] {
        assert!(!d.join(made).exists(), "{made} was made");
    }
}

/// `d/scene_categories` as the published set unpacks, `per_class` copies of one photo a class
/// (`image_0001.jpg`, ...), and that photo.
fn unpacked(d: &std::path::Path, per_class: usize) -> (std::path::PathBuf, std::path::PathBuf) {
    let photo = photo_set(d).join("city/city_000.jpg");
    let from = d.join("scene_categories");
    for class in CLASS_FOLDERS {
        std::fs::create_dir_all(from.join(class)).expect("mkdir");
        for i in 1..=per_class {
            std::fs::copy(&photo, from.join(class).join(format!("image_000{i}.jpg")))
                .expect("copy");
        }
    }
    (from, photo)
}

/// The 15 classes' folders as the published set spells them.
const CLASS_FOLDERS: [&str; 15] = [
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

#[test]
fn config_check_refuses_test_labels_that_lead_out_of_the_test_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set(d);
    let test = d.join("test");
    copy_tree(&photos, &test);
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    let mut lines: Vec<String> = labels.lines().map(str::to_string).collect();
    lines[1] = format!("../photos/{}", lines[1]);
    std::fs::write(test.join("labels.csv"), lines.join("\n") + "\n").expect("write");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = {:?}\ntest = {:?}\n\n[kmeans]\nk = [4]\n\n[classify]\nsplit_by = \"kind\"\n",
            s(&photos),
            s(&test)
        ),
    )
    .expect("config");
    let err = fails(&["config", "check", s(&config)]);
    assert!(
        err.contains("../photos/") && err.contains("must be relative to the input folder"),
        "{err}"
    );
}
