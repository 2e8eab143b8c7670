//! The `vocab` binary, run for real in temporary folders.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use image::{DynamicImage, ImageBuffer, ImageFormat, Luma, LumaA, RgbImage};

fn vocab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .arg("--quiet")
        .output()
        .expect("vocab runs")
}

fn ok(args: &[&str]) -> String {
    let out = vocab(args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "vocab {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout.into_owned()
}

fn fails(args: &[&str]) -> String {
    let out = vocab(args);
    assert!(!out.status.success(), "vocab {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A folder with the synthetic photo set (2 per kind = 8 photos).
fn photo_set(dir: &Path) -> PathBuf {
    let photos = dir.join("photos");
    ok(&[
        "datasets",
        "photos",
        "--out",
        s(&photos),
        "--per-kind",
        "2",
        "--seed",
        "3",
    ]);
    photos
}

fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let mut reader =
        csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    reader
        .records()
        .map(|r| r.expect("csv row").iter().map(str::to_string).collect())
        .collect()
}

/// Reads a binary feature file's header count by converting it to text and counting lines.
fn text_lines(features: &Path, dir: &Path) -> Vec<String> {
    let txt = dir.join(format!(
        "{}.txt",
        features.file_name().expect("name").to_string_lossy()
    ));
    ok(&[
        "convert",
        "--input",
        s(features),
        "--out",
        s(&txt),
        "--format",
        "text",
    ]);
    std::fs::read_to_string(&txt)
        .expect("text")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn random_features_are_reproducible_and_seeded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let (a, b, c) = (
        dir.path().join("a.bin"),
        dir.path().join("b.bin"),
        dir.path().join("c.bin"),
    );
    let summary = ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&a),
        "--seed",
        "9",
    ]);
    assert!(
        summary.contains("8 photos described, 0 skipped, 40 patches"),
        "{summary}"
    );
    ok(&[
        "--threads",
        "1",
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&b),
        "--seed",
        "9",
    ]);
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&c),
        "--seed",
        "10",
    ]);
    let read = |p: &Path| std::fs::read(p).expect("read");
    assert_eq!(
        read(&a),
        read(&b),
        "same seed, different thread count: same bytes"
    );
    assert_ne!(read(&a), read(&c), "another seed moves the patches");
    let lines = text_lines(&a, dir.path());
    assert_eq!(lines.len(), 40);
    let fields: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(fields.len(), 3 + 512, "picture_id row col + 512 values");
    let manifest = csv_rows(&dir.path().join("a.bin.images.csv"));
    assert_eq!(manifest.len(), 8);
    assert_eq!(manifest[0][0], "0");
    assert_eq!(manifest[0][1], "city/city_000.jpg");
}

#[test]
fn dense_features_cover_the_grid() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = dir.path().join("p");
    std::fs::create_dir(&photos).expect("mkdir");
    RgbImage::from_fn(100, 64, |x, y| {
        image::Rgb([(x * 2) as u8, (y * 3) as u8, ((x ^ y) * 5) as u8])
    })
    .save(photos.join("one.png"))
    .expect("save");
    for (stride, expected) in [("8", 8 * 4), ("12", 3 * 6), ("16", 4 * 2)] {
        let out = dir.path().join(format!("d{stride}.txt"));
        ok(&[
            "features",
            "--input",
            s(&photos),
            "--out",
            s(&out),
            "--mode",
            "dense",
            "--stride",
            stride,
        ]);
        // rows 0..=24 and cols 0..=60 in steps of the stride
        let text = std::fs::read_to_string(&out).expect("text output (from .txt extension)");
        assert_eq!(text.lines().count(), expected, "stride {stride}");
    }
}

/// Inserts an EXIF APP1 segment with the given orientation right after a JPEG's SOI marker.
fn with_exif_orientation(jpeg: &[u8], orientation: u16) -> Vec<u8> {
    let mut tiff = Vec::new();
    tiff.extend_from_slice(b"II*\0");
    tiff.extend_from_slice(&8u32.to_le_bytes());
    tiff.extend_from_slice(&1u16.to_le_bytes()); // one IFD entry
    tiff.extend_from_slice(&0x0112u16.to_le_bytes()); // Orientation
    tiff.extend_from_slice(&3u16.to_le_bytes()); // SHORT
    tiff.extend_from_slice(&1u32.to_le_bytes());
    tiff.extend_from_slice(&orientation.to_le_bytes());
    tiff.extend_from_slice(&[0, 0]);
    tiff.extend_from_slice(&0u32.to_le_bytes()); // no next IFD
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&tiff);
    let mut out = jpeg[..2].to_vec();
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&((app1.len() + 2) as u16).to_be_bytes());
    out.extend_from_slice(&app1);
    out.extend_from_slice(&jpeg[2..]);
    out
}

