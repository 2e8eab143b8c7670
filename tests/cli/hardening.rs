//! The second hardening round (issue 37): outputs never destroy inputs, bounds named in their
//! messages.

use std::path::Path;

use crate::util::*;

/// Every file below `dir`, sorted (entries that vanish while it walks are left out).
fn files_below(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<std::path::PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    all.sort();
    all
}

/// Every file below `dir`, with its bytes, sorted by path.
fn snapshot(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    (files_below(dir).into_iter())
        .map(|p| {
            let bytes = std::fs::read(&p).expect("read");
            (p, bytes)
        })
        .collect()
}

#[test]
fn an_output_that_is_an_input_is_refused_naming_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set(d);
    let labels = photos.join("labels.csv");
    let feats = d.join("b.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "400",
        "--dims",
        "8",
        "--clusters",
        "4",
        "--out",
        s(&feats),
    ]);
    let voc = d.join("voc.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&feats),
        "--k",
        "4",
        "--out",
        s(&voc),
    ]);
    let parts = d.join("parts");
    ok(&[
        "partition",
        "--features",
        s(&feats),
        "--parts",
        "4",
        "--out",
        s(&parts),
    ]);
    let hog_voc = d.join("hog-voc.bin");
    let hog = d.join("hog.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--per-image",
        "20",
        "--out",
        s(&hog),
    ]);
    ok(&[
        "kmeans",
        "--features",
        s(&hog),
        "--k",
        "4",
        "--out",
        s(&hog_voc),
    ]);
    let hist = d.join("hist.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&hog_voc),
        "--input",
        s(&photos),
        "--out",
        s(&hist),
    ]);
    let model = d.join("m.json");
    ok(&[
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
        s(&model),
    ]);
    let before = snapshot(d);
    let city = photos.join("city").join("city_000.png");
    let part0 = parts.join("part-0000.bin");
    let voc_link = d.join("voc-link.bin");
    std::fs::hard_link(&voc, &voc_link).expect("hard link");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![
                "kmeans",
                "--features",
                s(&feats),
                "--k",
                "4",
                "--out",
                s(&feats),
            ],
            format!("--out {}: is the input --features {}", s(&feats), s(&feats)),
        ),
        (
            vec!["features", "--input", s(&photos), "--out", s(&city)],
            format!("lies inside the input folder --input {}", s(&photos)),
        ),
        (
            vec![
                "encode",
                "--vocabulary",
                s(&hog_voc),
                "--input",
                s(&photos),
                "--out",
                s(&hog_voc),
            ],
            format!("is the input --vocabulary {}", s(&hog_voc)),
        ),
        (
            vec![
                "encode",
                "--vocabulary",
                s(&voc_link),
                "--input",
                s(&photos),
                "--out",
                s(&voc),
            ],
            format!("is the input --vocabulary {}", s(&voc_link)),
        ),
        (
            vec![
                "train",
                "--histograms",
                s(&hist),
                "--labels",
                s(&labels),
                "--attribute",
                "urbanicity",
                "--out",
                s(&hist),
            ],
            format!("is the input --histograms {}", s(&hist)),
        ),
        (
            vec![
                "train",
                "--histograms",
                s(&hist),
                "--labels",
                s(&labels),
                "--attribute",
                "urbanicity",
                "--out",
                s(&labels),
            ],
            format!("is the input --labels {}", s(&labels)),
        ),
        (
            vec![
                "classify",
                "--model",
                s(&model),
                "--input",
                s(&photos),
                "--out",
                s(&model),
            ],
            format!("is the input --model {}", s(&model)),
        ),
        (
            vec![
                "partition",
                "--features",
                s(&part0),
                "--parts",
                "2",
                "--out",
                s(&parts),
            ],
            format!("holds the input --features {}", s(&part0)),
        ),
        (
            vec!["convert", "--input", s(&feats), "--out", s(&feats)],
            format!("is the input --input {}", s(&feats)),
        ),
        (
            vec!["datasets", "photos", "--out", s(&photos)],
            "already holds files".to_string(),
        ),
        (
            vec![
                "kmeans",
                "--features",
                s(&feats),
                "--k",
                "4",
                "--out",
                s(&parts),
            ],
            "is an existing folder".to_string(),
        ),
        (
            vec!["partition", "--features", s(&feats), "--out", s(&voc)],
            "is an existing file".to_string(),
        ),
    ];
    for (args, want) in cases {
        let err = fails(&args);
        assert!(err.contains(&want), "{args:?}: {err}");
    }
    std::fs::remove_file(&voc_link).expect("rm link");
    assert!(snapshot(d) == before, "an input changed");
}

