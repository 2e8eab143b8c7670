//! `vocab encode --method vlad` and `--method fisher`: vectors of unit length, the same bytes on
//! loopback workers, recorded for `classify` and classified alike, and the settings they cannot
//! take refused before any photo is read.

use crate::encode::small_mixture;
use crate::util::*;

#[test]
fn vlad_vectors_are_unit_length_sharded_alike_recorded_and_classified_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 3, 4);
    let path = |name: &str| dir.path().join(name);
    sample_of(dir.path(), &photos);
    let vocabulary = path("v.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&path("f.bin")),
        "--k",
        "4",
        "--seed",
        "1",
        "--out",
        s(&vocabulary),
    ]);
    let encode = |out: &str, extra: &[&str]| {
        let out = path(out);
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(&vocabulary),
            "--input",
            s(&photos),
            "--stride",
            "16",
            "--method",
            "vlad",
            "--out",
            s(&out),
        ];
        args.extend(extra);
        ok(&args)
    };
    let said = encode("vlad.bin", &["--pyramid", "2", "--soft", "2"]);
    // 4 words x 512 values x 5 cells, each vector of unit length.
    assert!(said.contains("10240 values each"), "{said}");
    let text = path("vlad.txt");
    ok(&[
        "convert",
        "--input",
        s(&path("vlad.bin")),
        "--out",
        s(&text),
    ]);
    let rows: Vec<Vec<f64>> = std::fs::read_to_string(&text)
        .expect("text")
        .lines()
        .map(|l| {
            l.split(' ')
                .skip(3)
                .map(|v| v.parse().expect("value"))
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 12);
    for row in &rows {
        assert_eq!(row.len(), 10240);
        let norm: f64 = row.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert!(row.iter().any(|&v| v < 0.0), "signed");
    }
    // Two loopback workers: the same bytes; the record names the method.
    encode(
        "vlad-2.bin",
        &["--pyramid", "2", "--soft", "2", "--local-nodes", "2"],
    );
    assert_eq!(
        std::fs::read(path("vlad.bin")).expect("a"),
        std::fs::read(path("vlad-2.bin")).expect("b")
    );
    let record = std::fs::read_to_string(path("vlad.bin.encoding.json")).expect("record");
    assert!(record.contains("\"method\": \"vlad\""), "{record}");
    // A linear SVM trains on them; kernel maps (for histograms) are refused.
    let labels = photos.join("labels.csv");
    let (histograms, model) = (path("vlad.bin"), path("m.json"));
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--histograms",
            s(&histograms),
            "--labels",
            s(&labels),
            "--attribute",
            "urbanicity",
            "--out",
            s(&model),
        ];
        args.extend(extra);
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let args = train(&["--kernel-map", "chi2"]);
    let err = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        err.contains("holds vlad vectors") && err.contains("drop the kernel map"),
        "{err}"
    );
    let args = train(&[]);
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // classify encodes new photos as the model's were: VLAD, from the record.
    let new = photo_set_of(&path("new"), 1, 77);
    let out = path("labelled.csv");
    let said = ok(&[
        "classify",
        "--model",
        s(&path("m.json")),
        "--input",
        s(&new),
        "--out",
        s(&out),
    ]);
    assert!(said.contains("4 photos labelled"), "{said}");
    let large = path("v64.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&path("f.bin")),
        "--k",
        "64",
        "--seed",
        "1",
        "--out",
        s(&large),
    ]);
    // Too many values a photo (64 words x 512 x 341 cells), and text lines past what the text
    // reader takes (688,128 values), are refused before any photo is read.
    for (pyramid, out, want) in [
        (
            "5",
            "long.bin",
            "--method vlad: over 64 words and 5 pyramid levels (and any strips) gives 11173888",
        ),
        (
            "3",
            "long.txt",
            "688128 values a photo can make a text line longer",
        ),
    ] {
        let err = fails(&[
            "encode",
            "--vocabulary",
            s(&large),
            "--input",
            s(&photos),
            "--method",
            "vlad",
            "--pyramid",
            pyramid,
            "--out",
            s(&path(out)),
        ]);
        assert!(err.contains(want), "{err}");
        assert!(!path(out).exists());
    }
}

