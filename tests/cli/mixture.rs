//! `vocab mixture`: the file one process writes, the same bytes on loopback workers and from a
//! feature file read into memory in one slice; the refusals.

use crate::util::*;

fn mixture(features: &std::path::Path, out: &std::path::Path, more: &[&str]) -> String {
    let mut args = vec![
        "mixture",
        "--features",
        s(features),
        "--components",
        "5",
        "--pca-dims",
        "6",
        "--iterations",
        "6",
        "--tol",
        "0",
        "--seed",
        "4",
        "--out",
        s(out),
    ];
    args.extend_from_slice(more);
    ok(&args)
}

#[test]
fn a_mixture_is_the_same_bytes_on_one_process_and_on_workers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = synth_parts(dir.path(), 3000, 24, 9, 5, 5);
    let one = dir.path().join("one.json");
    let log = mixture(&parts, &one, &[]);
    assert!(
        log.contains("3000 vectors x 24 dims") && log.contains("6 EM steps in"),
        "{log}"
    );
    let workers = dir.path().join("workers.json");
    let log = mixture(
        &parts,
        &workers,
        &["--local-nodes", "2", "--broadcast", "mst"],
    );
    assert!(log.contains("on 2 workers"), "{log}");
    let read = |p: &std::path::Path| std::fs::read(p).expect("read");
    assert!(read(&one) == read(&workers), "the workers' mixture differs");

    // The file: its parts, the log-likelihood rising step by step, the steps' table beside it.
    let file: serde_json::Value = serde_json::from_slice(&read(&one)).expect("json");
    assert_eq!(file["format"], "vocab-mixture");
    assert_eq!(file["gmm"]["weights"].as_array().map(Vec::len), Some(5));
    assert_eq!(file["pca"]["mean"].as_array().map(Vec::len), Some(24));
    let lls: Vec<f64> = (file["log_likelihood"].as_array().expect("steps").iter())
        .filter_map(serde_json::Value::as_f64)
        .collect();
    assert_eq!(lls.len(), 6);
    assert!(lls.windows(2).all(|w| w[1] >= w[0] - 1e-9), "{lls:?}");
    let steps = csv_rows(&dir.path().join("one.json.steps.csv"));
    assert_eq!(steps.len(), 7);
    assert_eq!(steps[0][0], "pca");
}

#[test]
fn bad_mixture_requests_are_refused_naming_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = synth_parts(dir.path(), 200, 8, 3, 1, 2);
    let out = dir.path().join("m.json");
    let base = |extra: &[&'static str]| {
        let mut args = vec!["mixture", "--features", s(&parts), "--out", s(&out)];
        args.extend_from_slice(extra);
        fails(&args)
    };
    for (extra, said) in [
        (
            &["--components", "0"][..],
            "--components 0: must be 1 to 4096",
        ),
        (&["--reg", "0"][..], "--reg 0: must be above 0"),
        (
            &["--iterations", "0"][..],
            "--iterations 0: must be at least 1",
        ),
        (
            &["--order", "auto"][..],
            "orders the chain of a distributed run",
        ),
        (
            &["--components", "300", "--pca-dims", "4"][..],
            "--components 300: must be at most the vectors there are (200)",
        ),
        (
            &["--pca-dims", "9", "--components", "2"][..],
            "--pca-dims 9: must be at most the values per vector (8)",
        ),
    ] {
        let err = base(extra);
        assert!(err.contains(said), "{extra:?}: {err}");
    }
    assert!(!out.exists(), "a refused run wrote its output");
    // The output may not be an input.
    let err = fails(&["mixture", "--features", s(&parts), "--out", s(&parts)]);
    assert!(err.contains("out"), "{err}");
}

#[test]
fn a_mixture_killed_after_an_em_step_resumes_to_the_same_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parts = synth_parts(dir.path(), 3000, 24, 9, 5, 5);
    let whole = dir.path().join("whole.json");
    mixture(&parts, &whole, &[]);
    for (name, more) in [
        ("one.json", &[][..]),
        ("workers.json", &["--local-nodes", "2"][..]),
    ] {
        let out = dir.path().join(name);
        let mut args = vec![
            "mixture",
            "--features",
            s(&parts),
            "--components",
            "5",
            "--pca-dims",
            "6",
        ];
        args.extend_from_slice(&["--iterations", "6", "--tol", "0", "--seed", "4"]);
        args.extend_from_slice(&["--out", s(&out), "--exit-after-iteration", "3"]);
        args.extend_from_slice(more);
        let crashed = vocab(&args);
        assert!(
            !crashed.status.success() && !out.exists(),
            "{name}: stopped after step 3"
        );
        // Taken up after step 3, the run never does step 3 again: the same fault does not
        // stop it (a run started over would stop there once more).
        let again = [&["--resume", "--exit-after-iteration", "3"][..], more].concat();
        let log = mixture(&parts, &out, &again);
        assert!(log.contains("resuming after EM step 3"), "{log}");
        let read = |p: &std::path::Path| std::fs::read(p).expect("read");
        assert!(
            read(&whole) == read(&out),
            "{name}: the resumed mixture differs"
        );
        let steps = csv_rows(&dir.path().join(format!("{name}.steps.csv")));
        assert_eq!(
            steps.len(),
            7,
            "the PCA and 6 EM steps, those before the crash kept"
        );
    }
    // A checkpoint of another run is refused, saying so; one past the run's end too.
    let other = dir.path().join("one.json");
    let err = fails(&[
        "mixture",
        "--features",
        s(&parts),
        "--components",
        "5",
        "--pca-dims",
        "6",
        "--seed",
        "5",
        "--out",
        s(&other),
        "--resume",
    ]);
    assert!(err.contains("a checkpoint of another run"), "{err}");
    let err = fails(&[
        "mixture",
        "--features",
        s(&parts),
        "--components",
        "5",
        "--pca-dims",
        "6",
        "--iterations",
        "2",
        "--seed",
        "4",
        "--out",
        s(&other),
        "--resume",
    ]);
    assert!(err.contains("more than the 2 this run makes"), "{err}");
}