#[test]
fn pixel_formats_orientation_and_downscale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = dir.path().join("p");
    std::fs::create_dir_all(photos.join("sub")).expect("mkdir");
    let rgb = RgbImage::from_fn(120, 60, |x, y| {
        image::Rgb([(x * 2) as u8, (y * 4) as u8, 90])
    });
    let mut jpeg = std::io::Cursor::new(Vec::new());
    DynamicImage::ImageRgb8(rgb.clone())
        .write_to(&mut jpeg, ImageFormat::Jpeg)
        .expect("jpeg");
    std::fs::write(
        photos.join("a_rotated.jpg"),
        with_exif_orientation(jpeg.get_ref(), 6),
    )
    .expect("write");
    ImageBuffer::<Luma<u16>, _>::from_fn(64, 50, |x, y| Luma([(x * 900 + y * 300) as u16]))
        .save(photos.join("b_gray16.png"))
        .expect("gray16");
    ImageBuffer::<LumaA<u8>, _>::from_fn(48, 48, |x, y| LumaA([(x * 5) as u8, (y * 5) as u8]))
        .save(photos.join("c_gray_alpha.png"))
        .expect("gray+alpha");
    DynamicImage::ImageRgb8(rgb.clone())
        .save_with_format(photos.join("sub/d.tiff"), ImageFormat::Tiff)
        .expect("tiff");
    DynamicImage::ImageRgb8(rgb.clone())
        .save_with_format(photos.join("sub/e.bmp"), ImageFormat::Bmp)
        .expect("bmp");
    DynamicImage::ImageRgba8(DynamicImage::ImageRgb8(rgb).to_rgba8())
        .save_with_format(photos.join("sub/f.webp"), ImageFormat::WebP)
        .expect("webp");
    let out = dir.path().join("f.bin");
    let summary = ok(&["features", "--input", s(&photos), "--out", s(&out)]);
    assert!(
        summary.contains("6 photos described, 0 skipped"),
        "{summary}"
    );
    let manifest = csv_rows(&dir.path().join("f.bin.images.csv"));
    let size = |name: &str| {
        let row = manifest
            .iter()
            .find(|r| r[1] == name)
            .unwrap_or_else(|| panic!("{name} in manifest"));
        (row[2].clone(), row[3].clone())
    };
    assert_eq!(
        size("a_rotated.jpg"),
        ("60".into(), "120".into()),
        "EXIF orientation 6 rotates"
    );
    assert_eq!(size("b_gray16.png"), ("64".into(), "50".into()));
    assert_eq!(size("sub/f.webp"), ("120".into(), "60".into()));
    // Downscale: the longer side becomes 80 (120x60 -> 80x40, 60x120 -> 40x80, 64x50 -> 64x50).
    let small = dir.path().join("small.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&small),
        "--max-side",
        "80",
    ]);
    let manifest = csv_rows(&dir.path().join("small.bin.images.csv"));
    let row = manifest
        .iter()
        .find(|r| r[1] == "sub/d.tiff")
        .expect("tiff row");
    assert_eq!((row[2].as_str(), row[3].as_str()), ("80", "40"));
    let row = manifest
        .iter()
        .find(|r| r[1] == "a_rotated.jpg")
        .expect("jpeg row");
    assert_eq!((row[2].as_str(), row[3].as_str()), ("40", "80"));
}

#[test]
fn bad_photos_are_skipped_with_reasons_and_the_run_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let good = std::fs::read(photos.join("city/city_000.jpg")).expect("jpeg");
    std::fs::write(photos.join("truncated.jpg"), &good[..good.len() / 3]).expect("write");
    std::fs::write(photos.join("empty.png"), b"").expect("write");
    let png = std::fs::read(photos.join("city/city_001.png")).expect("png");
    std::fs::write(photos.join("truncated.png"), &png[..png.len() / 2]).expect("write");
    std::fs::write(
        photos.join("garbage.png"),
        b"this is not a png at all, not even close",
    )
    .expect("write");
    let mut corrupt = good.clone();
    for b in corrupt.iter_mut().skip(200).step_by(7) {
        *b = 0xFF;
    }
    std::fs::write(photos.join("corrupt.jpg"), &corrupt).expect("write");
    RgbImage::new(39, 200)
        .save(photos.join("tiny.png"))
        .expect("tiny");
    std::fs::write(photos.join("notes.txt"), b"not a photo, ignored").expect("write");
    let out = dir.path().join("f.bin");
    let summary = ok(&["features", "--input", s(&photos), "--out", s(&out)]);
    let skipped = csv_rows(&dir.path().join("f.bin.skipped.csv"));
    let reason = |name: &str| {
        skipped
            .iter()
            .find(|r| r[1] == name)
            .map(|r| r[2].clone())
            .unwrap_or_else(|| panic!("{name} not listed: {skipped:?}"))
    };
    assert!(reason("empty.png").contains("empty file"));
    assert!(
        reason("garbage.png").contains("cannot decode"),
        "{}",
        reason("garbage.png")
    );
    assert!(reason("tiny.png").contains("too small: 39x200"));
    assert!(
        reason("truncated.jpg").contains("cannot decode"),
        "{}",
        reason("truncated.jpg")
    );
    // A corrupted JPEG body may still decode to (damaged) pixels; if so it is described, otherwise
    // listed. Either way it is accounted for, never silently dropped.
    let described = csv_rows(&dir.path().join("f.bin.images.csv"));
    let corrupt_seen = skipped
        .iter()
        .chain(&described)
        .filter(|r| r[1] == "corrupt.jpg")
        .count();
    assert_eq!(corrupt_seen, 1);
    assert_eq!(
        described.len() + skipped.len(),
        8 + 6,
        "every photo file accounted for"
    );
    assert!(
        summary.contains(&format!("{} skipped", skipped.len())),
        "{summary}"
    );
    // Picture ids are positions in sorted path order, whatever was skipped.
    let mut all: Vec<_> = described
        .iter()
        .chain(&skipped)
        .map(|r| (r[0].parse::<u32>().expect("id"), r[1].clone()))
        .collect();
    all.sort();
    let mut paths: Vec<_> = all.iter().map(|(_, p)| p.clone()).collect();
    paths.sort();
    assert_eq!(
        all.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(),
        paths
    );
    assert_eq!(all.last().map(|(id, _)| *id), Some(13));
}

#[test]
fn labels_restrict_the_collection_and_missing_files_are_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let labels = dir.path().join("subset.csv");
    std::fs::write(
        &labels,
        "path,kind\nfield/field_001.png,field\ncity/city_000.jpg,city\ngone.jpg,city\n",
    )
    .expect("labels");
    let out = dir.path().join("f.bin");
    let summary = ok(&[
        "features",
        "--input",
        s(&photos),
        "--labels",
        s(&labels),
        "--out",
        s(&out),
    ]);
    assert!(
        summary.contains("2 photos described, 1 skipped"),
        "{summary}"
    );
    let described = csv_rows(&dir.path().join("f.bin.images.csv"));
    assert_eq!(
        described.iter().map(|r| r[1].as_str()).collect::<Vec<_>>(),
        ["city/city_000.jpg", "field/field_001.png"]
    );
    let skipped = csv_rows(&dir.path().join("f.bin.skipped.csv"));
    assert_eq!(skipped[0][1], "gone.jpg");
    assert!(skipped[0][2].contains("unreadable"), "{:?}", skipped[0]);
}

