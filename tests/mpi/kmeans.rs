//! `vocab kmeans --engine mpi`: the single-process vocabulary on any number of ranks, with any
//! broadcast, kernel or order; a killed rank ends the job, which resumes on another rank count;
//! bad MPI settings refused naming them.

use std::path::Path;

use crate::util::*;

/// `vocab kmeans --engine mpi` on `parts` into `out` with [`KMEANS`].
fn mpi_kmeans<'a>(parts: &'a Path, out: &'a Path) -> Vec<&'a str> {
    let mut args = vec![
        "kmeans",
        "--engine",
        "mpi",
        "--features",
        s(parts),
        "--out",
        s(out),
    ];
    args.extend_from_slice(&KMEANS);
    args
}

#[test]
fn mpi_ranks_give_the_single_process_vocabulary_bit_for_bit() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, local) = setup(tmp.path(), &KMEANS);
    let int8: Vec<&str> = KMEANS.iter().copied().chain(["--kernel", "int8"]).collect();
    let int8_local = {
        let out = tmp.path().join("local-int8.bin");
        let mut args = vec!["kmeans", "--features", s(&parts), "--out", s(&out)];
        args.extend_from_slice(&int8);
        vocab(&args);
        std::fs::read(&out).expect("int8 vocabulary")
    };
    for (case, (ranks, extra, want)) in [
        (1, vec![], &local),
        (2, vec![], &local),
        (
            3,
            vec!["--broadcast", "multichain", "--chunk-size", "512"],
            &local,
        ),
        (
            4,
            vec!["--broadcast", "mst", "--no-local-aggregation"],
            &local,
        ),
        (
            3,
            vec!["--kernel", "int8", "--broadcast", "simple"],
            &int8_local,
        ),
        // The chain from measured links: same vocabulary, the calibration printed.
        (4, vec!["--order", "auto"], &local),
        // The measured trees: the broadcast tree (mst) and the stage-3 gather tree.
        (3, vec!["--order", "auto", "--broadcast", "mst"], &local),
    ]
    .into_iter()
    .enumerate()
    {
        let out = tmp.path().join(format!("mpi-{case}.bin"));
        let mut args = mpi_kmeans(&parts, &out);
        args.extend_from_slice(&extra);
        let stdout = mpi_ok(ranks, &args);
        assert!(
            stdout.contains(&format!("on {ranks} MPI ranks")),
            "{stdout}"
        );
        if extra.contains(&"auto") {
            assert!(
                stdout.contains(&format!("calibration: {ranks} members"))
                    && stdout.contains("chain: 0@")
                    && stdout.contains("gather tree (stage 3): 0@"),
                "{stdout}"
            );
        }
        assert_eq!(
            &std::fs::read(&out).expect("vocabulary"),
            want,
            "{ranks} ranks {extra:?}"
        );
        // Stage traffic is recorded per iteration, as on the TCP engine.
        let stages = std::fs::read_to_string(tmp.path().join(format!("mpi-{case}.bin.stages.csv")))
            .expect("stages");
        assert_eq!(stages.lines().count(), 6, "{stages}");
    }
}

#[test]
fn a_killed_rank_ends_the_job_and_resume_on_another_rank_count_gives_the_same_vocabulary() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, local) = setup(tmp.path(), &KMEANS);
    let out = tmp.path().join("v.bin");
    let mut args = mpi_kmeans(&parts, &out);
    let mut killed = args.clone();
    killed.extend_from_slice(&["--exit-rank-at", "2:3"]);
    let died = mpirun(3, &killed);
    assert!(
        !died.status.success(),
        "the job should end: {}",
        text(&died)
    );
    assert!(!out.exists(), "no vocabulary from a dead job");
    let state =
        std::fs::read_to_string(tmp.path().join("v.bin.ckpt/state.toml")).expect("checkpoint");
    assert!(state.contains("iteration = 2"), "{state}");
    args.push("--resume");
    let stdout = mpi_ok(2, &args);
    assert!(stdout.contains("resuming after iteration 2"), "{stdout}");
    assert_eq!(std::fs::read(&out).expect("vocabulary"), local);
}

#[test]
fn bad_mpi_settings_are_refused_naming_them() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, _) = setup(tmp.path(), &KMEANS);
    let out = tmp.path().join("v.bin");
    let racks = tmp.path().join("racks.toml");
    std::fs::write(&racks, "not a rack map").expect("racks");
    let args = mpi_kmeans(&parts, &out);
    for (extra, want) in [
        (vec!["--racks", s(&racks)], "racks.toml"),
        (vec!["--local-nodes", "2"], "--engine tcp"),
        (vec!["--exit-rank-at", "0:1"], "rank 0 drives"),
    ] {
        let mut all = args.clone();
        all.extend_from_slice(&extra);
        let out = mpirun(2, &all);
        assert!(!out.status.success(), "{extra:?} should fail");
        assert!(text(&out).contains(want), "{extra:?}: {}", text(&out));
    }
}
