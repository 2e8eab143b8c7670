//! `vocab encode`: histograms against a brute-force count, its options (soft assignment, the
//! integer kernel, instruction-set caps, scales, the approximate search, mirrored photos) and
//! their checks. [`Scenes`], the labelled photo set and vocabulary these tests and `classify`'s
//! share, and [`small_mixture`] are here; VLAD and Fisher vectors are `vlad_fisher`'s.

use std::path::{Path, PathBuf};

use crate::util::*;

/// A labelled set of 24 synthetic scenes (6 of each kind, seed 4) and a 32-word vocabulary of
/// their patches (20 a photo), in a temporary folder.
pub struct Scenes {
    /// The temporary folder (removed when dropped).
    pub dir: tempfile::TempDir,
    /// The photos.
    pub photos: PathBuf,
    /// Their `labels.csv`.
    pub labels: PathBuf,
    /// The vocabulary, `vocab.bin`.
    pub vocab: PathBuf,
}

/// The vocabulary `name` in `dir` that `vocab kmeans` (with `kmeans`) makes of 20 random
/// patches per photo of `photos` (`vocab features` with `features`), through `dir/sample.bin`.
fn vocabulary(
    dir: &Path,
    photos: &Path,
    name: &str,
    features: &[&str],
    kmeans: &[&str],
) -> PathBuf {
    let sample = dir.join("sample.bin");
    let args = [
        "features",
        "--input",
        s(photos),
        "--out",
        s(&sample),
        "--per-image",
        "20",
    ];
    ok(&[&args[..], features].concat());
    let vocab = dir.join(name);
    let args = ["kmeans", "--features", s(&sample), "--out", s(&vocab)];
    ok(&[&args[..], kmeans].concat());
    vocab
}

impl Scenes {
    /// The photos, their sampled patches and the vocabulary k-means makes of them.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let photos = photo_set_of(dir.path(), 6, 4);
        let labels = photos.join("labels.csv");
        let vocab = vocabulary(
            dir.path(),
            &photos,
            "vocab.bin",
            &[],
            &["--k", "32", "--iterations", "8"],
        );
        Self {
            dir,
            photos,
            labels,
            vocab,
        }
    }

    /// The photos' Hellinger histograms, encoded into `hist.bin` (with their encoding beside).
    pub fn hellinger(&self) -> PathBuf {
        let hist = self.dir.path().join("hist.bin");
        self.hellinger_into(&hist, &[]);
        assert!(self.dir.path().join("hist.bin.encoding.json").is_file());
        hist
    }

    /// `vocab encode` of the photos into Hellinger histograms at `out`, with `extra` flags
    /// (`--mirror`: their mirror images).
    pub fn hellinger_into(&self, out: &Path, extra: &[&str]) {
        let args = [
            "encode",
            "--vocabulary",
            s(&self.vocab),
            "--input",
            s(&self.photos),
            "--out",
            s(out),
            "--norm",
            "hellinger",
        ];
        ok(&[&args[..], extra].concat());
    }

    /// The arguments of `vocab encode` of the photo set with this vocabulary into `out`, L1,
    /// plus `extra`.
    pub fn encode_args(&self, out: &Path, extra: &[&str]) -> Vec<String> {
        let base = [
            "encode",
            "--vocabulary",
            s(&self.vocab),
            "--input",
            s(&self.photos),
        ];
        let tail = ["--out", s(out), "--norm", "l1"];
        base.iter()
            .chain(&tail)
            .chain(extra)
            .map(|a| a.to_string())
            .collect()
    }

    /// [`Scenes::encode_args`] run: its output when it should succeed, its error when it should
    /// fail.
    fn encode(&self, out: &Path, extra: &[&str], succeeds: bool) -> String {
        let args = self.encode_args(out, extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        if succeeds { ok(&args) } else { fails(&args) }
    }

    /// [`Scenes::encode_args`] run, which must succeed: its output.
    pub fn encode_l1(&self, out: &Path, extra: &[&str]) -> String {
        self.encode(out, extra, true)
    }

    /// [`Scenes::encode_args`] run, which must fail: its error.
    pub fn encode_fails(&self, out: &Path, extra: &[&str]) -> String {
        self.encode(out, extra, false)
    }
}