#[test]
fn errors_name_the_input_at_fault() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let err = fails(&[
        "features",
        "--input",
        s(&missing),
        "--out",
        s(&dir.path().join("f.bin")),
    ]);
    assert!(
        err.contains("nope") && err.contains("does not exist"),
        "{err}"
    );

    let photos = photo_set(dir.path());
    let unwritable = dir.path().join("no/such/dir/f.bin");
    let err = fails(&["features", "--input", s(&photos), "--out", s(&unwritable)]);
    assert!(err.contains("no/such/dir/f.bin"), "{err}");

    let err = fails(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&dir.path().join("f.bin")),
        "--max-side",
        "20",
    ]);
    assert!(err.contains("--max-side 20"), "{err}");

    let bad = dir.path().join("bad.bin");
    std::fs::write(&bad, b"VOCABFEA\x01\x00\x01\x00garbage-header-bytes....").expect("write");
    let err = fails(&[
        "convert",
        "--input",
        s(&bad),
        "--out",
        s(&dir.path().join("x.txt")),
    ]);
    assert!(
        err.contains("bad.bin") && err.contains("header checksum"),
        "{err}"
    );
}

#[test]
fn an_existing_output_survives_a_failed_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("f.bin");
    std::fs::write(&out, b"precious").expect("write");
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "0 0 0 1 2\n1 0 0 oops 2\n").expect("write");
    let err = fails(&["convert", "--input", s(&bad), "--out", s(&out)]);
    assert!(err.contains("bad.txt: line 2"), "{err}");
    assert_eq!(std::fs::read(&out).expect("still there"), b"precious");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".vocab-partial")
        })
        .collect();
    assert!(leftovers.is_empty(), "temporary files removed");
}

/// Step folders of a work directory: `stage/label-key`, finished ones only.
fn steps(work: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for stage in std::fs::read_dir(work).expect("work dir") {
        let stage = stage.expect("entry").path();
        if !stage.is_dir() || stage.ends_with("report") {
            continue;
        }
        for step in std::fs::read_dir(&stage).expect("stage dir") {
            let name = step
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            let stage_name = stage
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            out.push(format!("{stage_name}/{name}"));
        }
    }
    out.sort();
    out
}

#[test]
fn quickstart_runs_end_to_end_caches_and_reruns_only_what_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let work = dir.path().join("work");
    let out = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(out.contains("report in"), "{out}");
    assert!(
        out.contains("on 2 workers"),
        "k-means runs on loopback workers:\n{out}"
    );
    let report = work.join("report");
    for f in [
        "report.md",
        "accuracy.csv",
        "accuracy.png",
        "kmeans.csv",
        "kmeans.png",
        "steps.csv",
    ] {
        assert!(report.join(f).is_file(), "{f} missing");
    }
    let accuracy = csv_rows(&report.join("accuracy.csv"));
    // 3 vocabulary sizes x 2 attributes, every accuracy a fraction.
    assert_eq!(accuracy.len(), 6);
    for row in &accuracy {
        let a: f64 = row[2].parse().expect("accuracy");
        assert!((0.0..=1.0).contains(&a), "{row:?}");
    }
    let first = steps(&work);
    assert_eq!(first.iter().filter(|s| s.starts_with("svm/")).count(), 6);
    assert!(first.iter().all(|s| !s.contains(".tmp-")), "{first:?}");

    // Nothing changed: every step is cached, and the accuracies are the same.
    let again = ok(&["run", s(&config), "--work", s(&work)]);
    let ran = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.ends_with(" ran"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(ran(&again), ["report"], "{again}");
    assert_eq!(csv_rows(&report.join("accuracy.csv")), accuracy);

    // A changed encoding re-runs encode and svm only.
    let changed = dir.path().join("changed.toml");
    std::fs::write(
        &changed,
        std::fs::read_to_string(&config)
            .expect("read")
            .replace("stride = 8", "stride = 16"),
    )
    .expect("write");
    let out = ok(&["run", s(&changed), "--work", s(&work)]);
    let stages = ran(&out);
    assert!(
        stages
            .iter()
            .all(|s| ["encode", "svm", "report"].contains(&s.as_str()))
            && stages.contains(&"encode".to_string()),
        "{out}"
    );

    // Config errors name the key and the line, and check/show work.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[dataset]\nsynthetic = { per_kind = 1 }\n\n[features]\nper_imag = 5\n",
    )
    .expect("write");
    let err = fails(&["run", s(&bad), "--work", s(&work)]);
    assert!(
        err.contains("bad.toml") && err.contains("per_imag") && err.contains("line 5"),
        "{err}"
    );
    assert!(fails(&["config", "check", s(&bad)]).contains("per_imag"));
    // Absurd patch counts are refused where settings are checked, before anything allocates.
    let text = std::fs::read_to_string(&config).expect("config");
    assert!(text.contains("per_image = 20"), "{text}");
    std::fs::write(
        &bad,
        text.replace("per_image = 20", "per_image = 9223372036854775807"),
    )
    .expect("write");
    let err = fails(&["config", "check", s(&bad)]);
    assert!(
        err.contains("per_image") && err.contains("at most"),
        "{err}"
    );
    let err = fails(&[
        "features",
        "--input",
        s(dir.path()),
        "--out",
        s(&dir.path().join("f.bin")),
        "--per-image",
        "100000000",
    ]);
    assert!(err.contains("--per-image 100000000"), "{err}");
    assert!(ok(&["config", "check", s(&config)]).contains(": ok"));
    let shown = ok(&["config", "show", s(&config)]);
    assert!(
        shown.contains("local_aggregation = true") && shown.contains("[encode]"),
        "{shown}"
    );
    let plan = ok(&["run", s(&config), "--plan"]);
    assert!(
        plan.contains("k = 128") && plan.contains("2 nodes"),
        "{plan}"
    );
}

