//! Bounded and recoverable (issue 49): what a checkpoint or a step folder says is checked, a
//! damaged one names the way out, and `--force` of its stage makes it again.

use crate::util::*;

#[test]
fn a_checkpoint_past_the_runs_end_or_naming_another_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let parts = synth_parts(d, 2000, 8, 4, 1, 2);
    let out = d.join("v.bin");
    let kmeans = |iterations: &str, resume: bool| {
        let mut args = vec![
            "kmeans",
            "--features",
            s(&parts),
            "--k",
            "4",
            "--iterations",
            iterations,
            "--tol",
            "0",
            "--out",
            s(&out),
        ];
        if resume {
            args.push("--resume");
        }
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    ok(&strs(&kmeans("3", false)));
    // Three iterations done; a run of two does not take them as its own.
    let err = fails(&strs(&kmeans("2", true)));
    assert!(
        err.contains("says 3 iterations are done, more than the 2"),
        "{err}"
    );
    let state = d.join("v.bin.ckpt/state.toml");
    let text = std::fs::read_to_string(&state).expect("state");
    let centroids = text
        .lines()
        .find_map(|l| l.strip_prefix("centroids = "))
        .expect("centroids")
        .to_string();
    for (what, edited, want) in [
        (
            "a file elsewhere",
            text.replace(&centroids, "\"../../elsewhere.bin\""),
            "not a file of the folder",
        ),
        (
            "iterations past its history",
            text.replace("iteration = 3", "iteration = 1"),
            "a history of iteration",
        ),
    ] {
        std::fs::write(&state, edited).expect("edit");
        let err = fails(&strs(&kmeans("6", true)));
        assert!(
            err.contains(want) && err.contains("state.toml"),
            "{what}: {err}"
        );
    }
}

#[test]
fn a_damaged_step_names_the_stage_to_force_and_forcing_it_makes_it_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let photos = photo_set_of(d, 3, 5);
    let config = small_config(d, &photos);
    let work = d.join("work");
    ok(&["run", s(&config), "--work", s(&work)]);
    let step = step_dir(&work, "kmeans");
    let vocabulary = step.join("vocabulary.bin");
    let bytes = std::fs::read(&vocabulary).expect("read");
    // What the cached step is read back by, damaged: every later run would stop on it.
    let meta = step.join("vocabulary.bin.meta.toml");
    std::fs::write(&meta, "k = \"many\"\n").expect("damage");
    let err = fails(&["run", s(&config), "--work", s(&work)]);
    assert!(
        err.contains("--force kmeans") && err.contains(s(&step)),
        "{err}"
    );
    let said = ok(&["run", s(&config), "--work", s(&work), "--force", "kmeans"]);
    assert!(said.contains("== kmeans"), "{said}");
    assert_eq!(std::fs::read(&vocabulary).expect("made again"), bytes);
    let said = ok(&["run", s(&config), "--work", s(&work)]);
    assert!(said.contains("cached"), "{said}");
    // The mixture is a stage --force names.
    ok(&["run", s(&config), "--work", s(&work), "--force", "mixture"]);
}
