//! `vocab run` stopped and run again: a run killed in k-means or its mixture, or interrupted by
//! Ctrl-C, resumes to the same vocabulary or mixture, a step left half-written starts afresh, and a work directory that
//! another run holds is refused.

use std::path::Path;

use crate::util::*;

/// A run of `config` killed after step `at` of its learning (`stage/label-`: the step) takes
/// it up (saying `resumed`), and writes the `file` a run never killed writes. The resumed run
/// is given the same fault: one that started the learning over would stop there once more.
fn killed_and_resumed(config: &str, (step, file): (&str, &str), at: &str, resumed: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.toml");
    std::fs::write(&path, config).expect("config");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    ok(&["run", s(&path), "--work", s(&a)]);
    let fault = [
        "run",
        s(&path),
        "--work",
        s(&b),
        "--exit-after-iteration",
        at,
    ];
    assert!(!vocab(&fault).status.success());
    let (stage, label) = step.split_once('/').expect("stage/label");
    let temporary = format!("{stage}/.tmp-{label}");
    assert!(
        steps(&b).iter().any(|s| s.starts_with(&temporary)),
        "the interrupted step stays temporary: {:?}",
        steps(&b)
    );
    let out = ok(&fault);
    assert!(out.contains(resumed), "{out}");
    let made = |w: &Path| {
        let done = (steps(w).into_iter())
            .find(|s| s.starts_with(step))
            .expect("the step");
        std::fs::read(w.join(done).join(file)).expect("its file")
    };
    assert!(made(&a) == made(&b), "the resumed {file} differs");
}

#[test]
fn a_run_killed_in_kmeans_resumes_to_the_same_vocabulary() {
    let config = "[dataset]\nsynthetic = { per_kind = 6, seed = 3 }\n[features]\nper_image = 30\n\
                  [kmeans]\nk = [24]\niterations = 8\ntol = 0\nseed = 2\nnodes = 2\n\
                  [classify]\nattributes = [\"elevation\"]\ncv = 2\n";
    let step = ("kmeans/k24-", "vocabulary.bin");
    killed_and_resumed(config, step, "3", "resuming after iteration 3");
}

#[test]
fn a_run_killed_in_its_mixture_resumes_after_its_last_em_step() {
    let config = "[dataset]\nsynthetic = { per_kind = 4 }\n[features]\nper_image = 40\n\
                  [kmeans]\nk = [4]\nnodes = 2\n[encode]\nmethod = \"fisher\"\nstride = 16\n\
                  [mixture]\ncomponents = [3]\npca_dims = 6\niterations = 8\ntol = 0\n\
                  [classify]\nattributes = [\"urbanicity\"]\ncv = 2\n";
    let step = ("mixture/g3-", "mixture.json");
    killed_and_resumed(config, step, "5", "resuming after EM step 5");
}

#[test]
fn a_second_run_on_a_locked_work_directory_is_refused_naming_the_holder() {
    use std::io::Write as _;
    use std::os::unix::io::AsRawFd;
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("work");
    let mut lock = std::fs::File::create(work.join(".lock")).expect("lock file");
    // SAFETY: flock on a descriptor this test owns.
    assert_eq!(
        unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
        0
    );
    write!(lock, "pid 4242 on testhost").expect("write");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let err = fails(&["run", s(&config), "--work", s(&work)]);
    assert!(
        err.contains("in use by another vocab run") && err.contains("pid 4242 on testhost"),
        "{err}"
    );
    assert!(!work.join("dataset").exists(), "nothing ran");
}

#[test]
fn a_step_interrupted_earlier_starts_from_an_empty_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    ok(&["run", s(&config), "--work", s(&work)]);
    // Leave behind what a killed run would: an encode step's temporary folder with
    // half-written files in it, then redo that step.
    let encode = std::fs::read_dir(work.join("encode"))
        .expect("encode")
        .map(|e| e.expect("entry").path())
        .find(|p| p.is_dir())
        .expect("an encode step");
    let name = encode
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let tmp = work.join("encode").join(format!(".tmp-{name}"));
    std::fs::create_dir_all(&tmp).expect("tmp");
    std::fs::write(tmp.join(".vocab-partial-killed"), "half").expect("junk");
    std::fs::write(tmp.join("histograms.bin"), "half a file").expect("junk");
    ok(&["run", s(&config), "--work", s(&work), "--force", "encode"]);
    assert!(!encode.join(".vocab-partial-killed").exists());
    let histograms = std::fs::read(encode.join("histograms.bin")).expect("histograms");
    assert_ne!(histograms, b"half a file");
}

#[test]
fn ctrl_c_says_how_to_go_on_leaves_no_temporary_folder_and_the_run_resumes_alike() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("long.toml");
    std::fs::write(
        &config,
        // 9,600 patches into 256 words, 150 iterations (tol 0 never stops early): seconds of
        // work after the first checkpoint, where the test interrupts it.
        "[dataset]\nsynthetic = { per_kind = 12, seed = 7 }\n[features]\nper_image = 400\n\
         [kmeans]\nk = [256]\niterations = 150\ntol = 0.0\nseed = 1\nnodes = 0\n\
         [classify]\nattributes = [\"urbanicity\"]\nsplit_by = \"kind\"\ncv = 2\n",
    )
    .expect("config");
    let work = dir.path().join("work");
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(["run", s(&config), "--work", s(&work)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("vocab starts");
    // Interrupted once k-means has a checkpoint in its temporary folder (at most 120 s).
    let kmeans = work.join("kmeans");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let tmp = loop {
        let found = std::fs::read_dir(&kmeans).ok().and_then(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .find(|p| p.join("vocabulary.bin.ckpt/state.toml").is_file())
        });
        if let Some(tmp) = found {
            break tmp;
        }
        assert!(
            std::time::Instant::now() < deadline && run.try_wait().expect("wait").is_none(),
            "k-means never checkpointed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(s(&tmp).contains("/.tmp-k256-"), "{}", tmp.display());
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(run.id() as i32, libc::SIGINT) }, 0);
    let out = run.wait_with_output().expect("exits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("vocab run: interrupted during kmeans k256")
            && err.contains("taken up again")
            && err.contains(&format!("Finished steps are kept in {}", work.display()))
            && err.contains("--work")
            && err.contains("again to go on from there"),
        "{err}"
    );
    let tmp_left = |work: &Path| {
        walkdir::WalkDir::new(work)
            .into_iter()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".tmp-"))
    };
    assert!(!tmp_left(&work), "a .tmp- folder was left");
    let resume = std::fs::read_dir(&kmeans)
        .expect("kmeans")
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(".resume-k256-"));
    assert!(resume, "the checkpoint is kept");
    // Run again: it goes on from the checkpoint, to the vocabulary of a run never interrupted.
    let again = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(again.contains("resum"), "{again}");
    let whole = dir.path().join("whole");
    ok(&["run", s(&config), "--work", s(&whole)]);
    let vocabulary = |work: &Path| {
        let step = steps(work)
            .into_iter()
            .find(|s| s.starts_with("kmeans/k256-"))
            .expect("k256");
        std::fs::read(work.join(step).join("vocabulary.bin")).expect("vocabulary")
    };
    assert_eq!(vocabulary(&work), vocabulary(&whole));
    assert!(!tmp_left(&work));
    assert!(
        !std::fs::read_dir(&kmeans)
            .expect("kmeans")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".resume-")),
        "taken up"
    );
}