#[test]
fn pruned_and_int8_configs_run_in_one_process_under_their_own_kmeans_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |name: &str, setting: &str| {
        let path = dir.path().join(format!("c-{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "[dataset]\nsynthetic = {{ per_kind = 4, seed = 3 }}\n[features]\nper_image = 20\n\
                 [kmeans]\nk = [12]\niterations = 6\ntol = 0\nnodes = 0\n{setting}\n\
                 [classify]\nattributes = [\"elevation\"]\ncv = 2\n"
            ),
        )
        .expect("config");
        path
    };
    let work = dir.path().join("w");
    ok(&[
        "run",
        s(&config("pruned", "prune = true")),
        "--work",
        s(&work),
    ]);
    ok(&[
        "run",
        s(&config("full", "prune = false")),
        "--work",
        s(&work),
    ]);
    ok(&[
        "run",
        s(&config("int8", "kernel = \"int8\"")),
        "--work",
        s(&work),
    ]);
    let kmeans: Vec<String> = steps(&work)
        .into_iter()
        .filter(|s| s.starts_with("kmeans/k12-"))
        .collect();
    assert_eq!(
        kmeans.len(),
        3,
        "pruned, full and int8 runs share a key: {kmeans:?}"
    );
    // Labels kept by the bounds (last column): some in the pruned run, none in the others.
    let mut kept: Vec<u64> = kmeans
        .iter()
        .map(|step| {
            let csv =
                std::fs::read_to_string(work.join(step).join("vocabulary.bin.iterations.csv"))
                    .expect("iterations");
            assert_eq!(csv.lines().count(), 7, "{step}: {csv}");
            csv.lines()
                .skip(1)
                .filter_map(|l| l.rsplit(',').next()?.parse::<u64>().ok())
                .sum()
        })
        .collect();
    kept.sort_unstable();
    assert!(
        kept[0] == 0 && kept[1] == 0 && kept[2] > 0,
        "kept per run: {kept:?}"
    );
}

#[test]
fn a_run_killed_in_kmeans_resumes_to_the_same_vocabulary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[dataset]\nsynthetic = { per_kind = 6, seed = 3 }\n[features]\nper_image = 30\n\
         [kmeans]\nk = [24]\niterations = 8\ntol = 0\nseed = 2\nnodes = 2\n\
         [classify]\nattributes = [\"elevation\"]\ncv = 2\n",
    )
    .expect("config");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    ok(&["run", s(&config), "--work", s(&a)]);
    let crashed = vocab(&[
        "run",
        s(&config),
        "--work",
        s(&b),
        "--exit-after-iteration",
        "3",
    ]);
    assert!(!crashed.status.success());
    assert!(
        steps(&b).iter().any(|s| s.starts_with("kmeans/.tmp-k24-")),
        "the interrupted step stays temporary: {:?}",
        steps(&b)
    );
    let out = ok(&["run", s(&config), "--work", s(&b)]);
    assert!(out.contains("resuming after iteration 3"), "{out}");
    let vocabulary = |w: &Path| {
        let step = steps(w)
            .into_iter()
            .find(|s| s.starts_with("kmeans/k24-"))
            .expect("kmeans step");
        std::fs::read(w.join(step).join("vocabulary.bin")).expect("vocabulary")
    };
    assert!(
        vocabulary(&a) == vocabulary(&b),
        "resumed vocabulary differs"
    );
}

#[test]
fn partition_then_kmeans_with_resume_equals_an_uninterrupted_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let features = dir.path().join("f.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "3000",
        "--dims",
        "24",
        "--clusters",
        "12",
        "--seed",
        "5",
        "--out",
        s(&features),
    ]);
    let parts = dir.path().join("parts");
    let out = ok(&[
        "partition",
        "--features",
        s(&features),
        "--parts",
        "5",
        "--out",
        s(&parts),
    ]);
    assert!(
        out.contains("3000 records x 24 dims (f32) into 5 partitions of 600..600"),
        "{out}"
    );

    let common = ["--k", "16", "--seed", "3", "--tol", "0", "--threads", "2"];
    let full = dir.path().join("full.bin");
    let mut args = vec![
        "kmeans",
        "--features",
        s(&parts),
        "--iterations",
        "6",
        "--out",
        s(&full),
    ];
    args.extend(common);
    let log = ok(&args);
    assert_eq!(
        log.lines().filter(|l| l.starts_with("iter ")).count(),
        6,
        "{log}"
    );
    assert!(log.contains("iter 6 inertia "), "{log}");

    // Stop after 3 iterations, then resume to 6 from the checkpoint.
    let half = dir.path().join("half.bin");
    let mut args = vec![
        "kmeans",
        "--features",
        s(&parts),
        "--iterations",
        "3",
        "--out",
        s(&half),
    ];
    args.extend(common);
    ok(&args);
    let mut args = vec![
        "kmeans",
        "--features",
        s(&parts),
        "--iterations",
        "6",
        "--resume",
        "--out",
        s(&half),
    ];
    args.extend(common);
    let log = ok(&args);
    assert!(log.contains("resuming after iteration 3"), "{log}");
    assert!(!log.contains("iter 3 ") && log.contains("iter 4 "), "{log}");
    assert_eq!(
        std::fs::read(&full).expect("full"),
        std::fs::read(&half).expect("resumed")
    );
    let rows = csv_rows(&dir.path().join("half.bin.iterations.csv"));
    assert_eq!(rows.len(), 6);
    let meta = std::fs::read_to_string(dir.path().join("full.bin.meta.toml")).expect("meta");
    assert!(
        meta.contains("k = 16")
            && meta.contains("iterations = 6")
            && meta.contains("seed = 3")
            && meta.contains("assignment = \"f32\""),
        "{meta}"
    );

    // The same file clustered directly, text vocabulary out, reproducible from the seed.
    let text = dir.path().join("v.txt");
    let mut args = vec![
        "kmeans",
        "--features",
        s(&features),
        "--iterations",
        "4",
        "--out",
        s(&text),
    ];
    args.extend(common);
    ok(&args);
    let vocab = std::fs::read_to_string(&text).expect("text vocabulary");
    assert_eq!(vocab.lines().count(), 16);
    assert!(vocab.lines().all(|l| l.split(' ').count() == 24));

    // Resuming with another seed is refused; a damaged partition is named.
    let args = vec![
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "16",
        "--seed",
        "4",
        "--resume",
        "--out",
        s(&half),
    ];
    let err = fails(&args);
    assert!(err.contains("belongs to another run"), "{err}");
    std::fs::write(parts.join("part-0002.bin"), b"nonsense").expect("damage");
    let err = fails(&[
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "4",
        "--out",
        s(&full),
    ]);
    assert!(err.contains("part-0002.bin"), "{err}");
}

