//! Descriptors made elsewhere (`--from`, `[features] from`): a file of rows x, y, size, values
//! per photo, through the sample, k-means or a mixture, every encoding, the models, `classify`
//! and `vocab run`.

use std::path::{Path, PathBuf};

use crate::util::*;

/// Values per descriptor of the stand-in.
const DIMS: usize = 12;

/// `dir/desc`: for every photo of `photos` (its labels), a file of 40 keypoints inside the photo
/// whose 12 values sit near a point of the photo's kind (so the kinds can be told apart),
/// `.csv` with a header for even photos and `.npy` (float32) for odd ones.
fn descriptors(dir: &Path, photos: &Path) -> PathBuf {
    let desc = dir.join("desc");
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    for (i, line) in labels.lines().skip(1).enumerate() {
        let mut fields = line.split(',');
        let (path, kind) = (fields.next().expect("path"), fields.next().expect("kind"));
        let kinds = ["city", "field", "hilltown", "mountain"];
        let which = kinds.iter().position(|k| *k == kind).expect("a kind");
        let (w, h) = image::image_dimensions(photos.join(path)).expect("size");
        let mut rows: Vec<Vec<f32>> = Vec::new();
        for r in 0..40u32 {
            let noise = |j: usize| ((r as usize * 31 + j * 17 + i * 7) % 13) as f32 / 40.0;
            let mut row = vec![(r * 7 % w) as f32, (r * 11 % h) as f32, 16.0];
            row.extend((0..DIMS).map(|j| f32::from(u8::from(j % 4 == which)) + noise(j)));
            rows.push(row);
        }
        let file = desc.join(path);
        std::fs::create_dir_all(file.parent().expect("folder")).expect("folder");
        if i % 2 == 0 {
            let text: String = rows
                .iter()
                .map(|r| r.iter().map(f32::to_string).collect::<Vec<_>>().join(",") + "\n")
                .collect();
            let names: Vec<String> = (1..=DIMS).map(|j| format!("d{j}")).collect();
            let header = format!("x,y,size,{}\n", names.join(","));
            std::fs::write(file.with_extension("csv"), header + &text).expect("csv");
        } else {
            write_npy(&file.with_extension("npy"), &rows);
        }
    }
    desc
}

/// A 2-D float32 `.npy` of `rows`.
fn write_npy(path: &Path, rows: &[Vec<f32>]) {
    let cols = rows[0].len();
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {cols}), }}",
        rows.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for v in rows.iter().flatten() {
        bytes.extend(v.to_le_bytes());
    }
    std::fs::write(path, bytes).expect("npy");
}

