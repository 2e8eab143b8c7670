//! Other tools' formats in and out: `.npy`, `.fvecs`, `.bvecs` and CSV, checked against files
//! numpy wrote (`eval/formats/make_fixtures.py`) and through every input that takes vectors.

use std::path::{Path, PathBuf};

use crate::util::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("eval/formats/fixtures")
        .join(name)
}

/// Element `[i, j]` of a fixture's array.
type Value = fn(usize, usize) -> f32;

/// The fixtures' arrays, as `make_fixtures.py` defines them.
fn f32_value(i: usize, j: usize) -> f32 {
    ((7 * i + 3 * j) % 11) as f32 / 8.0 - 0.5
}

fn f64_value(i: usize, j: usize) -> f32 {
    (f64::from(f32_value(i, j)) + 0.1) as f32
}

fn u8_value(i: usize, j: usize) -> f32 {
    ((7 * i + 3 * j) % 256 * 9 % 256) as f32
}

/// A feature file's records as vocab's text format gives them: `(picture_id, row, col, values)`.
fn records(file: &Path, dir: &Path) -> Vec<(u32, u16, u16, Vec<f32>)> {
    let text = dir.join("records.txt");
    ok(&["convert", "--input", s(file), "--out", s(&text)]);
    std::fs::read_to_string(&text)
        .expect("text")
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let values = f[3..].iter().map(|v| v.parse().expect("value")).collect();
            (
                f[0].parse().expect("id"),
                f[1].parse().expect("row"),
                f[2].parse().expect("col"),
                values,
            )
        })
        .collect()
}

#[test]
fn what_numpy_wrote_reads_as_numpy_wrote_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&str, Value); 9] = [
        ("f32.npy", f32_value),
        ("f32_fortran.npy", f32_value),
        ("f64.npy", f64_value),
        ("u8.npy", u8_value),
        ("vectors.fvecs", f32_value),
        ("vectors.bvecs", u8_value),
        ("header.csv", f32_value),
        ("plain.csv", f32_value),
        ("records.csv", f32_value),
    ];
    for (name, value) in cases {
        let got = records(&fixture(name), dir.path());
        assert_eq!(got.len(), 5, "{name}");
        for (i, (id, row, col, values)) in got.into_iter().enumerate() {
            let want: Vec<f32> = (0..6).map(|j| value(i, j)).collect();
            assert_eq!(values, want, "{name} row {i}");
            // Only CSV with picture_id,row,col columns carries them; elsewhere row i is picture i.
            let place = if name == "records.csv" {
                (10 + i as u32, 8 * i as u16, 16 * i as u16)
            } else {
                (i as u32, 0, 0)
            };
            assert_eq!((id, row, col), place, "{name} row {i}");
        }
    }
}

#[test]
fn vocab_writes_what_numpy_and_faiss_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = |name: &str| dir.path().join(name);
    let bytes = |path: &Path| std::fs::read(path).expect("read");
    // Every reader's float32 array written as numpy's own .npy, byte for byte.
    for input in [
        "vectors.fvecs",
        "f32_fortran.npy",
        "header.csv",
        "records.csv",
    ] {
        let npy = out(&format!("{input}.npy"));
        let said = ok(&["convert", "--input", s(&fixture(input)), "--out", s(&npy)]);
        assert!(said.contains("(npy)"), "{said}");
        // numpy's own file but for the header dict's closing: numpy writes `, }`,
        // ndarray-npy `}` (eval/formats/roundtrip.md: numpy reads it back).
        let (ours, theirs) = (bytes(&npy), bytes(&fixture("f32.npy")));
        let closing = |b: &[u8]| String::from_utf8_lossy(&b[..128]).replace("), }", ")}  ");
        assert_eq!(
            (ours.len(), &ours[128..], closing(&ours)),
            (theirs.len(), &theirs[128..], closing(&theirs)),
            "{input}"
        );
    }
    ok(&[
        "convert",
        "--input",
        s(&fixture("f32.npy")),
        "--out",
        s(&out("v.fvecs")),
    ]);
    assert_eq!(bytes(&out("v.fvecs")), bytes(&fixture("vectors.fvecs")));
    ok(&[
        "convert",
        "--input",
        s(&fixture("u8.npy")),
        "--out",
        s(&out("v.bvecs")),
    ]);
    assert_eq!(bytes(&out("v.bvecs")), bytes(&fixture("vectors.bvecs")));
    // Records to a format of bare vectors: said, and the positions kept by CSV.
    let said = ok(&[
        "convert",
        "--input",
        s(&fixture("records.csv")),
        "--out",
        s(&out("r.bin")),
    ]);
    assert!(!said.contains("left out"), "{said}");
    let said = ok(&[
        "convert",
        "--input",
        s(&out("r.bin")),
        "--out",
        s(&out("r.fvecs")),
    ]);
    assert!(said.contains("left out"), "{said}");
    ok(&[
        "convert",
        "--input",
        s(&out("r.bin")),
        "--out",
        s(&out("r.csv")),
    ]);
    let csv = std::fs::read_to_string(out("r.csv")).expect("csv");
    assert!(
        csv.starts_with("picture_id,row,col,v1,v2,v3,v4,v5,v6\n10,0,0,-0.5,"),
        "{csv}"
    );
    assert_eq!(
        records(&out("r.csv"), dir.path()),
        records(&fixture("records.csv"), dir.path())
    );
    // .bvecs holds whole numbers 0 to 255 only.
    let err = fails(&[
        "convert",
        "--input",
        s(&fixture("f32.npy")),
        "--out",
        s(&out("x.bvecs")),
    ]);
    assert!(
        err.contains("record 1") && err.contains("0 to 255"),
        "{err}"
    );
    assert!(!out("x.bvecs").exists());
}