#[test]
fn kmeans_rejects_bad_requests_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let features = dir.path().join("f.txt");
    std::fs::write(&features, "0 0 0 1 2\n1 0 0 3 4\n2 0 0 inf 5\n").expect("write");
    let err = fails(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "2",
        "--out",
        s(&dir.path().join("v.bin")),
    ]);
    assert!(
        err.contains("f.txt: line 3: value 1 is not finite"),
        "{err}"
    );
    std::fs::write(&features, "0 0 0 1 2\n1 0 0 3 4\n").expect("write");
    let err = fails(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "3",
        "--out",
        s(&dir.path().join("v.bin")),
    ]);
    assert!(
        err.contains("k = 3 exceeds the number of vectors (2)"),
        "{err}"
    );
    let init = dir.path().join("init.txt");
    std::fs::write(&init, "1 2 3\n").expect("write");
    let err = fails(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "1",
        "--init-centroids",
        s(&init),
        "--out",
        s(&dir.path().join("v.bin")),
    ]);
    assert!(
        err.contains("initial centroids are 1 x 3, expected 1 x 2"),
        "{err}"
    );
}

/// Worker processes that are killed when the test ends, however it ends.
struct Workers(Vec<std::process::Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Writes a cluster file for `n` loopback workers; returns its path and the ports.
/// Blob vectors (`vocab datasets synth`) split into `parts` partitions under `dir/parts`.
fn synth_parts(
    dir: &Path,
    n: u64,
    dims: usize,
    clusters: usize,
    seed: u64,
    parts: usize,
) -> PathBuf {
    let features = dir.join("f.bin");
    let (n, dims, clusters, seed, parts) = (
        n.to_string(),
        dims.to_string(),
        clusters.to_string(),
        seed.to_string(),
        parts.to_string(),
    );
    ok(&[
        "datasets",
        "synth",
        "--out",
        s(&features),
        "--n",
        &n,
        "--dims",
        &dims,
        "--clusters",
        &clusters,
        "--seed",
        &seed,
    ]);
    let out = dir.join("parts");
    ok(&[
        "partition",
        "--features",
        s(&features),
        "--parts",
        &parts,
        "--out",
        s(&out),
    ]);
    out
}

fn cluster_file(dir: &Path, name: &str, n: usize, retries: u32) -> (PathBuf, Vec<u16>) {
    let secret = dir.join("secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").expect("secret");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("mode");
    }
    let mut text = format!(
        "[settings]\nsecret_file = \"secret\"\nretries = {retries}\nchunk_size = 65536\nio_timeout_ms = 5000\n"
    );
    let mut ports = Vec::new();
    for i in 0..n {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("port")
            .local_addr()
            .expect("addr")
            .port();
        text.push_str(&format!(
            "[[nodes]]\nname = \"w{i}\"\naddress = \"127.0.0.1:{port}\"\n"
        ));
        ports.push(port);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("cluster file");
    (path, ports)
}

fn spawn_worker(
    cluster: &Path,
    i: usize,
    port: u16,
    exit_after: Option<u64>,
) -> std::process::Child {
    spawn_worker_with(cluster, i, port, exit_after, None)
}

fn spawn_worker_with(
    cluster: &Path,
    i: usize,
    port: u16,
    exit_after: Option<u64>,
    exit_at_step: Option<u64>,
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vocab"));
    cmd.args([
        "worker",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--name",
        &format!("w{i}"),
        "--cluster",
        s(cluster),
    ]);
    if let Some(n) = exit_after {
        cmd.args(["--exit-after-bytes", &n.to_string()]);
    }
    if let Some(n) = exit_at_step {
        cmd.args(["--exit-at-step", &n.to_string()]);
    }
    let child = cmd
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("worker starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "worker w{i} did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

#[test]
fn a_worker_killed_mid_broadcast_is_dropped_or_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (relink, ports) = cluster_file(dir.path(), "cluster.toml", 3, 3);
    let mut workers = Workers(Vec::new());
    for (i, &port) in ports.iter().enumerate() {
        // w1, in the middle of the chain, dies after receiving 1 MiB of the 8 MiB message.
        workers
            .0
            .push(spawn_worker(&relink, i, port, (i == 1).then_some(1 << 20)));
    }
    let status = ok(&["cluster", "status", "--cluster", s(&relink)]);
    assert!(status.contains("3 of 3 nodes alive"), "{status}");
    // Every link measured (64 KiB probes: w1's fault is 1 MiB away), the chain built from it.
    let out = ok(&[
        "cluster",
        "calibrate",
        "--cluster",
        s(&relink),
        "--probe",
        "64K",
    ]);
    assert!(
        out.contains("calibration: 4 members") && out.contains("chain: driver -> w"),
        "{out}"
    );
    let links: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("cluster.toml.links.json")).expect("links"),
    )
    .expect("json");
    assert_eq!(
        links["members"].as_array().map(Vec::len),
        Some(4),
        "{links}"
    );
    assert_eq!(
        links["bandwidth_bytes_per_second"][1]
            .as_array()
            .map(Vec::len),
        Some(4)
    );
    // k-means with --order auto on the same cluster reuses those links, and its vocabulary is
    // the single process's.
    let p = |name: &str| dir.path().join(name);
    let parts = synth_parts(dir.path(), 2000, 16, 4, 1, 4);
    let kmeans = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "kmeans",
            "--features",
            s(&parts),
            "--k",
            "8",
            "--iterations",
            "3",
            "--seed",
            "2",
            "--out",
            s(out),
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let out = kmeans(
        &p("auto.bin"),
        &[
            "--cluster",
            s(&relink),
            "--order",
            "auto",
            "--broadcast",
            "mst",
        ],
    );
    assert!(
        out.contains("links measured before") && out.contains("broadcast tree (mst): driver > "),
        "{out}"
    );
    kmeans(&p("local.bin"), &[]);
    assert!(
        std::fs::read(p("auto.bin")).expect("auto")
            == std::fs::read(p("local.bin")).expect("local")
    );
    let out = ok(&[
        "bench",
        "broadcast",
        "--cluster",
        s(&relink),
        "--bytes",
        "8M",
        "--algorithm",
        "chain",
        "--repeat",
        "1",
    ]);
    assert!(
        out.contains("nodes=2 bytes=8388608 algorithm=chain") && out.contains("dropped=w1"),
        "{out}"
    );
    // Gathers (stage 3's pattern) up the measured tree of the team that is left, every piece
    // checked at the driver.
    let out = ok(&[
        "bench",
        "gather",
        "--cluster",
        s(&relink),
        "--bytes",
        "300K",
        "--order",
        "auto",
        "--repeat",
        "2",
    ]);
    assert_eq!(
        out.matches("nodes=2 bytes=307200 algorithm=gather").count(),
        2,
        "{out}"
    );
    let err = fails(&["cluster", "status", "--cluster", s(&relink)]);
    assert!(err.contains("1 nodes do not answer"), "{err}");

    // The same fault with no retries allowed: the call fails and names the node.
    let strict = dir.path().join("strict.toml");
    std::fs::write(
        &strict,
        std::fs::read_to_string(&relink)
            .expect("read")
            .replace("retries = 3", "retries = 0"),
    )
    .expect("write");
    workers
        .0
        .push(spawn_worker(&strict, 1, ports[1], Some(1 << 20)));
    let err = fails(&[
        "bench",
        "broadcast",
        "--cluster",
        s(&strict),
        "--bytes",
        "8M",
        "--algorithm",
        "chain",
        "--repeat",
        "1",
    ]);
    assert!(err.contains("broadcast failed at node w1"), "{err}");
}