#[test]
fn descriptors_made_elsewhere_go_through_every_stage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let desc = descriptors(dir.path(), &photos);
    let path = |name: &str| dir.path().join(name);
    let said = ok(&[
        "features",
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--per-image",
        "10",
        "--out",
        s(&path("s.bin")),
    ]);
    let skipped = std::fs::read_to_string(path("s.bin.skipped.csv")).unwrap_or_default();
    assert!(
        said.contains("8 photos, 0 skipped, 80 descriptors of 12 values"),
        "{said}{skipped}"
    );
    ok(&[
        "kmeans",
        "--features",
        s(&path("s.bin")),
        "--k",
        "4",
        "--out",
        s(&path("v.bin")),
    ]);
    let labels = photos.join("labels.csv");
    // Bag of words, soft, VLAD: each scores the kinds, which the descriptors tell apart.
    for (name, more) in [
        ("h.bin", &[][..]),
        ("soft.bin", &["--soft", "2", "--pyramid", "2"][..]),
        ("vlad.bin", &["--method", "vlad"][..]),
    ] {
        let (words, out) = (path("v.bin"), path(name));
        let mut args = vec!["encode", "--vocabulary", s(&words), "--input", s(&photos)];
        args.extend(["--from", s(&desc), "--out", s(&out)]);
        args.extend(more);
        let said = ok(&args);
        assert!(said.contains("8 photos, 0 skipped, 320 patches"), "{said}");
    }
    // Descriptors made elsewhere are taken as they are: no patch side, sampled or encoded.
    let err = fails(&[
        "features",
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--patch",
        "24",
        "--out",
        s(&path("p.bin")),
    ]);
    assert!(
        err.contains("--patch 24: descriptors made elsewhere"),
        "{err}"
    );
    let (words, out) = (path("v.bin"), path("p.bin"));
    let mut args = vec!["encode", "--vocabulary", s(&words), "--input", s(&photos)];
    args.extend(["--from", s(&desc), "--patch", "24", "--out", s(&out)]);
    let err = fails(&args);
    assert!(
        err.contains("no mirror images, max_side, patch, scales"),
        "{err}"
    );
    let said = ok(&[
        "train",
        "--histograms",
        s(&path("h.bin")),
        "--labels",
        s(&labels),
        "--attribute",
        "kind",
        "--cv",
        "2",
        "--out",
        s(&path("m.json")),
    ]);
    assert!(said.contains("train: \"kind\""), "{said}");
    // A mixture of the same descriptors, and Fisher vectors over it.
    ok(&[
        "mixture",
        "--features",
        s(&path("s.bin")),
        "--components",
        "2",
        "--pca-dims",
        "4",
        "--out",
        s(&path("g.json")),
    ]);
    ok(&[
        "encode",
        "--vocabulary",
        s(&path("g.json")),
        "--method",
        "fisher",
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--out",
        s(&path("f.bin")),
    ]);
    // New photos are scored from their own descriptors; without them, said so.
    let err = fails(&[
        "classify",
        "--model",
        s(&path("m.json")),
        "--input",
        s(&photos),
        "--out",
        s(&path("l.csv")),
    ]);
    assert!(
        err.contains("give the photos' own with --from DIR"),
        "{err}"
    );
    ok(&[
        "classify",
        "--model",
        s(&path("m.json")),
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--out",
        s(&path("l.csv")),
    ]);
    let rows = csv_rows(&path("l.csv"));
    let right = rows
        .iter()
        .filter(|r| r[1].starts_with(&format!("{}/", r[2])))
        .count();
    assert!(right >= 7, "{rows:?}");
    // HOG words for descriptors made elsewhere: refused, naming both.
    let hog = sample_of(dir.path(), &photos);
    ok(&[
        "kmeans",
        "--features",
        s(&hog),
        "--k",
        "4",
        "--out",
        s(&path("hog.bin")),
    ]);
    let err = fails(&[
        "encode",
        "--vocabulary",
        s(&path("hog.bin")),
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--out",
        s(&path("x.bin")),
    ]);
    assert!(
        err.contains("words of 512 dims") && err.contains("made elsewhere have 12"),
        "{err}"
    );
    // The record says where the descriptors came from, whatever their dimension: a HOG
    // model is refused descriptors made elsewhere, a model of those is refused HOG.
    let (hh, hm) = (path("hh.bin"), path("hm.json"));
    ok(&[
        "encode",
        "--vocabulary",
        s(&path("hog.bin")),
        "--input",
        s(&photos),
        "--out",
        s(&hh),
    ]);
    ok(&[
        "train",
        "--histograms",
        s(&hh),
        "--labels",
        s(&labels),
        "--attribute",
        "kind",
        "--cv",
        "2",
        "--out",
        s(&hm),
    ]);
    let err = fails(&[
        "classify",
        "--model",
        s(&hm),
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--out",
        s(&path("l2.csv")),
    ]);
    assert!(err.contains("trained on HOG patches"), "{err}");
    let record = std::fs::read_to_string(path("h.bin.encoding.json")).expect("record");
    assert!(
        record.contains("\"foreign\": true") && record.contains("\"dims\": 12"),
        "{record}"
    );
    // Nothing of vocab's own description applies to them.
    let err = fails(&[
        "encode",
        "--vocabulary",
        s(&path("v.bin")),
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--mirror",
        "--out",
        s(&path("mm.bin")),
    ]);
    assert!(err.contains("no mirror images"), "{err}");
}