#[test]
fn encode_counts_every_dense_patch_under_its_nearest_word() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let vocab = vocabulary(
        dir.path(),
        &photos,
        "vocab.txt",
        &["--seed", "1"],
        &["--k", "8", "--iterations", "5", "--seed", "2"],
    );
    let encode = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(&vocab),
            "--input",
            s(&photos),
            "--out",
            s(out),
            "--stride",
            "16",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let hist = dir.path().join("hist.csv");
    let out = encode(&hist, &[]);
    assert!(out.contains("encode: 8 photos, 0 skipped"), "{out}");
    let rows = csv_rows(&hist);
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| r.len() == 2 + 8));
    // Shared out to 2 loopback workers: the same histograms, byte for byte.
    let sharded = dir.path().join("hist-2.csv");
    encode(&sharded, &["--local-nodes", "2"]);
    assert!(std::fs::read(&sharded).expect("sharded") == std::fs::read(&hist).expect("local"));

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
fn soft_int8_scaled_and_approximate_encodings_are_checked_and_recorded() {
    let scenes = Scenes::new();
    let dir = &scenes.dir;
    // Soft assignment: every patch spread over its 3 nearest words; rows still sum to 1, with
    // more words present than under hard assignment; recorded for classify.
    let (hard_csv, soft_csv) = (dir.path().join("hard.csv"), dir.path().join("soft.csv"));
    scenes.encode_l1(&hard_csv, &[]);
    scenes.encode_l1(&soft_csv, &["--soft", "3", "--sharpness", "5"]);
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
    assert!(
        !recorded.contains("kernel"),
        "f32 is not recorded: {recorded}"
    );
    // The integer kernel finds the same words (by direct distance; the f32 GEMM's expansion can
    // differ on near-ties only) and is recorded for classify.
    for (f32_csv, extra) in [
        (&hard_csv, &[][..]),
        (&soft_csv, &["--soft", "3", "--sharpness", "5"][..]),
    ] {
        let int8_csv = dir.path().join("int8.csv");
        scenes.encode_l1(&int8_csv, &[extra, &["--kernel", "int8"]].concat());
        let (a, b) = (csv_rows(f32_csv), csv_rows(&int8_csv));
        assert_eq!(a.len(), b.len());
        let differing: f64 = a
            .iter()
            .zip(&b)
            .flat_map(|(x, y)| x[2..].iter().zip(&y[2..]))
            .map(|(x, y)| (x.parse::<f64>().expect("x") - y.parse::<f64>().expect("y")).abs())
            .sum();
        assert!(differing < 1e-3 * a.len() as f64, "{extra:?}: {differing}");
        let recorded =
            std::fs::read_to_string(dir.path().join("int8.csv.encoding.json")).expect("enc");
        assert!(recorded.contains(r#""kernel": "int8""#), "{recorded}");
    }
    // Every instruction-set level the machine has (VOCAB_MAX_ISA caps the kernels' choice)
    // encodes the same bytes; a bad level is named.
    let with_isa = |level: &str, out: &Path| {
        let extra = ["--soft", "3", "--kernel", "int8", "--quiet"];
        std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
            .args(scenes.encode_args(out, &extra))
            .env("VOCAB_MAX_ISA", level)
            .output()
            .expect("vocab runs")
    };
    let widest = dir.path().join("isa-widest.bin");
    assert!(with_isa("avx512", &widest).status.success());
    for level in ["portable", "avx2"] {
        let out = dir.path().join(format!("isa-{level}.bin"));
        assert!(with_isa(level, &out).status.success(), "{level}");
        assert_eq!(
            std::fs::read(&out).expect("capped"),
            std::fs::read(&widest).expect("widest"),
            "{level}"
        );
    }
    let bad = with_isa("sse9", &dir.path().join("isa-bad.bin"));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("VOCAB_MAX_ISA=\"sse9\" is not"),
        "{err}"
    );
    assert!(!dir.path().join("isa-bad.bin").exists());
    // A second scale adds the patches of the photo downscaled by 40/64 to the same histogram,
    // is recorded for classify, and a list without the base scale is refused.
    let scaled_csv = dir.path().join("scaled.csv");
    let patches = |summary: &str| -> u64 {
        let before = summary.split(" patches").next().expect("summary");
        before
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .expect(summary)
    };
    let base_patches = patches(&scenes.encode_l1(&hard_csv, &[]));
    let summary = scenes.encode_l1(&scaled_csv, &["--scales", "40,64"]);
    let (base, scaled) = (csv_rows(&hard_csv), csv_rows(&scaled_csv));
    assert_eq!(base.len(), scaled.len());
    assert!(base.iter().zip(&scaled).any(|(a, b)| a[2..] != b[2..]));
    for row in &scaled {
        let sum: f64 = row[2..]
            .iter()
            .map(|v| v.parse::<f64>().expect("value"))
            .sum();
        assert!((sum - 1.0).abs() < 1e-4, "{row:?}");
    }
    let recorded =
        std::fs::read_to_string(dir.path().join("scaled.csv.encoding.json")).expect("enc");
    assert!(recorded.contains(r#""scales": ["#), "{recorded}");
    // Every scale's patches are counted: the coarse scale adds about 40% (1 / 1.6^2).
    let more = patches(&summary) as f64 / base_patches as f64;
    assert!((1.2..1.5).contains(&more), "{summary}");
    let err = scenes.encode_fails(&scaled_csv, &["--scales", "64,40"]);
    assert!(
        err.contains("--scales 64,40: must be 40 followed by"),
        "{err}"
    );
    let err = scenes.encode_fails(&soft_csv, &["--soft", "1"]);
    assert!(err.contains("--soft 1"), "{err}");
    // The approximate word search: probing every list is the exact search (the same
    // histograms), it is recorded for classify, and it finds the nearest word only, in f32.
    let approx_csv = dir.path().join("approx.csv");
    scenes.encode_l1(
        &approx_csv,
        &["--assign", "approx", "--lists", "3", "--probes", "3"],
    );
    assert_eq!(csv_rows(&approx_csv), csv_rows(&hard_csv));
    let recorded =
        std::fs::read_to_string(dir.path().join("approx.csv.encoding.json")).expect("enc");
    assert!(
        recorded.contains(r#""approx": {"#) && recorded.contains(r#""probes": 3"#),
        "{recorded}"
    );
    for (extra, want) in [
        (
            &["--assign", "approx", "--soft", "3"][..],
            "--assign approx: finds each patch's nearest word only",
        ),
        (
            &["--assign", "approx", "--kernel", "int8"][..],
            "--kernel int8: is a kernel of the exact search",
        ),
        (
            &["--lists", "3"][..],
            "--lists 3: sets up the approximate search",
        ),
    ] {
        let err = scenes.encode_fails(&approx_csv, extra);
        assert!(err.contains(want), "{extra:?}: {err}");
    }
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

/// `dir/gmm.json`: 3 Gaussians over 8 principal components of `dir/f.bin` ([`sample_of`]).
pub fn small_mixture(dir: &Path) -> PathBuf {
    let mixture = dir.join("gmm.json");
    ok(&[
        "mixture",
        "--features",
        s(&dir.join("f.bin")),
        "--components",
        "3",
        "--pca-dims",
        "8",
        "--out",
        s(&mixture),
    ]);
    mixture
}

#[test]
fn a_patch_side_is_kept_in_the_encodings_record() {
    let scenes = Scenes::new();
    let d = scenes.dir.path();
    let record = |name: &str, extra: &[&str]| {
        let out = d.join(name);
        ok(&strs(&scenes.encode_args(&out, extra)));
        std::fs::read_to_string(d.join(format!("{name}.encoding.json"))).expect("record")
    };
    let plain = record("plain.bin", &[]);
    assert!(!plain.contains("patch"), "{plain}");
    // 40 px is the photo as it is: the same record as no patch side.
    assert_eq!(record("forty.bin", &["--patch", "40"]), plain);
    let small = record("small.bin", &["--patch", "24"]);
    assert!(small.contains("\"patch\": 24"), "{small}");
}

#[test]
fn mirrored_photos_encode_as_their_mirror_images_here_and_sharded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 4, 4);
    let path = |name: &str| dir.path().join(name);
    // The set's PNG photos (vocab decodes JPEG with libjpeg, not the image crate), and the same
    // photos mirrored left to right under the same names.
    let mirrored = path("mirrored");
    let rows: Vec<Vec<String>> = (csv_rows(&photos.join("labels.csv")).into_iter())
        .filter(|r| r[0].ends_with(".png"))
        .collect();
    let labels = path("png.csv");
    let listed: String = rows.iter().map(|r| format!("{}\n", r[0])).collect();
    std::fs::write(&labels, format!("path\n{listed}")).expect("labels");
    for row in &rows {
        let img = image::open(photos.join(&row[0])).expect("photo");
        let to = mirrored.join(&row[0]);
        std::fs::create_dir_all(to.parent().expect("folder")).expect("mkdir");
        img.fliph().save(&to).expect("save");
    }
    assert_eq!(rows.len(), 8);
    sample_of(dir.path(), &photos);
    let mixture = small_mixture(dir.path());
    let vocabulary = path("v.bin");
    let features = path("f.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "6",
        "--out",
        s(&vocabulary),
    ]);
    let encode = |words: &Path, input: &Path, out: &str, extra: &[&str]| {
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(words),
            "--input",
            s(input),
            "--stride",
            "12",
            "--pyramid",
            "2",
            "--labels",
            s(&labels),
            "--out",
        ];
        let out = path(out);
        args.push(s(&out));
        args.extend(extra);
        let said = ok(&args);
        (std::fs::read(&out).expect("histograms"), said)
    };
    let read = |name: &str| std::fs::read_to_string(path(name)).expect("file");
    for (words, method) in [(&vocabulary, "bow"), (&mixture, "fisher")] {
        let m = ["--method", method];
        let (plain, _) = encode(words, &photos, &format!("{method}.bin"), &m);
        let (files, _) = encode(words, &mirrored, &format!("{method}-files.bin"), &m);
        let with = [&m[..], &["--mirror"]].concat();
        let name = format!("{method}-m.bin");
        let (flag, said) = encode(words, &photos, &name, &with);
        assert!(said.contains("8 photos mirrored"), "{said}");
        assert_eq!(flag, files, "{method}: --mirror encodes the mirror images");
        assert_ne!(flag, plain, "{method}: mirroring changes the histograms");
        assert_eq!(
            read(&format!("{name}.images.csv")),
            read(&format!("{method}.bin.images.csv"))
        );
        let record = read(&format!("{name}.encoding.json"));
        assert!(record.contains("\"mirror\": true"), "{record}");
        assert!(!read(&format!("{method}.bin.encoding.json")).contains("mirror"));
        // Two loopback workers mirror alike.
        let sharded = [&with[..], &["--local-nodes", "2"]].concat();
        let (shards, _) = encode(words, &photos, &format!("{method}-m2.bin"), &sharded);
        assert_eq!(shards, flag, "{method}: sharded");
    }
}