#[test]
fn encode_counts_every_dense_patch_under_its_nearest_word() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let sample = dir.path().join("sample.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&sample),
        "--per-image",
        "20",
        "--seed",
        "1",
    ]);
    let vocab = dir.path().join("vocab.txt");
    ok(&[
        "kmeans",
        "--features",
        s(&sample),
        "--k",
        "8",
        "--iterations",
        "5",
        "--seed",
        "2",
        "--out",
        s(&vocab),
    ]);
    let hist = dir.path().join("hist.csv");
    let out = ok(&[
        "encode",
        "--vocabulary",
        s(&vocab),
        "--input",
        s(&photos),
        "--out",
        s(&hist),
        "--stride",
        "16",
    ]);
    assert!(out.contains("8 photos encoded, 0 skipped"), "{out}");
    let rows = csv_rows(&hist);
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| r.len() == 2 + 8));

    // Brute force: the same dense patches, each counted under its nearest word.
    let dense = dir.path().join("dense.txt");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&dense),
        "--mode",
        "dense",
        "--stride",
        "16",
    ]);
    let words: Vec<Vec<f64>> = std::fs::read_to_string(&vocab)
        .expect("vocab")
        .lines()
        .map(|l| l.split(' ').map(|v| v.parse().expect("float")).collect())
        .collect();
    let mut counts = vec![vec![0usize; 8]; 8];
    for line in std::fs::read_to_string(&dense).expect("dense").lines() {
        let f: Vec<f64> = line
            .split(' ')
            .map(|v| v.parse().expect("number"))
            .collect();
        let (id, x) = (f[0] as usize, &f[3..]);
        let d = |w: &Vec<f64>| w.iter().zip(x).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
        let best = (0..8)
            .min_by(|&a, &b| d(&words[a]).total_cmp(&d(&words[b])))
            .expect("k > 0");
        counts[id][best] += 1;
    }
    for row in &rows {
        let id: usize = row[0].parse().expect("id");
        let total: usize = counts[id].iter().sum();
        for (w, value) in row[2..].iter().enumerate() {
            let got: f64 = value.parse().expect("value");
            let want = counts[id][w] as f64 / total as f64;
            assert!(
                (got - want).abs() < 1e-6,
                "photo {id} word {w}: {got} vs {want}"
            );
        }
    }

    // Hellinger with a 2-level pyramid: 8 x (1 + 4) values per photo, squares summing to 1.
    let pyr = dir.path().join("pyr.csv");
    ok(&[
        "encode",
        "--vocabulary",
        s(&vocab),
        "--input",
        s(&photos),
        "--out",
        s(&pyr),
        "--norm",
        "hellinger",
        "--pyramid",
        "2",
    ]);
    for row in csv_rows(&pyr) {
        assert_eq!(row.len(), 2 + 40);
        let sq: f64 = row[2..]
            .iter()
            .map(|v| v.parse::<f64>().expect("v").powi(2))
            .sum();
        assert!((sq - 1.0).abs() < 1e-5, "{sq}");
    }
}