#[test]
fn a_photo_without_its_file_is_skipped_and_a_run_takes_them_from_its_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let desc = descriptors(dir.path(), &photos);
    // One photo's file gone: skipped, with the reason.
    let gone = std::fs::read_dir(desc.join("city"))
        .expect("city")
        .next()
        .expect("a file");
    std::fs::remove_file(gone.expect("entry").path()).expect("remove");
    let out = dir.path().join("s.bin");
    let said = ok(&[
        "features",
        "--input",
        s(&photos),
        "--from",
        s(&desc),
        "--out",
        s(&out),
    ]);
    assert!(said.contains("7 photos, 1 skipped"), "{said}");
    let skipped = csv_rows(&dir.path().join("s.bin.skipped.csv"));
    assert!(skipped[0][2].contains("no descriptor file"), "{skipped:?}");

    let config = small_config(dir.path(), &photos);
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text.replace("[features]\n", "[features]\nfrom = \"desc\"\n");
    std::fs::write(&config, &text).expect("config");
    let work = dir.path().join("work");
    let said = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(said.contains("descriptors of 12 values"), "{said}");
    assert!(work.join("report").join("accuracy.csv").is_file());
    // The same files through another spelling of the config's path: every step cached.
    let spelt = dir.path().join(".").join("c.toml");
    let again = ok(&["run", s(&spelt), "--work", s(&work)]);
    assert!(again.contains("== features sample: cached"), "{again}");
    // One file changed: the sample, and all that follows, made again.
    let file = desc.join("field").join("field_000.csv");
    let text_of = std::fs::read_to_string(&file).expect("csv");
    std::fs::write(&file, text_of.replacen("16,", "24,", 1)).expect("csv");
    let changed = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(changed.contains("== features sample\n"), "{changed}");
    // On 2 loopback nodes (the sample born there as partitions, k-means and the encodings
    // there): the one-process run's accuracies, to the digit.
    let here = std::fs::read(work.join("report").join("accuracy.csv")).expect("accuracy");
    std::fs::write(&config, text.replace("nodes = 0", "nodes = 2")).expect("config");
    let nodes = dir.path().join("nodes-work");
    let said = ok(&["run", s(&config), "--work", s(&nodes)]);
    assert!(said.contains("kept at the nodes as"), "{said}");
    let there = std::fs::read(nodes.join("report").join("accuracy.csv")).expect("accuracy");
    assert!(here == there, "{said}");
    // The nodes' vocabulary is the one-process step's (keys say what, never where).
    let step = step_dir(&nodes, "kmeans");
    let name = step.file_name().expect("a step");
    let vocabulary = |dir: &Path| std::fs::read(dir.join("vocabulary.bin")).expect("vocabulary");
    assert!(
        vocabulary(&step) == vocabulary(&work.join("kmeans").join(name)),
        "{said}"
    );
}

#[test]
fn descriptors_on_loopback_workers_give_the_one_process_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    descriptors(dir.path(), &photos);
    // One photo without its file, one with a keypoint outside the photo: skipped alike, the
    // reasons naming the files as they lie in the folder, however its path is spelt (the nodes
    // are given it made absolute).
    let desc = dir.path().join(".").join("desc");
    std::fs::remove_file(desc.join("city/city_000.csv")).expect("remove");
    let bad = desc.join("field/field_000.csv");
    let text = std::fs::read_to_string(&bad).expect("csv");
    std::fs::write(&bad, text.replacen("\n0,0,16,", "\n99999,0,16,", 1)).expect("csv");
    let path = |name: &str| dir.path().join(name);
    // Runs `args` writing `--out <name>` here and on 2 loopback workers: the same bytes.
    let both = |args: &[&str], name: &str, beside: &[&str]| -> String {
        let (one, two) = (path(&format!("one-{name}")), path(&format!("two-{name}")));
        ok(&[args, &["--out", s(&one)]].concat());
        let said = ok(&[args, &["--out", s(&two), "--local-nodes", "2"]].concat());
        assert!(said.contains("(2 nodes)"), "{said}");
        for suffix in [&[""][..], beside].concat() {
            let read = |p: &Path| std::fs::read(format!("{}{suffix}", p.display())).expect("read");
            assert!(
                read(&one) == read(&two),
                "{name}{suffix} differs on nodes: {said}"
            );
        }
        said
    };
    let from = ["--input", s(&photos), "--from", s(&desc)];
    let said = both(
        &[&["features"][..], &from, &["--per-image", "10"]].concat(),
        "s.bin",
        &[".images.csv", ".skipped.csv"],
    );
    assert!(
        said.contains("6 photos, 2 skipped, 60 descriptors of 12 values"),
        "{said}"
    );
    let skipped = std::fs::read_to_string(path("two-s.bin.skipped.csv")).expect("skipped");
    assert!(
        skipped.contains("field/field_000.csv: keypoint 1 at (99999, 0)"),
        "{skipped}"
    );
    assert!(!skipped.contains(s(dir.path())), "{skipped}");
    let (sample, vocabulary) = (path("one-s.bin"), path("v.bin"));
    ok(&[
        "kmeans",
        "--features",
        s(&sample),
        "--k",
        "4",
        "--out",
        s(&vocabulary),
    ]);
    let words = ["--vocabulary", s(&vocabulary)];
    let manifests = [".images.csv", ".skipped.csv"];
    both(
        &[&["encode"][..], &from, &words].concat(),
        "h.bin",
        &manifests,
    );
    let mixture = path("g.json");
    let components = ["--components", "2", "--pca-dims", "4"];
    ok(&[
        &["mixture", "--features", s(&sample)][..],
        &components,
        &["--out", s(&mixture)],
    ]
    .concat());
    let fisher = [
        "--vocabulary",
        s(&mixture),
        "--method",
        "fisher",
        "--pyramid",
        "2",
    ];
    both(
        &[&["encode"][..], &from, &fisher].concat(),
        "f.bin",
        &manifests,
    );
    // A folder that is not there is named.
    let gone = path("gone");
    let err = fails(
        &[
            &["features", "--input", s(&photos), "--from", s(&gone)][..],
            &["--out", s(&path("x.bin")), "--local-nodes", "2"],
        ]
        .concat(),
    );
    assert!(err.contains("gone"), "{err}");
}

