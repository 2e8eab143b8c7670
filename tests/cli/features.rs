//! `vocab features` and `vocab convert`: sampling, decoding, skipped photos, errors.

use std::path::Path;

use image::{DynamicImage, ImageBuffer, ImageFormat, Luma, LumaA, RgbImage};

use crate::util::*;

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
        summary.contains("features: 8 photos, 0 skipped, 40 patches"),
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
        summary.contains("features: 6 photos, 0 skipped"),
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
fn a_patch_side_resizes_every_photo_before_it_is_described() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let sizes = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let args = ["features", "--input", s(&photos), "--out", s(&out)];
        ok(&[&args[..], extra].concat());
        let manifest = csv_rows(&dir.path().join(format!("{name}.images.csv")));
        (manifest.iter())
            .map(|r| {
                (
                    r[2].parse::<f64>().expect("w"),
                    r[3].parse::<f64>().expect("h"),
                )
            })
            .collect::<Vec<_>>()
    };
    let plain = sizes("plain.bin", &[]);
    assert!(!plain.is_empty());
    // 20-px patches: every photo described twice as large; 80-px: half as large.
    for (patch, zoom) in [("20", 2.0), ("80", 0.5), ("40", 1.0)] {
        let zoomed = sizes(&format!("p{patch}.bin"), &["--patch", patch]);
        for (&(w, h), &(zw, zh)) in plain.iter().zip(&zoomed) {
            assert_eq!(
                ((w * zoom).round(), (h * zoom).round()),
                (zw, zh),
                "--patch {patch}"
            );
        }
    }
    let err = fails(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&dir.path().join("bad.bin")),
        "--patch",
        "161",
    ]);
    assert!(
        err.contains("--patch 161: must be 16 to 160 pixels"),
        "{err}"
    );
    // The pixel limit bounds a photo as described: 500 x 500 px (0.25 Mpix) enlarged 2.5 times
    // for 16-px patches is 1.56 Mpix, past a limit of 1 Mpix (skipped), within one of 2; the
    // 100 x 100 photo is described either way.
    let big = dir.path().join("big");
    std::fs::create_dir_all(&big).expect("mkdir");
    let photo: ImageBuffer<Luma<u8>, Vec<u8>> =
        ImageBuffer::from_fn(500, 500, |x, y| Luma([((x * 7 + y * 3) % 256) as u8]));
    photo.save(big.join("a.png")).expect("png");
    let small: ImageBuffer<Luma<u8>, Vec<u8>> =
        ImageBuffer::from_fn(100, 100, |x, _| Luma([x as u8]));
    small.save(big.join("b.png")).expect("png");
    let described = |limit: &str| {
        let out = dir.path().join(format!("big-{limit}.bin"));
        let args = ["features", "--input", s(&big), "--out", s(&out)];
        let more = ["--patch", "16", "--max-pixels", limit];
        ok(&[&args[..], &more[..]].concat());
        csv_rows(&dir.path().join(format!("big-{limit}.bin.images.csv"))).len()
    };
    assert_eq!(described("1"), 1);
    let skipped = csv_rows(&dir.path().join("big-1.bin.skipped.csv"));
    assert!(
        skipped[0][2].contains("1.56 Mpix once enlarged 2.500x for 16-px patches (--patch)")
            && skipped[0][2].contains("past the limit of 1 Mpix"),
        "{skipped:?}"
    );
    assert_eq!(described("2"), 2);
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

    // Shared out to 3 loopback workers (14 photos: several rounds, skipped photos in them):
    // the same files byte for byte, and the nodes named in the summary.
    let files = |out: &Path| -> Vec<Vec<u8>> {
        ["", ".images.csv", ".skipped.csv"]
            .iter()
            .map(|suffix| {
                let path = format!("{}{suffix}", out.display());
                std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
            })
            .collect()
    };
    let sharded = dir.path().join("sharded.bin");
    let summary = ok(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&sharded),
        "--local-nodes",
        "3",
    ]);
    assert!(files(&sharded) == files(&out), "{summary}");
    assert!(summary.contains("(3 nodes): w0 "), "{summary}");
    assert!(!dir.path().join("sharded.bin.rounds").exists());
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
        summary.contains("features: 2 photos, 1 skipped"),
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
    // And a small one, so that a stage that skips the big one still reads a photo (one that
    // reads none fails, naming the reasons).
    let small = ImageBuffer::from_fn(100, 100, |x, y| Luma([((x * y) % 256) as u8]));
    DynamicImage::ImageLuma8(small)
        .save(photos.join("small.png"))
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
    assert_eq!((described, skipped.len()), (2, 0));
    let (described, skipped) = run(&["--max-pixels", "1"]);
    assert_eq!((described, skipped.len()), (1, 1));
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