#[test]
fn train_evaluate_and_classify_with_a_held_out_split() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = dir.path().join("photos");
    ok(&[
        "datasets",
        "photos",
        "--out",
        s(&photos),
        "--per-kind",
        "6",
        "--seed",
        "4",
    ]);
    let labels = photos.join("labels.csv");
    let sample = dir.path().join("sample.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&sample),
        "--per-image",
        "20",
    ]);
    let vocab = dir.path().join("vocab.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&sample),
        "--k",
        "32",
        "--iterations",
        "8",
        "--out",
        s(&vocab),
    ]);
    let hist = dir.path().join("hist.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&vocab),
        "--input",
        s(&photos),
        "--out",
        s(&hist),
        "--norm",
        "hellinger",
    ]);
    assert!(dir.path().join("hist.bin.encoding.json").is_file());

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
            "model trained on a seeded stratified split (seed 0, 50% of each class held out)"
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

    // A chi-squared kernel map on L1 histograms: the model keeps it and applies it to every
    // photo it scores, in evaluate and in classify.
    let encode_l1 = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(&vocab),
            "--input",
            s(&photos),
            "--out",
            s(out),
            "--norm",
            "l1",
        ];
        args.extend_from_slice(extra);
        ok(&args);
    };
    let l1 = dir.path().join("hist-l1.bin");
    encode_l1(&l1, &[]);
    let mapped = dir.path().join("urban-chi2.json");
    let train_map = |hist: &Path| -> Vec<String> {
        [
            "train",
            "--histograms",
            s(hist),
            "--labels",
            s(&labels),
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
        s(&labels),
    ]);
    assert!(out.contains("24 labelled photos scored"), "{out}");
    ok(&[
        "classify",
        "--model",
        s(&mapped),
        "--input",
        s(&photos),
        "--out",
        s(&labelled),
    ]);
    assert_eq!(csv_rows(&labelled).len(), 24);
    // Histograms of another length are refused with both lengths, not scored wrongly.
    let pyramid = dir.path().join("hist-p2.bin");
    encode_l1(&pyramid, &["--pyramid", "2"]);
    let err = fails(&[
        "evaluate",
        "--model",
        s(&mapped),
        "--histograms",
        s(&pyramid),
        "--labels",
        s(&labels),
    ]);
    assert!(
        err.contains(
            "histograms of 160 values (1120 through the model's chi2 map), the model takes 224"
        ),
        "{err}"
    );
    // Soft assignment: every patch spread over its 3 nearest words; rows still sum to 1, with
    // more words present than under hard assignment; recorded for classify.
    let (hard_csv, soft_csv) = (dir.path().join("hard.csv"), dir.path().join("soft.csv"));
    encode_l1(&hard_csv, &[]);
    encode_l1(&soft_csv, &["--soft", "3", "--sharpness", "5"]);
    let nonzero = |rows: &[Vec<String>]| -> usize {
        rows.iter()
            .map(|r| {
                let values: Vec<f64> = r[2..].iter().map(|v| v.parse().expect("value")).collect();
                assert!((values.iter().sum::<f64>() - 1.0).abs() < 1e-4, "{r:?}");
                values.iter().filter(|&&v| v > 0.0).count()
            })
            .sum()
    };
    assert!(nonzero(&csv_rows(&soft_csv)) > nonzero(&csv_rows(&hard_csv)));
    let recorded = std::fs::read_to_string(dir.path().join("soft.csv.encoding.json")).expect("enc");
    assert!(recorded.contains(r#""words": 3"#), "{recorded}");
    let err = fails(&[
        "encode",
        "--vocabulary",
        s(&vocab),
        "--input",
        s(&photos),
        "--out",
        s(&soft_csv),
        "--soft",
        "1",
    ]);
    assert!(err.contains("--soft 1"), "{err}");
    // The map takes L1 histograms: on Hellinger ones it says how to encode.
    let args = train_map(&hist);
    let err = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("--kernel-map chi2") && err.contains("--norm l1"),
        "{err}"
    );
}

#[test]
fn distributed_kmeans_equals_local_and_survives_a_killed_worker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = |name: &str| dir.path().join(name);
    let parts = synth_parts(dir.path(), 40000, 48, 30, 4, 9);
    let kmeans = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "kmeans",
            "--features",
            s(&parts),
            "--k",
            "40",
            "--iterations",
            "8",
            "--tol",
            "0",
            "--seed",
            "6",
            "--out",
        ];
        let out = p(out);
        let out = s(&out).to_string();
        args.push(&out);
        args.extend_from_slice(extra);
        let stdout = ok(&args);
        (std::fs::read(&out).expect("vocabulary"), stdout)
    };
    let (local, _) = kmeans("local.bin", &[]);
    let (two, stdout) = kmeans("two.bin", &["--local-nodes", "2"]);
    assert!(
        two == local,
        "2 workers differ from the local run:\n{stdout}"
    );
    assert!(
        stdout.contains("on 2 workers") && stdout.contains(" agg2 "),
        "{stdout}"
    );
    let (four, _) = kmeans(
        "four.bin",
        &["--local-nodes", "4", "--no-local-aggregation"],
    );
    assert!(four == local, "4 workers without local aggregation differ");
    let stages = csv_rows(&p("four.bin.stages.csv"));
    assert_eq!(stages.len(), 8);
    assert_eq!(stages[0][1], "4");

    // Four worker processes: w1 is killed once the run is under way, later w2 stalls, and w3
    // dies in the middle of iteration 6 (after its map tasks, before stage 2).
    let (cluster, ports) = cluster_file(dir.path(), "cluster.toml", 4, 3);
    let text = std::fs::read_to_string(&cluster).expect("read").replace(
        "io_timeout_ms = 5000",
        "io_timeout_ms = 3000\nconnect_timeout_ms = 500",
    );
    std::fs::write(&cluster, text).expect("write");
    let mut workers = Workers(
        ports
            .iter()
            .enumerate()
            .map(|(i, &port)| spawn_worker_with(&cluster, i, port, None, (i == 3).then_some(6)))
            .collect(),
    );
    let out = p("killed.bin");
    let mut driver = Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args([
            "kmeans",
            "--features",
            s(&parts),
            "--k",
            "40",
            "--iterations",
            "8",
            "--tol",
            "0",
            "--seed",
            "6",
            "--quiet",
            "--cluster",
            s(&cluster),
            "--out",
            s(&out),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("driver starts");
    let stdout = driver.stdout.take().expect("stdout");
    let mut lines = Vec::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line.expect("line");
        if line.starts_with("iter 2 ") {
            workers.0[1].kill().expect("kill w1");
        }
        if line.starts_with("iter 4 ") {
            // w2 stalls: alive to the kernel, silent to its peers.
            let stopped = Command::new("kill")
                .args(["-STOP", &workers.0[2].id().to_string()])
                .status()
                .expect("kill -STOP");
            assert!(stopped.success());
        }
        lines.push(line);
    }
    let status = driver.wait().expect("driver ends");
    let all = lines.join("\n");
    assert!(status.success(), "driver failed:\n{all}");
    assert!(all.contains("dropped w1"), "{all}");
    assert!(all.contains("dropped w2"), "{all}");
    assert!(all.contains("dropped w3"), "{all}");
    assert!(
        std::fs::read(&out).expect("vocabulary") == local,
        "recovered run differs:\n{all}"
    );
}

