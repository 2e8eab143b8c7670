//! `vocab clean`: a finished run's work directory keeps what its last run used, and the run
//! after a clean makes nothing again.

use crate::util::*;

#[test]
fn clean_drops_stale_steps_and_trained_encodings_and_the_run_still_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let photos = photo_set(dir.path());
    let config = small_config(dir.path(), &photos);
    let work = dir.path().join("work");
    ok(&["run", s(&config), "--work", s(&work)]);
    // Another vocabulary size: the k = 4 steps are no longer used.
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, text.replace("k = [4]", "k = [3]")).expect("config");
    ok(&["run", s(&config), "--work", s(&work)]);
    let accuracy = std::fs::read(work.join("report").join("accuracy.csv")).expect("accuracy");
    // What an interrupted run leaves.
    std::fs::create_dir_all(work.join("kmeans").join(".resume-k9-abc")).expect("resume");
    let before = steps(&work);
    assert!(
        before.iter().any(|s| s.starts_with("kmeans/k4-")),
        "{before:?}"
    );

    let said = ok(&[
        "clean",
        s(&config),
        "--work",
        s(&work),
        "--encodings",
        "--dry-run",
    ]);
    assert!(
        said.contains("would remove") && said.contains("to free"),
        "{said}"
    );
    assert_eq!(steps(&work), before, "a dry run removes nothing");

    let said = ok(&["clean", s(&config), "--work", s(&work), "--encodings"]);
    assert!(
        said.contains("a step the last finished run did not use"),
        "{said}"
    );
    assert!(said.contains("left by an interrupted run"), "{said}");
    assert!(said.contains("encodings of trained models"), "{said}");
    let after = steps(&work);
    for gone in ["kmeans/k4-", "kmeans/.resume-", "encode/", "svm/k4-"] {
        assert!(
            !after.iter().any(|s| s.starts_with(gone)),
            "{gone}: {after:?}"
        );
    }
    assert!(after.iter().any(|s| s.starts_with("svm/k3-")), "{after:?}");

    // The models stand without their encodings: nothing is made again, the same report.
    let out = ok(&["run", s(&config), "--work", s(&work)]);
    let made: Vec<&str> = (out.lines())
        .filter(|l| l.starts_with("== ") && !l.starts_with("== dataset"))
        .filter(|l| !l.contains(": cached"))
        .collect();
    assert!(made.is_empty() && !out.contains("== encode"), "{out}");
    let again = std::fs::read(work.join("report").join("accuracy.csv")).expect("accuracy");
    assert_eq!(accuracy, again);

    // No finished run, or a folder of the user's: nothing removed, said why.
    let fresh = dir.path().join("fresh");
    std::fs::create_dir_all(&fresh).expect("fresh");
    let err = fails(&["clean", "--work", s(&fresh)]);
    assert!(err.contains("not a vocab work directory"), "{err}");
    std::fs::remove_file(work.join("report").join("steps.csv")).expect("steps");
    let err = fails(&["clean", "--work", s(&work)]);
    assert!(err.contains("holds no finished run"), "{err}");
}
