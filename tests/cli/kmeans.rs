//! `vocab partition` and `vocab kmeans` in one process: resume, bad requests.

use crate::util::*;

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

#[test]
fn approximate_kmeans_reports_its_recall_on_either_kernel_and_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let features = synth_parts(dir.path(), 3000, 16, 30, 0, 2);
    let out = dir.path().join("v.bin");
    let base = [
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "300",
        "--iterations",
        "3",
        "--out",
        s(&out),
    ];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    let summary = ok(&with(&["--assign", "approx", "--probes", "3"]));
    assert!(summary.contains("assignment approx-0-3"), "{summary}");
    assert!(
        summary.contains("approximate assignment found the exact nearest word for")
            && summary.contains("of 1000 sampled vectors"),
        "{summary}"
    );
    let meta = std::fs::read_to_string(dir.path().join("v.bin.meta.toml")).expect("meta");
    let meta: toml::Table = meta.parse().expect("toml");
    assert_eq!(meta["assignment"].as_str(), Some("approx-0-3"));
    let recall = meta["recall"].as_table().expect("recall recorded");
    assert_eq!(recall["sample"].as_integer(), Some(1000));
    let exact = recall["exact"].as_integer().expect("exact");
    assert!((500..=1000).contains(&exact), "{recall:?}");
    // The integer kernel searches the same lists: its own key, its recall measured by itself.
    let summary = ok(&with(&[
        "--assign", "approx", "--probes", "3", "--kernel", "int8",
    ]));
    assert!(summary.contains("assignment approx-0-3-int8"), "{summary}");
    let meta = std::fs::read_to_string(dir.path().join("v.bin.meta.toml")).expect("meta");
    let meta: toml::Table = meta.parse().expect("toml");
    assert_eq!(meta["assignment"].as_str(), Some("approx-0-3-int8"));
    let int8 = meta["recall"]["exact"].as_integer().expect("exact");
    assert!((500..=1000).contains(&int8), "{meta:?}");
    // An exact run records no recall.
    ok(&base);
    let meta = std::fs::read_to_string(dir.path().join("v.bin.meta.toml")).expect("meta");
    assert!(!meta.contains("recall"), "{meta}");
    // Impossible combinations are refused, naming the flag.
    for (extra, want) in [
        (
            &["--assign", "approx", "--prune"][..],
            "--prune true: bounds the exact search",
        ),
        (&["--assign", "approx", "--probes", "0"][..], "--probes 0"),
        (
            &["--lists", "4"][..],
            "--lists 4: sets up the approximate search",
        ),
    ] {
        let err = fails(&with(extra));
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let err = fails(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "70000",
        "--init",
        "kmeans++",
        "--out",
        s(&out),
    ]);
    assert!(err.contains("quadratic in k"), "{err}");
}

#[test]
fn bench_assign_times_the_exact_pass_that_kmeans_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let (features, parts) = (dir.path().join("f.bin"), dir.path().join("parts"));
    let (vocabulary, again) = (dir.path().join("v.bin"), dir.path().join("again.bin"));
    ok(&[
        "features",
        "--input",
        s(&photos),
        "--per-image",
        "10",
        "--out",
        s(&features),
    ]);
    ok(&[
        "partition",
        "--features",
        s(&features),
        "--parts",
        "3",
        "--element",
        "u8",
        "--out",
        s(&parts),
    ]);
    ok(&[
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "16",
        "--iterations",
        "2",
        "--out",
        s(&vocabulary),
    ]);
    let csv = ok(&[
        "bench",
        "assign",
        "--features",
        s(&parts),
        "--vocabulary",
        s(&vocabulary),
        "--rows",
        "1000000",
        "--kernel",
        "int8,f32",
    ]);
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert_eq!(&rows[0][..5], ["80", "16", "512", "u8", "int8"], "{csv}");
    assert_eq!(&rows[1][..5], ["80", "16", "512", "u8", "f32"], "{csv}");
    // One iteration of k-means from the same centroids assigns the same way: its inertia is the
    // int8 pass's, to the bit.
    ok(&[
        "kmeans",
        "--features",
        s(&parts),
        "--k",
        "16",
        "--iterations",
        "1",
        "--kernel",
        "int8",
        "--init-centroids",
        s(&vocabulary),
        "--out",
        s(&again),
    ]);
    let iterations = csv_rows(&dir.path().join("again.bin.iterations.csv"));
    let kmeans: f64 = iterations[0][1].parse().expect("inertia");
    let bench: f64 = rows[0][8].parse().expect("inertia");
    assert_eq!(kmeans.to_bits(), bench.to_bits(), "{kmeans} vs {bench}");
    let missing = dir.path().join("missing.bin");
    let bench = |vocabulary: &str, rows: &str| {
        fails(&[
            "bench",
            "assign",
            "--features",
            s(&parts),
            "--vocabulary",
            vocabulary,
            "--rows",
            rows,
        ])
    };
    let err = bench(s(&missing), "10");
    assert!(err.contains("missing.bin"), "{err}");
    let err = bench(s(&vocabulary), "0");
    assert!(err.contains("holds no rows"), "{err}");
}