#[cfg(not(feature = "mpi"))]
#[test]
fn the_mpi_engine_in_a_build_without_mpi_says_how_to_get_one() {
    let tmp = tempfile::tempdir().expect("tmp");
    let err = fails(&[
        "kmeans",
        "--engine",
        "mpi",
        "--features",
        s(tmp.path()),
        "--k",
        "2",
        "--out",
        s(&tmp.path().join("v.bin")),
    ]);
    assert!(
        err.contains("--features mpi") && err.contains("README"),
        "{err}"
    );
}

#[test]
fn a_secret_file_others_can_read_is_refused_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (cluster, _) = cluster_file(dir.path(), "c.toml", 1, 0);
    let secret = dir.path().join("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).expect("mode");
    let err = fails(&["cluster", "status", "--cluster", s(&cluster)]);
    assert!(
        err.contains("readable by other users")
            && err.contains("chmod 600")
            && err.contains(s(&secret)),
        "{err}"
    );
}

#[test]
fn a_second_run_on_a_locked_work_directory_is_refused_naming_the_holder() {
    use std::io::Write as _;
    use std::os::unix::io::AsRawFd;
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work");
    let mut lock = std::fs::File::create(work.join(".lock")).expect("lock file");
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    write!(lock, "pid 4242 on testhost").expect("write");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let err = fails(&["run", s(&config), "--work", s(&work)]);
    assert!(
        err.contains("in use by another vocab run") && err.contains("pid 4242 on testhost"),
        "{err}"
    );
    assert!(!work.join("dataset").exists(), "nothing ran");
}

#[test]
fn a_step_interrupted_earlier_starts_from_an_empty_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    ok(&["run", s(&config), "--work", s(&work)]);
    // Leave behind what a killed run would: an encode step's temporary folder with
    // half-written files in it, then redo that step.
    let encode = std::fs::read_dir(work.join("encode"))
        .expect("encode")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("an encode step");
    let name = encode
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let tmp = work.join("encode").join(format!(".tmp-{name}"));
    std::fs::create_dir_all(&tmp).expect("tmp");
    std::fs::write(tmp.join(".vocab-partial-killed"), "half").expect("junk");
    std::fs::write(tmp.join("histograms.bin"), "half a file").expect("junk");
    ok(&["run", s(&config), "--work", s(&work), "--force", "encode"]);
    assert!(!encode.join(".vocab-partial-killed").exists());
    let histograms = std::fs::read(encode.join("histograms.bin")).expect("histograms");
    assert_ne!(histograms, b"half a file");
}

#[test]
fn a_vocabulary_of_other_dims_is_named_in_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let vocabulary = dir.path().join("words.txt");
    std::fs::write(&vocabulary, "0.1 0.2 0.3\n0.4 0.5 0.6\n").expect("write");
    let out = dir.path().join("hist.bin");
    let err = fails(&[
        "encode",
        "--vocabulary",
        s(&vocabulary),
        "--input",
        s(&photos),
        "--out",
        s(&out),
    ]);
    assert!(
        err.contains("words.txt: words of 3 dims, the HOG descriptor has 512"),
        "{err}"
    );
    assert!(!err.contains("hist.bin"), "{err}");
}

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
fn link_loops_dangling_links_and_non_utf8_names_are_listed_as_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    std::os::unix::fs::symlink(".", photos.join("loop")).expect("loop");
    std::os::unix::fs::symlink("nowhere.jpg", photos.join("gone.jpg")).expect("dangling");
    let first = photos.join("city/city_001.png");
    // Two names that differ only in bytes that are not UTF-8.
    for byte in [0xff_u8, 0xfe] {
        let bytes = [b'x', byte, b'.', b'p', b'n', b'g'];
        std::fs::copy(&first, photos.join(std::ffi::OsStr::from_bytes(&bytes))).expect("copy");
    }
    let out = dir.path().join("f.bin");
    ok(&["features", "--input", s(&photos), "--out", s(&out)]);
    let skipped = csv_rows(&dir.path().join("f.bin.skipped.csv"));
    let reason = |path: &str| -> String {
        skipped
            .iter()
            .find(|r| r[1] == path)
            .map(|r| r[2].clone())
            .unwrap_or_else(|| panic!("{path} not listed: {skipped:?}"))
    };
    assert!(reason("loop").contains("symbolic link loop"));
    assert_eq!(reason("gone.jpg"), "dangling symbolic link");
    assert_eq!(reason("x\\xff.png"), "file name is not UTF-8");
    assert_eq!(reason("x\\xfe.png"), "file name is not UTF-8");
    // Every photo found is accounted for: the 8 photos described, the 4 entries skipped.
    let images = csv_rows(&dir.path().join("f.bin.images.csv"));
    assert_eq!((images.len(), skipped.len()), (8, 4), "{skipped:?}");
}

#[test]
fn the_pixel_limit_is_a_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = dir.path().join("photos");
    std::fs::create_dir_all(&photos).expect("photos");
    // 1.1 Mpix of gray noise-free gradient.
    let img = ImageBuffer::from_fn(1100, 1000, |x, y| Luma([((x + y) % 256) as u8]));
    DynamicImage::ImageLuma8(img)
        .save(photos.join("big.png"))
        .expect("save");
    let out = dir.path().join("f.bin");
    let run = |extra: &[&str]| {
        let mut args = vec!["features", "--input", s(&photos), "--out", s(&out)];
        args.extend_from_slice(extra);
        ok(&args);
        (
            csv_rows(&dir.path().join("f.bin.images.csv")).len(),
            csv_rows(&dir.path().join("f.bin.skipped.csv")),
        )
    };
    let (described, skipped) = run(&[]);
    assert_eq!((described, skipped.len()), (1, 0));
    let (described, skipped) = run(&["--max-pixels", "1"]);
    assert_eq!(described, 0);
    assert!(
        skipped[0][2].contains("too many pixels") && skipped[0][2].contains("limit is 1 Mpix"),
        "{skipped:?}"
    );
    assert!(
        fails(&[
            "features",
            "--input",
            s(&photos),
            "--out",
            s(&out),
            "--max-pixels",
            "0"
        ])
        .contains("--max-pixels 0")
    );
}