#[test]
fn thread_counts_past_the_bound_are_refused() {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let err = fails(&["--threads", "100000", "config", "check", config]);
    assert!(
        err.contains("--threads 100000: must be at most 1024 threads"),
        "{err}"
    );
}

/// Runs vocab for at most `secs` seconds: its stderr, or a timeout named as a failure.
fn fails_within(args: &[&str], secs: u64) -> String {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("vocab starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            let mut pipe = child.stderr.take().expect("stderr");
            pipe.read_to_string(&mut err).expect("stderr text");
            assert!(!status.success(), "vocab {args:?} should fail");
            return err;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vocab {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A photo set, its vocabulary, histograms and a model of `kind` trained on class names that
/// need quoting: (photos, histograms, labels, model).
fn odd_model(
    d: &Path,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    let photos = photo_set(d);
    let feats = d.join("f.bin");
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--per-image",
        "20",
        "--out",
        s(&feats),
    ]);
    let voc = d.join("voc.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&feats),
        "--k",
        "4",
        "--out",
        s(&voc),
    ]);
    let hist = d.join("hist.bin");
    ok(&[
        "encode",
        "--vocabulary",
        s(&voc),
        "--input",
        s(&photos),
        "--out",
        s(&hist),
    ]);
    let names = [
        ("city", "ci,ty"),
        ("field", "fi\"eld"),
        ("hilltown", "hill|town"),
        ("mountain", "moun\ntain"),
    ];
    let mut out = csv::Writer::from_path(d.join("odd.csv")).expect("labels");
    out.write_record(["path", "kind"]).expect("header");
    for row in csv_rows(&photos.join("labels.csv")).iter().skip(1) {
        let odd = names.iter().find(|(k, _)| *k == row[1]).expect("kind").1;
        out.write_record([row[0].as_str(), odd]).expect("row");
    }
    out.flush().expect("flush");
    let labels = d.join("odd.csv");
    let model = d.join("m.json");
    ok(&[
        "train",
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
        "--attribute",
        "kind",
        "--c",
        "1",
        "--out",
        s(&model),
    ]);
    (photos, hist, labels, model)
}

#[test]
fn names_that_need_quoting_keep_csv_and_markdown_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (photos, hist, labels, model) = odd_model(d);
    ok(&[
        "evaluate",
        "--model",
        s(&model),
        "--histograms",
        s(&hist),
        "--labels",
        s(&labels),
    ]);
    let md = std::fs::read_to_string(d.join("m.json.metrics.md")).expect("metrics.md");
    // Every row of the confusion table has the header's cells: 1 + 4 classes.
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("town"))
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    for row in rows {
        let cells = row.replace("\\|", "").matches('|').count();
        assert_eq!(cells, 6, "{row}");
    }
    let metrics = csv_rows(&d.join("m.json.metrics.csv"));
    assert!(
        metrics
            .iter()
            .any(|r| r[0] == "confusion ci,ty -> moun\ntain"),
        "{metrics:?}"
    );
    // Photos named with a comma and quote, and with a newline.
    let odd = d.join("odd");
    std::fs::create_dir(&odd).expect("mkdir");
    std::fs::copy(photos.join("city/city_000.jpg"), odd.join("a,b\"c.jpg")).expect("copy");
    std::fs::copy(photos.join("field/field_001.png"), odd.join("x\ny.png")).expect("copy");
    let out = d.join("labelled.csv");
    ok(&[
        "classify",
        "--model",
        s(&model),
        "--input",
        s(&odd),
        "--out",
        s(&out),
    ]);
    let rows = csv_rows(&out);
    let paths: Vec<&str> = rows.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(paths, ["a,b\"c.jpg", "x\ny.png"]);
    assert!(rows.iter().all(|r| r.len() == 4), "{rows:?}");
}

