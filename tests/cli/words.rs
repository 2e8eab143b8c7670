//! `vocab words`: a vocabulary drawn as the photo patches nearest its most used words.

use crate::util::*;

/// Width of the strip that names the rows, left of the tiles.
const LABELS: u32 = 130;

#[test]
fn words_are_drawn_as_their_nearest_patches_beside_a_csv_of_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 4, 3);
    let path = |name: &str| dir.path().join(name);
    sample_of(dir.path(), &photos);
    ok(&[
        "kmeans",
        "--features",
        s(&path("f.bin")),
        "--k",
        "12",
        "--seed",
        "1",
        "--out",
        s(&path("v.bin")),
    ]);
    let vocabulary = path("v.bin");
    let words = |out: &str, extra: &[&str]| {
        let out = path(out);
        let mut args = vec![
            "words",
            "--vocabulary",
            s(&vocabulary),
            "--input",
            s(&photos),
            "--out",
            s(&out),
            "--words",
            "5",
            "--patches",
            "6",
            "--per-image",
            "20",
        ];
        args.extend(extra);
        ok(&args)
    };
    let said = words("w.png", &[]);
    assert!(
        said.contains("words: 5 words x 6 patches from 320 patches of 16 photos"),
        "{said}"
    );
    // Rows of 6 tiles of 40 x 40 px at zoom 2, 2-px gaps, right of a strip naming the rows.
    let image = image::open(path("w.png")).expect("png").to_luma8();
    assert_eq!(image.dimensions(), (LABELS + 2 + 6 * 82, 2 + 5 * 82));
    for r in 0..5 {
        // Each row's name is written in its strip (dark text on white), within the row.
        let inked = (0..LABELS)
            .flat_map(|x| (2 + r * 82..2 + r * 82 + 80).map(move |y| (x, y)))
            .filter(|&(x, y)| image.get_pixel(x, y).0[0] < 128)
            .count();
        assert!(inked > 50, "row {r}: {inked} dark pixels in its label");
    }
    let header = std::fs::read_to_string(path("w.png.csv")).expect("csv");
    assert!(
        header.starts_with("row,word,patches_nearest,column,"),
        "{header}"
    );
    let rows = csv_rows(&path("w.png.csv"));
    assert_eq!(rows.len(), 5 * 6);
    let mut last_won = usize::MAX;
    for row in rows.chunks(6) {
        // Most used words first; within a word, nearest patches first.
        let won: usize = row[0][2].parse().expect("patches nearest");
        assert!(won <= last_won && won >= 6, "{row:?}");
        last_won = won;
        let distances: Vec<f64> = row
            .iter()
            .map(|r| r[8].parse().expect("distance"))
            .collect();
        assert!(distances.windows(2).all(|w| w[0] <= w[1]), "{distances:?}");
        for tile in row {
            // The tile is the photo's pixels at its place (the photos are 8-bit gray PNG/JPEG
            // decoded alike), top-left tile pixel against the photo's.
            let photo = image::open(photos.join(&tile[5]))
                .expect("photo")
                .to_luma8();
            let (r, c): (u32, u32) = (tile[6].parse().expect("row"), tile[7].parse().expect("col"));
            assert!(
                r + 40 <= photo.height() && c + 40 <= photo.width(),
                "{tile:?}"
            );
        }
    }
    // The first tile is the first word's nearest patch, cut from its photo.
    let first = &rows[0];
    let photo = image::open(photos.join(&first[5]))
        .expect("photo")
        .to_luma8();
    let (r, c): (u32, u32) = (
        first[6].parse().expect("row"),
        first[7].parse().expect("col"),
    );
    for (y, x) in [(0, 0), (13, 27), (39, 39)] {
        let want = photo.get_pixel(c + x, r + y).0[0];
        let got = image.get_pixel(LABELS + 2 + 2 * x, 2 + 2 * y).0[0];
        assert!(want.abs_diff(got) <= 1, "({y}, {x}): {want} vs {got}");
    }
    // Seeded: the same picture again; another seed, other patches.
    words("again.png", &[]);
    assert_eq!(
        std::fs::read(path("w.png")).expect("a"),
        std::fs::read(path("again.png")).expect("b")
    );
    words("other.png", &["--seed", "9"]);
    assert_ne!(
        std::fs::read(path("w.png")).expect("a"),
        std::fs::read(path("other.png")).expect("c")
    );
    // Fewer photos, a smaller zoom, only the photos a CSV lists, downscaled photos.
    let listed = path("fields.csv");
    let labels = std::fs::read_to_string(photos.join("labels.csv")).expect("labels");
    let fields: String = labels
        .lines()
        .filter(|l| l.starts_with("path") || l.starts_with("field/"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&listed, fields).expect("fields");
    let said = words(
        "small.png",
        &[
            "--photos",
            "3",
            "--zoom",
            "1",
            "--labels",
            s(&listed),
            "--max-side",
            "120",
        ],
    );
    assert!(said.contains("of 3 photos"), "{said}");
    let small = image::open(path("small.png")).expect("png").to_luma8();
    assert_eq!(small.width(), LABELS + 2 + 6 * 42);
    for tile in csv_rows(&path("small.png.csv")) {
        assert!(tile[5].starts_with("field/"), "{tile:?}");
        let (r, c): (usize, usize) = (tile[6].parse().expect("row"), tile[7].parse().expect("col"));
        assert!(r + 40 <= 120 && c + 40 <= 120, "{tile:?}");
    }
    // Refused: nothing to draw, a vocabulary that is not of HOG words.
    let err = fails(&[
        "words",
        "--vocabulary",
        s(&path("v.bin")),
        "--input",
        s(&photos),
        "--out",
        s(&path("x.png")),
        "--words",
        "0",
    ]);
    assert!(err.contains("--words 0: must be 1 to 1024"), "{err}");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "50",
        "--dims",
        "8",
        "--clusters",
        "2",
        "--out",
        s(&path("s.bin")),
    ]);
    ok(&[
        "kmeans",
        "--features",
        s(&path("s.bin")),
        "--k",
        "2",
        "--out",
        s(&path("v8.bin")),
    ]);
    let err = fails(&[
        "words",
        "--vocabulary",
        s(&path("v8.bin")),
        "--input",
        s(&photos),
        "--out",
        s(&path("x.png")),
    ]);
    assert!(
        err.contains("8-value words") && err.contains("v8.bin"),
        "{err}"
    );
    assert!(!path("x.png").exists());
}