#[test]
fn every_vector_input_takes_every_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| dir.path().join(name);
    let photos = photo_set_of(dir.path(), 3, 5);
    sample_of(dir.path(), &photos);
    let bytes = |name: &str| std::fs::read(path(name)).expect("read");
    let kmeans = |features: &str, out: &str, extra: &[&str]| {
        let mut args = vec![
            "kmeans",
            "--features",
            features,
            "--k",
            "6",
            "--iterations",
            "4",
        ];
        args.extend(["--seed", "2", "--out"]);
        let out = path(out);
        args.push(s(&out));
        args.extend(extra);
        ok(&args);
    };
    // The sample as .npy, .fvecs and CSV: the same vocabulary from each.
    kmeans(s(&path("f.bin")), "v.bin", &[]);
    for ext in ["npy", "fvecs", "csv"] {
        let file = path(&format!("f.{ext}"));
        ok(&["convert", "--input", s(&path("f.bin")), "--out", s(&file)]);
        kmeans(s(&file), &format!("v-{ext}.bin"), &[]);
        assert_eq!(bytes("v.bin"), bytes(&format!("v-{ext}.bin")), "{ext}");
        let parts = path(&format!("parts-{ext}"));
        ok(&[
            "partition",
            "--features",
            s(&file),
            "--parts",
            "2",
            "--out",
            s(&parts),
        ]);
    }
    // Vocabularies out: text and CSV one centroid a line, bare; .npy numpy's.
    kmeans(s(&path("f.bin")), "v.txt", &[]);
    kmeans(s(&path("f.bin")), "v.csv", &[]);
    kmeans(s(&path("f.bin")), "v.npy", &[]);
    let text = std::fs::read_to_string(path("v.txt")).expect("text");
    assert_eq!(text.lines().count(), 6);
    assert!(
        text.lines().all(|l| l.split(' ').count() == 512),
        "512 values a line"
    );
    let csv = std::fs::read_to_string(path("v.csv")).expect("csv");
    assert!(csv.starts_with("v1,v2,"), "{}", &csv[..20]);
    assert_eq!(csv.lines().count(), 7);
    assert!(csv.lines().all(|l| l.split(',').count() == 512));
    // `convert --vocabulary` writes what kmeans writes.
    for ext in ["txt", "csv", "npy"] {
        let out = path(&format!("c.{ext}"));
        ok(&[
            "convert",
            "--vocabulary",
            "--input",
            s(&path("v.bin")),
            "--out",
            s(&out),
        ]);
        assert_eq!(
            bytes(&format!("c.{ext}")),
            bytes(&format!("v.{ext}")),
            "{ext}"
        );
    }
    // Every vocabulary format encodes alike, and starts k-means alike.
    let encode = |vocabulary: &str, out: &str| {
        let out = path(out);
        ok(&[
            "encode",
            "--vocabulary",
            s(&path(vocabulary)),
            "--input",
            s(&photos),
            "--stride",
            "24",
            "--out",
            s(&out),
        ]);
    };
    encode("v.bin", "h.bin");
    for vocabulary in ["v.txt", "v.csv", "v.npy"] {
        encode(vocabulary, "h2.bin");
        assert_eq!(bytes("h.bin"), bytes("h2.bin"), "{vocabulary}");
        kmeans(
            s(&path("f.bin")),
            "w.bin",
            &["--init-centroids", s(&path(vocabulary))],
        );
        kmeans(
            s(&path("f.bin")),
            "w0.bin",
            &["--init-centroids", s(&path("v.bin"))],
        );
        assert_eq!(bytes("w.bin"), bytes("w0.bin"), "{vocabulary}");
    }
    // Histograms as .npy: train reads them with their manifest, the same model as from .bin.
    encode("v.bin", "h.npy");
    let labels = photos.join("labels.csv");
    for (histograms, model) in [("h.bin", "m.json"), ("h.npy", "m-npy.json")] {
        ok(&[
            "train",
            "--histograms",
            s(&path(histograms)),
            "--labels",
            s(&labels),
            "--attribute",
            "urbanicity",
            "--out",
            s(&path(model)),
        ]);
    }
    let model = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(path(name)).expect("model");
        let json: serde_json::Value = serde_json::from_str(&text).expect("json");
        json["classifier"].clone()
    };
    assert_eq!(model("m.json"), model("m-npy.json"));
}