#[test]
fn partitions_of_descriptors_lost_with_a_node_are_made_again_from_their_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    descriptors(dir.path(), &photos);
    let config = small_config(dir.path(), &photos);
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text
        .replace("[features]\n", "[features]\nfrom = \"desc\"\n")
        .replace(
            "parts = 2",
            "parts = 5\nat = \"nodes\"\nfolder = \"nodes/{node}\"",
        );
    std::fs::write(&config, &text).expect("config");
    let here = dir.path().join("here");
    ok(&["run", s(&config), "--work", s(&here)]);
    // Worker w1 ends in k-means, taking its partitions: the next team samples their photos'
    // files again, and the run is the one-process run.
    let lost = dir.path().join("lost");
    let said = run_losing_w1_in_kmeans(dir.path(), &config, &lost);
    let accuracy = |work: &Path| std::fs::read(work.join("report/accuracy.csv")).expect("read");
    assert!(accuracy(&here) == accuracy(&lost), "{said}");
    let vocabulary = |work: &Path| {
        let step = step_dir(work, "kmeans");
        std::fs::read(step.join("vocabulary.bin")).expect("vocabulary")
    };
    assert!(vocabulary(&here) == vocabulary(&lost), "{said}");
}

#[test]
fn a_test_folder_is_scored_from_its_own_descriptors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    descriptors(dir.path(), &photos);
    let held = dir.path().join("t");
    let test = photo_set_of(&held, 2, 11);
    descriptors(&held, &test);
    let config = small_config(dir.path(), &photos);
    let text = std::fs::read_to_string(&config).expect("config");
    let text = text
        .replace("[features]\n", "[features]\nfrom = \"desc\"\n")
        .replace(
            "[dataset]\n",
            "[dataset]\ntest = \"t/photos\"\ntest_from = \"t/desc\"\n",
        );
    std::fs::write(&config, &text).expect("config");
    let work = dir.path().join("work");
    let said = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(said.contains("== encode k4-test\n"), "{said}");
    assert!(said.contains("on 8 test photos"), "{said}");
    // The test photos' files are read: one gone is skipped, with the reason.
    std::fs::remove_file(held.join("desc/city/city_000.csv")).expect("remove");
    let again = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(again.contains("== encode k4-test\n"), "{again}");
    assert!(!again.contains("== features sample\n"), "{again}");
    // (The test photos' encode step of this run: its key holds their files.)
    let skipped: Vec<Vec<String>> = std::fs::read_dir(work.join("encode"))
        .expect("encode steps")
        .flatten()
        .map(|e| e.path().join("histograms.bin.skipped.csv"))
        .filter(|p| p.is_file() && p.to_string_lossy().contains("-test-"))
        .flat_map(|p| csv_rows(&p))
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0][2].contains("no descriptor file (city/city_000"),
        "{skipped:?}"
    );
    // Descriptors made elsewhere for one folder, HOG for the other: refused, saying which.
    let without = text.replace("test_from = \"t/desc\"\n", "");
    std::fs::write(&config, &without).expect("config");
    let err = fails(&["config", "check", s(&config)]);
    assert!(
        err.contains("need theirs too") && err.contains("--test-from"),
        "{err}"
    );
    std::fs::write(&config, text.replace("from = \"desc\"\n", "")).expect("config");
    let err = fails(&["config", "check", s(&config)]);
    assert!(err.contains("with HOG"), "{err}");
    let untested = text.replace("test = \"t/photos\"\ntest_from = \"t/desc\"\n", "");
    std::fs::write(&config, untested).expect("config");
    let err = fails(&["run", s(&config), "--test-from", s(&held)]);
    assert!(err.contains("give --test DIR too"), "{err}");
}