#[test]
fn a_model_is_checked_before_it_is_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (photos, hist, labels, model) = odd_model(d);
    let base: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&model).expect("model")).expect("json");
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(s(&fifo)).expect("c path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    type Edit = fn(&mut serde_json::Value, &Path);
    let cases: [(&str, Edit, &str); 7] = [
        (
            "one class",
            |m, _| m["classifier"]["classes"] = serde_json::json!(["urban"]),
            "1 classes",
        ),
        (
            "an extra model",
            |m, _| {
                let first = m["classifier"]["models"][0].clone();
                m["classifier"]["models"]
                    .as_array_mut()
                    .expect("models")
                    .push(first);
            },
            "5 models for 4 classes",
        ),
        (
            "huge k",
            |m, _| m["encoding"]["k"] = serde_json::json!(1u64 << 40),
            "the model's encoding makes",
        ),
        (
            "pyramid 13",
            |m, _| m["encoding"]["pyramid"] = serde_json::json!(13),
            "pyramid = 13",
        ),
        (
            "no soft words",
            |m, _| m["encoding"]["soft"] = serde_json::json!({"words": 0, "sharpness": 1.0}),
            "soft = 0",
        ),
        (
            "a FIFO vocabulary",
            |m, d| m["encoding"]["vocabulary"] = serde_json::json!(d.join("fifo")),
            "is a FIFO",
        ),
        (
            "a device vocabulary",
            |m, _| m["encoding"]["vocabulary"] = serde_json::json!("/dev/zero"),
            "is a device",
        ),
    ];
    for (what, edit, want) in cases {
        let mut m = base.clone();
        edit(&mut m, d);
        let bad = d.join("bad.json");
        std::fs::write(&bad, m.to_string()).expect("write");
        let out = d.join("out.csv");
        let err = fails_within(
            &[
                "classify",
                "--model",
                s(&bad),
                "--input",
                s(&photos),
                "--out",
                s(&out),
            ],
            30,
        );
        assert!(err.contains(want), "{what}: {err}");
        assert!(!err.contains("panicked"), "{what}: {err}");
        if !what.contains("vocabulary") {
            let err = fails_within(
                &[
                    "evaluate",
                    "--model",
                    s(&bad),
                    "--histograms",
                    s(&hist),
                    "--labels",
                    s(&labels),
                ],
                30,
            );
            assert!(err.contains(want), "{what}, evaluate: {err}");
        }
    }
    // A model file that is itself a FIFO.
    let err = fails_within(
        &[
            "classify",
            "--model",
            s(&fifo),
            "--input",
            s(&photos),
            "--out",
            s(&d.join("o.csv")),
        ],
        30,
    );
    assert!(err.contains("is a FIFO"), "{err}");
}

