//! The cluster secret (the second hardening round, issue 37): never on disk, even when a
//! loopback run is killed, and a secret file that is a FIFO or guessable is refused at once.

use crate::util::*;

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
