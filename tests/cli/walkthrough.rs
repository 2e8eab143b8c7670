//! The README's "Using it" block, run as written (by `sh -e`, with this build's `vocab` first on
//! PATH) in an empty folder: a command the README shows that does not run fails here.

use std::process::Command;

/// The indented lines between the README's walkthrough markers, without their indent.
fn walkthrough() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let start = readme
        .find("<!-- walkthrough -->")
        .expect("README has <!-- walkthrough -->");
    let end = readme[start..]
        .find("<!-- end of walkthrough -->")
        .expect("README has <!-- end of walkthrough -->");
    let mut script = String::new();
    for line in readme[start..start + end].lines().skip(1) {
        if let Some(code) = line.strip_prefix("    ") {
            script.push_str(code);
            script.push('\n');
        } else {
            assert!(
                line.trim().is_empty(),
                "the walkthrough is one indented block; found {line:?}"
            );
        }
    }
    script
}

#[test]
fn the_readme_walkthrough_runs_as_written() {
    let script = walkthrough();
    assert!(
        script.lines().filter(|l| l.starts_with("vocab ")).count() >= 20,
        "{script}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_vocab"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let out = Command::new("sh")
        .arg("-ec")
        .arg(format!("set -x\n{script}"))
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .expect("sh runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "the walkthrough stopped (the last + line is the command):\n{stderr}\n{stdout}"
    );
    // What it made is what the README says it makes.
    let labelled = std::fs::read_to_string(dir.path().join("labelled.csv")).expect("labelled.csv");
    assert_eq!(labelled.lines().count(), 1 + 4 * 2, "{labelled}");
    assert!(stdout.contains("iterations"), "{stdout}");
    assert!(
        dir.path().join("run/report/report.md").is_file(),
        "{stdout}"
    );
}