#[test]
fn fisher_vectors_are_unit_length_sharded_alike_recorded_and_classified_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 3, 4);
    let path = |name: &str| dir.path().join(name);
    sample_of(dir.path(), &photos);
    let mixture = small_mixture(dir.path());
    let encode = |out: &str, extra: &[&str]| {
        let out = path(out);
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(&mixture),
            "--input",
            s(&photos),
            "--stride",
            "16",
            "--method",
            "fisher",
            "--out",
            s(&out),
        ];
        args.extend(extra);
        ok(&args)
    };
    let said = encode("fv.bin", &["--pyramid", "2"]);
    // 3 Gaussians x 2 x 8 values x 5 cells, each vector of unit length.
    assert!(
        said.contains("over 3 Gaussians") && said.contains("240 values each"),
        "{said}"
    );
    let text = path("fv.txt");
    ok(&["convert", "--input", s(&path("fv.bin")), "--out", s(&text)]);
    let rows: Vec<Vec<f64>> = std::fs::read_to_string(&text)
        .expect("text")
        .lines()
        .map(|l| {
            (l.split(' ').skip(3))
                .map(|v| v.parse().expect("value"))
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 12);
    for row in &rows {
        assert_eq!(row.len(), 240);
        let norm: f64 = row.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert!(row.iter().any(|&v| v < 0.0), "signed");
    }
    // Two loopback workers: the same bytes; the record names the method and its dims.
    encode("fv-2.bin", &["--pyramid", "2", "--local-nodes", "2"]);
    assert_eq!(
        std::fs::read(path("fv.bin")).expect("a"),
        std::fs::read(path("fv-2.bin")).expect("b")
    );
    let record = std::fs::read_to_string(path("fv.bin.encoding.json")).expect("record");
    assert!(
        record.contains("\"method\": \"fisher\"") && record.contains("\"projected\": 8"),
        "{record}"
    );
    // A linear SVM trains on them; classify encodes new photos alike, from the record.
    let labels = photos.join("labels.csv");
    ok(&[
        "train",
        "--histograms",
        s(&path("fv.bin")),
        "--labels",
        s(&labels),
        "--attribute",
        "urbanicity",
        "--out",
        s(&path("m.json")),
    ]);
    let new = photo_set_of(&path("new"), 1, 77);
    let said = ok(&[
        "classify",
        "--model",
        s(&path("m.json")),
        "--input",
        s(&new),
        "--out",
        s(&path("labelled.csv")),
    ]);
    assert!(said.contains("4 photos labelled"), "{said}");
    // Refused before any photo is read: a word search's settings, a vocabulary of words for
    // Fisher vectors, a mixture for another method, --norm.
    let vocabulary = path("v.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&path("f.bin")),
        "--k",
        "3",
        "--out",
        s(&vocabulary),
    ]);
    for (words, extra, want) in [
        (
            &mixture,
            &["--method", "fisher", "--soft", "2"][..],
            "--method fisher: weighs every component by its posterior: drop soft",
        ),
        (
            &mixture,
            &["--method", "fisher", "--kernel", "int8"][..],
            "--method fisher: searches no word",
        ),
        (
            &mixture,
            &["--method", "fisher", "--norm", "hellinger"][..],
            "--norm hellinger: does not apply to VLAD or Fisher vectors",
        ),
        (
            &vocabulary,
            &["--method", "fisher"][..],
            "Fisher vectors encode over a mixture (vocab mixture)",
        ),
        (
            &mixture,
            &["--method", "vlad"][..],
            "gmm.json is a mixture (vocab mixture): it encodes Fisher vectors",
        ),
    ] {
        let out = path("refused.bin");
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(words),
            "--input",
            s(&photos),
            "--out",
            s(&out),
        ];
        args.extend(extra);
        let err = fails(&args);
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!out.exists());
    }
}