#[test]
fn no_secret_of_a_loopback_run_reaches_the_disk_even_when_killed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let feats = d.join("f.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "20000",
        "--dims",
        "16",
        "--clusters",
        "8",
        "--out",
        s(&feats),
    ]);
    let parts = d.join("parts");
    ok(&[
        "partition",
        "--features",
        s(&feats),
        "--parts",
        "4",
        "--out",
        s(&parts),
    ]);
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args([
            "--quiet",
            "kmeans",
            "--features",
            s(&parts),
            "--k",
            "64",
            "--iterations",
            "1000",
        ])
        .args([
            "--tol",
            "0",
            "--local-nodes",
            "2",
            "--out",
            s(&d.join("v.bin")),
        ])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("vocab starts");
    // Until the workers are up (their cluster file written), then kill -9.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !files_below(&tmp)
        .iter()
        .any(|p| p.ends_with("cluster.toml"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no cluster file in 60 s"
        );
        assert!(
            run.try_wait().expect("wait").is_none(),
            "the run ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // While the workers run, and after the run is killed (or, had it finished, ended): no
    // secret on disk.
    let no_secret = |when: &str| {
        for p in files_below(&tmp) {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            assert!(
                !p.ends_with("secret") && !text.contains("secret"),
                "{when}: {}: {text}",
                p.display()
            );
        }
    };
    no_secret("running");
    std::thread::sleep(std::time::Duration::from_millis(300));
    no_secret("running");
    let _ = run.kill();
    run.wait().expect("reaped");
    no_secret("killed");
}

#[test]
fn a_secret_that_is_a_fifo_or_guessable_is_refused_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (cluster, _) = cluster_file(d, "c", 1, 0);
    let secret = d.join("secret");
    std::fs::remove_file(&secret).expect("rm");
    let c = std::ffi::CString::new(s(&secret)).expect("c path");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let err = fails_within(&["cluster", "status", "--cluster", s(&cluster)], 30);
    assert!(err.contains("is a FIFO"), "{err}");
    std::fs::remove_file(&secret).expect("rm");
    std::fs::write(&secret, "passwordpasswordpassword\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("mode");
    let err = fails_within(&["cluster", "status", "--cluster", s(&cluster)], 30);
    assert!(
        err.contains("bits of entropy") && err.contains("/dev/urandom"),
        "{err}"
    );
}

/// `n` rows of `dims` values in 3 clusters at `scale` (cluster c near c * scale).
fn clusters_at(path: &Path, scale: f64, n: usize, dims: usize) {
    let mut text = String::new();
    for i in 0..n {
        let c = (i % 3) as f64;
        text.push_str(&format!("{i} 0 0"));
        for d in 0..dims {
            let jitter = ((i * 31 + d * 17) % 11) as f64 / 11.0 - 0.5;
            text.push_str(&format!(" {:e}", scale * (c + 0.01 * jitter)));
        }
        text.push('\n');
    }
    std::fs::write(path, text).expect("write");
}

#[test]
fn values_of_any_magnitude_give_a_correct_result_or_a_refusal_naming_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let assignments: [&[&str]; 4] = [
        &[],
        &["--prune"],
        &["--kernel", "int8"],
        &["--assign", "approx"],
    ];
    for (scale, name, line) in [(1e20, "big.txt", 2), (3e38, "huge.txt", 1)] {
        let data = d.join(name);
        clusters_at(&data, scale, 300, 8);
        let parts = d.join(format!("{name}.parts"));
        let err = fails(&[
            "partition",
            "--features",
            s(&data),
            "--parts",
            "2",
            "--out",
            s(&parts),
        ]);
        assert!(
            err.contains(&format!("{name}: line {line}: value 1")) && err.contains("rescale"),
            "{err}"
        );
        for extra in assignments {
            let mut args = vec!["kmeans", "--features", s(&data), "--k", "3", "--out"];
            let out = d.join("v.txt");
            args.push(s(&out));
            args.extend_from_slice(extra);
            let err = fails(&args);
            assert!(
                err.contains(&format!("{name}: line {line}: value 1")),
                "{extra:?}: {err}"
            );
            assert!(!err.contains("panicked"), "{extra:?}: {err}");
        }
    }
    // Within the bound: finite inertia and the three clusters found, on every assignment.
    let data = d.join("b17.txt");
    clusters_at(&data, 1e17, 300, 8);
    for extra in assignments {
        let out = d.join("v17.txt");
        let mut args = vec![
            "kmeans",
            "--features",
            s(&data),
            "--k",
            "3",
            "--seed",
            "1",
            "--out",
            s(&out),
        ];
        args.extend_from_slice(extra);
        let text = ok(&args);
        assert!(!text.contains("inf"), "{extra:?}: {text}");
        let mut firsts: Vec<f64> = std::fs::read_to_string(&out)
            .expect("vocabulary")
            .lines()
            .map(|l| {
                l.split_whitespace()
                    .next()
                    .expect("value")
                    .parse()
                    .expect("number")
            })
            .collect();
        firsts.sort_by(f64::total_cmp);
        for (c, got) in firsts.iter().enumerate() {
            let want = c as f64 * 1e17;
            assert!(
                (got - want).abs() < 1e15,
                "{extra:?}: centroid {c} at {got:e}"
            );
        }
    }
    // A vocabulary with one value past the bound: refused naming the word.
    let photos = photo_set(d);
    let voc = d.join("bad-voc.txt");
    let mut words: Vec<String> = (0..4)
        .map(|w| vec![format!("{}", w as f32 / 8.0); 512].join(" "))
        .collect();
    words[2] = words[2].replacen("0.25", "1e38", 1);
    std::fs::write(&voc, words.join("\n") + "\n").expect("write");
    let hist = d.join("h.bin");
    for extra in [&[][..], &["--assign", "approx"]] {
        let mut args = vec![
            "encode",
            "--vocabulary",
            s(&voc),
            "--input",
            s(&photos),
            "--out",
            s(&hist),
        ];
        args.extend_from_slice(extra);
        let err = fails(&args);
        assert!(
            err.contains("bad-voc.txt: line 3: value 1 (1e38) exceeds"),
            "{extra:?}: {err}"
        );
    }
}