#[test]
fn formats_vocab_cannot_read_are_refused_with_what_it_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out.bin");
    let refused = |input: &Path, want: &str| {
        let err = fails(&["convert", "--input", s(input), "--out", s(&out)]);
        assert!(err.contains(s(input)) && err.contains(want), "{err}");
        assert!(!out.exists());
    };
    refused(
        &fixture("one_d.npy"),
        "holds a 1-D array; vocab reads 2-D arrays",
    );
    refused(
        &fixture("int32.npy"),
        "vocab reads float32, float64 or uint8",
    );
    refused(&fixture("big_endian.npy"), "big-endian");
    // A cut .fvecs, a .bvecs that is not one, CSV with a word among numbers.
    let cut = dir.path().join("cut.fvecs");
    let mut bytes = std::fs::read(fixture("vectors.fvecs")).expect("fvecs");
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&cut, &bytes).expect("write");
    refused(&cut, "not a whole number of 6-value .fvecs records");
    let text = dir.path().join("text.bvecs");
    std::fs::write(&text, "0 0 0 1.5\n").expect("write");
    refused(&text, "not a .bvecs file");
    let words = dir.path().join("words.csv");
    std::fs::write(&words, "a,b\n1,2\n3,x\n").expect("write");
    refused(&words, "line 3: value \"x\" is not a number");
    // Space-separated values without picture id, row and column: the formats vocab reads.
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "0.12573 -0.13210 0.5\n").expect("write");
    let err = fails(&["convert", "--input", s(&plain), "--out", s(&out)]);
    for want in [
        "picture_id \"0.12573\" is not an integer",
        ".npy",
        ".fvecs",
        ".csv",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    let err = fails(&[
        "kmeans",
        "--features",
        s(&plain),
        "--k",
        "1",
        "--out",
        s(&out),
    ]);
    assert!(
        err.contains(".npy (2-D float32, float64 or uint8)"),
        "{err}"
    );
    // A first line of numbers is a vector, whatever numbers (0, 1, 2 once read as pandas'
    // column names: the data's first vector was dropped); pandas' index column is refused.
    let pandas = dir.path().join("pandas.csv");
    std::fs::write(&pandas, "0,1,2\n0.5,0.25,1\n").expect("write");
    let text = dir.path().join("pandas.txt");
    ok(&["convert", "--input", s(&pandas), "--out", s(&text)]);
    assert_eq!(
        std::fs::read_to_string(&text).expect("text"),
        "0 0 0 0.0 1.0 2.0\n1 0 0 0.5 0.25 1.0\n"
    );
    std::fs::write(&pandas, ",0,1\n0,0.5,0.25\n").expect("write");
    refused(&pandas, "index=False");
    // A float64 past the float32 range is said so, not read as infinity.
    let big = dir.path().join("big.csv");
    std::fs::write(&big, "1,2e300\n").expect("write");
    refused(&big, "value 2 (2e300) is past the float32 range");
    // An empty .fvecs holds no vectors: read, and said so.
    let empty = dir.path().join("empty.fvecs");
    std::fs::write(&empty, "").expect("write");
    refused(&empty, "holds no records");
    // .bvecs out of real-valued vectors is refused before any work.
    let features = dir.path().join("f.npy");
    std::fs::copy(fixture("f32.npy"), &features).expect("copy");
    let bvecs = dir.path().join("v.bvecs");
    let err = fails(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "2",
        "--out",
        s(&bvecs),
    ]);
    assert!(
        err.contains("cannot be .bvecs") && !err.contains("iter"),
        "{err}"
    );
    assert!(!bvecs.exists());
}
