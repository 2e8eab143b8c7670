//! What a batch run (stderr a file, as under Slurm, `nohup` or CI) shows while it works.

use std::process::Command;

use crate::util::*;

/// `vocab` with stderr captured (not a terminal) and without the `--quiet` the other tests add.
fn logged(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .output()
        .expect("vocab runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "vocab {args:?}:\n{stdout}\n{stderr}");
    (stdout, stderr)
}

#[test]
fn a_run_logs_each_stage_in_plain_lines_and_quiet_silences_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let config = small_config(dir.path(), &photos);
    let work = dir.path().join("work");
    let (_, stderr) = logged(&["run", s(&config), "--work", s(&work)]);
    // No bar's control characters: a log reads as lines.
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "{stderr:?}"
    );
    for stage in ["features", "kmeans", "encode"] {
        let done = stderr
            .lines()
            .find(|l| l.starts_with(&format!("{stage}: ")) && l.contains(" done in "));
        assert!(done.is_some(), "no closing line for {stage}:\n{stderr}");
    }
    let last = stderr.lines().find(|l| l.starts_with("kmeans: "));
    assert!(
        last.is_some_and(|l| l.starts_with("kmeans: 2/2 done in")),
        "{stderr}"
    );

    let quiet = dir.path().join("quiet");
    let (_, stderr) = logged(&["--quiet", "run", s(&config), "--work", s(&quiet)]);
    assert!(!stderr.contains(" done in "), "{stderr}");
}

#[test]
fn the_interval_is_a_flag_and_a_stage_closes_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let sample = sample_of(dir.path(), &photos);
    let out = dir.path().join("v.csv");
    // A stage here takes far less than the shortest interval: the lines at the interval are
    // checked by `progress`'s unit tests; this checks the flag and the one closing line.
    let (_, stderr) = logged(&[
        "--log-every",
        "1",
        "kmeans",
        "--features",
        s(&sample),
        "--k",
        "4",
        "--iterations",
        "3",
        "--out",
        s(&out),
    ]);
    assert_eq!(
        stderr.lines().filter(|l| l.contains(" done in ")).count(),
        1,
        "{stderr}"
    );
    let refused = Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args([
            "--log-every",
            "0",
            "kmeans",
            "--features",
            s(&sample),
            "--k",
            "4",
        ])
        .args(["--out", s(&out)])
        .output()
        .expect("vocab runs");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("--log-every"),
        "{err}"
    );
}