#[test]
fn a_work_directory_inside_the_photo_folder_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set_of(dir.path(), 12, 7);
    let before = snapshot(&photos);
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/configs/quickstart.toml");
    let work = photos.join("work");
    let err = fails(&["run", config, "--dataset", s(&photos), "--work", s(&work)]);
    assert!(
        err.contains("lies inside the input folder --dataset") && err.contains(s(&work)),
        "{err}"
    );
    assert!(snapshot(&photos) == before && !work.exists());
}

/// A gray PNG of `width x height` noise, its pixels in stored (uncompressed) deflate blocks.
fn gray_png(path: &Path, width: u32, height: u32) {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut raw = Vec::with_capacity((width as usize + 1) * height as usize);
    let mut state = 0x2545_f491_u32;
    for _ in 0..height {
        let row = (0..width).map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8
        });
        raw.extend(std::iter::once(0).chain(row)); // filter byte: none
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    let mut z = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65535).collect();
    for (i, block) in blocks.iter().enumerate() {
        z.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        z.extend_from_slice(&len.to_le_bytes());
        z.extend_from_slice(&(!len).to_le_bytes());
        z.extend_from_slice(block);
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &z);
    chunk(&mut png, b"IEND", &[]);
    std::fs::write(path, png).expect("png");
}

/// Runs vocab to completion; its peak resident memory in bytes.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which gives its resource usage too"
)]
fn peak_memory(args: &[&str]) -> u64 {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("vocab starts");
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: a child of this process, waited for once; status and usage are valid outputs.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "vocab {args:?} failed"
    );
    usage.ru_maxrss as u64 * 1024
}

#[test]
fn a_large_photo_is_encoded_within_its_stated_memory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = d.join("big");
    std::fs::create_dir(&photos).expect("mkdir");
    // 4,000 x 3,000: 12 Mpix, 186,000 patches at stride 8 (380 MB of descriptors at once).
    gray_png(&photos.join("noise.png"), 4000, 3000);
    let feats = d.join("f.bin");
    ok(&[
        "datasets",
        "synth",
        "--n",
        "200",
        "--dims",
        "512",
        "--clusters",
        "4",
        "--out",
        s(&feats),
    ]);
    let voc = d.join("voc.bin");
    ok(&[
        "kmeans",
        "--features",
        s(&feats),
        "--k",
        "16",
        "--out",
        s(&voc),
    ]);
    let hist = d.join("h.bin");
    let peak = peak_memory(&[
        "--threads",
        "1",
        "encode",
        "--vocabulary",
        s(&voc),
        "--input",
        s(&photos),
        "--max-pixels",
        "12",
        "--out",
        s(&hist),
    ]);
    // The stated figure: 12 bytes a pixel of the 12 Mpix limit, a strip, the patches' words.
    let bound = 12_000_000 * 12 + 8 * 1024 * 1024 + 186_000 * 24 + 64 * 1024 * 1024;
    assert!(peak < bound, "peak {peak} bytes, bound {bound}");
    assert_eq!(csv_rows(&d.join("h.bin.images.csv")).len(), 1);
}

#[test]
fn config_check_names_the_config_whatever_check_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("c.toml");
    for (text, want) in [
        (
            "[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n[classify]\nattributes = [\"urbinicity\"]\n",
            "has no column \"urbinicity\"",
        ),
        (
            "[dataset]\nsynthetic = { per_kind = 2 }\n[features]\nper_image = 5\n[kmeans]\nk = [128]\n",
            "larger than the vocabulary's sample",
        ),
    ] {
        std::fs::write(&config, text).expect("write");
        let err = fails(&["config", "check", s(&config)]);
        assert!(
            err.contains(&format!("invalid config {}", s(&config))) && err.contains(want),
            "{err}"
        );
    }
}
