//! The MPI engine, run for real under `mpirun` (Open MPI, `--oversubscribe`): built and run only
//! with `--features mpi` (`.ci/run` installs Open MPI and runs these on every submission).
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VOCAB: &str = env!("CARGO_BIN_EXE_vocab");

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

fn vocab(args: &[&str]) -> String {
    let out = Command::new(VOCAB)
        .args(args)
        .arg("--quiet")
        .output()
        .expect("vocab runs");
    assert!(out.status.success(), "vocab {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `mpirun -n ranks vocab ARGS` (as root too: Open MPI asks for explicit consent).
fn mpirun(ranks: usize, args: &[&str]) -> Output {
    let out = Command::new("mpirun")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-n", &ranks.to_string(), VOCAB])
        .args(args)
        .arg("--quiet")
        .output();
    match out {
        Ok(out) => out,
        Err(e) => panic!(
            "cannot start mpirun ({e}): install Open MPI (apt-get install openmpi-bin \
             libopenmpi-dev) or build without --features mpi"
        ),
    }
}

fn mpi_ok(ranks: usize, args: &[&str]) -> String {
    let out = mpirun(ranks, args);
    assert!(
        out.status.success(),
        "mpirun -n {ranks} vocab {args:?}: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Blob features split into 7 partitions, and the single-process vocabulary of `kmeans_args`.
fn setup(dir: &Path, kmeans_args: &[&str]) -> (PathBuf, Vec<u8>) {
    let features = dir.join("f.bin");
    let parts = dir.join("parts");
    vocab(&[
        "datasets",
        "synth",
        "--n",
        "3000",
        "--dims",
        "24",
        "--clusters",
        "9",
        "--seed",
        "5",
        "--out",
        s(&features),
    ]);
    vocab(&[
        "partition",
        "--features",
        s(&features),
        "--parts",
        "7",
        "--out",
        s(&parts),
    ]);
    let local = dir.join("local.bin");
    let mut args = vec!["kmeans", "--features", s(&parts), "--out", s(&local)];
    args.extend_from_slice(kmeans_args);
    vocab(&args);
    (parts, std::fs::read(&local).expect("local vocabulary"))
}

const KMEANS: [&str; 8] = [
    "--k",
    "20",
    "--iterations",
    "5",
    "--tol",
    "0",
    "--seed",
    "3",
];

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

/// `configs/quickstart.toml` with `partition` lines added to its `[partition]` section, written
/// as `dir/name`; returns the path.
fn quickstart_with(dir: &Path, name: &str, partition: &str) -> PathBuf {
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let text = std::fs::read_to_string(&quickstart).expect("config");
    let path = dir.join(name);
    std::fs::write(
        &path,
        text.replace("parts = 8", &format!("parts = 8\n{partition}")),
    )
    .expect("write config");
    path
}

/// Runs `run` on 2 ranks with rank 1 lost in photo round 3: the job must end.
fn lose_rank_1_in_round_3(run: &[&str]) {
    let mut killed = run.to_vec();
    killed.extend_from_slice(&["--exit-rank-in-round", "1:3"]);
    let died = mpirun(2, &killed);
    assert!(
        !died.status.success(),
        "the job should end: {}",
        text(&died)
    );
}

/// The vocabularies of a `vocab run` work folder, by size (`k8`, ...).
fn vocabularies(work: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(work.join("kmeans"))
        .expect("kmeans folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("vocabulary.bin").is_file())
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            let label = name.split('-').next().unwrap_or_default().to_string();
            (
                label,
                std::fs::read(p.join("vocabulary.bin")).expect("read"),
            )
        })
        .collect();
    all.sort();
    all
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
fn vocab_run_under_mpi_builds_the_single_process_vocabularies() {
    let tmp = tempfile::tempdir().expect("tmp");
    // The rack map as a config key: this host's ranks are in rack r7.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    // The partitions made at the driver from the gathered sample (the other mode, partitions
    // born on the ranks, is the next test's).
    let config = quickstart_with(tmp.path(), "quickstart-racks.toml", "at = \"driver\"");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        format!("{text}\n[kmeans.racks]\n\"{}\" = \"r7\"\n", host.trim()),
    )
    .expect("write config");
    let (mpi, single) = (tmp.path().join("mpi"), tmp.path().join("single"));
    let stdout = mpi_ok(
        2,
        &["run", s(&config), "--work", s(&mpi), "--engine", "mpi"],
    );
    assert!(stdout.contains("(r7)"), "{stdout}");
    vocab(&["run", s(&config), "--work", s(&single)]);
    // The features and encode stages ran sharded over the ranks.
    assert!(stdout.contains("on MPI ranks (2 nodes): 0@"), "{stdout}");
    // Files of the steps of `stage`, by step.
    let outputs = |work: &Path, stage: &str, files: &[&str]| -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(work.join(stage))
            .expect("stage folder")
            .map(|e| e.expect("entry").path())
            .flat_map(|p| files.iter().map(move |f| p.join(f)))
            .filter(|p| p.is_file())
            .map(|p| (p.display().to_string(), std::fs::read(&p).expect("read")))
            .map(|(name, bytes)| (name.replace(&work.display().to_string(), ""), bytes))
            .collect();
        all.sort();
        all
    };
    for (stage, files, n) in [
        ("kmeans", &["vocabulary.bin"][..], 3),
        (
            "features",
            &[
                "sample.bin",
                "sample.bin.images.csv",
                "sample.bin.skipped.csv",
            ][..],
            3,
        ),
        (
            "encode",
            &["histograms.bin", "histograms.bin.images.csv"][..],
            6,
        ),
    ] {
        let (a, b) = (outputs(&mpi, stage, files), outputs(&single, stage, files));
        assert_eq!(a.len(), n, "{stage}");
        assert!(a == b, "{stage} differs under MPI");
    }
}

#[test]
fn vocab_run_under_mpi_with_partitions_born_on_the_ranks_builds_the_same_vocabularies() {
    let tmp = tempfile::tempdir().expect("tmp");
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let config = quickstart_with(tmp.path(), "born.toml", "at = \"nodes\"");
    let (born, single) = (tmp.path().join("born"), tmp.path().join("single"));
    let stdout = mpi_ok(
        3,
        &["run", s(&config), "--work", s(&born), "--engine", "mpi"],
    );
    assert!(
        stdout.contains("kept at the nodes as 8 partitions")
            && stdout.contains("8 partitions at the nodes, k = 8"),
        "{stdout}"
    );
    vocab(&["run", s(&quickstart), "--work", s(&single)]);
    let (a, b) = (vocabularies(&born), vocabularies(&single));
    assert_eq!(a.len(), 3);
    assert!(
        a == b,
        "vocabularies differ with partitions born on the ranks"
    );
    // Keys say what a step computes, not where: each work folder serves the other engine
    // from its cache (the ranks' partitions lie whole in the work folder, on this one host).
    let ran = |out: &str| -> Vec<String> {
        (out.lines())
            .filter(|l| l.ends_with(" ran"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    let here = vocab(&["run", s(&config), "--work", s(&born)]);
    assert_eq!(ran(&here), ["report"], "{here}");
    let there = mpi_ok(
        3,
        &["run", s(&config), "--work", s(&single), "--engine", "mpi"],
    );
    assert_eq!(ran(&there), ["report"], "{there}");
}

#[test]
fn an_mpi_run_with_partitions_born_on_the_ranks_resumes_from_the_rounds_they_saved() {
    let tmp = tempfile::tempdir().expect("tmp");
    let quickstart = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/quickstart.toml");
    let config = quickstart_with(
        tmp.path(),
        "born.toml",
        "at = \"nodes\"\nfolder = \"nodes/{rank}\"",
    );
    let (born, single) = (tmp.path().join("born"), tmp.path().join("single"));
    let run = ["run", s(&config), "--work", s(&born), "--engine", "mpi"];
    lose_rank_1_in_round_3(&run);
    // Rank 0 kept the rounds it described, in its own folder.
    let saved: usize = std::fs::read_dir(born.join("nodes/0"))
        .expect("rank 0's folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .flat_map(|p| std::fs::read_dir(p).expect("partitions"))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().contains(".kept-"))
        .map(|p| std::fs::read_dir(p).expect("kept").count())
        .sum();
    assert!(saved >= 3, "{saved} files of saved rounds");
    mpi_ok(2, &run);
    vocab(&["run", s(&quickstart), "--work", s(&single)]);
    assert_eq!(vocabularies(&born).len(), 3);
    assert!(
        vocabularies(&born) == vocabularies(&single),
        "the resumed run differs"
    );
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

#[test]
fn an_mpi_run_that_loses_a_rank_in_a_photo_stage_resumes_from_its_saved_rounds() {
    let tmp = tempfile::tempdir().expect("tmp");
    // The sample gathered at the driver, which saves the rounds it gets.
    let config = quickstart_with(tmp.path(), "gathered.toml", "at = \"driver\"");
    let (mpi, single) = (tmp.path().join("mpi"), tmp.path().join("single"));
    let run = ["run", s(&config), "--work", s(&mpi), "--engine", "mpi"];
    lose_rank_1_in_round_3(&run);
    let features = mpi.join("features");
    let tmp_step = std::fs::read_dir(&features)
        .expect("features folder")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().contains(".tmp-sample-"))
        .expect("the interrupted features step");
    let saved = std::fs::read_dir(tmp_step.join("sample.bin.rounds"))
        .expect("saved rounds")
        .filter(|e| {
            let name = e.as_ref().expect("entry").file_name();
            name.to_string_lossy().ends_with(".round")
        })
        .count();
    assert!(saved >= 2, "{saved} rounds saved");
    let stdout = mpi_ok(2, &run);
    assert!(stdout.contains("resumed: "), "{stdout}");
    vocab(&["run", s(&config), "--work", s(&single)]);
    let sample = |work: &Path| -> Vec<Vec<u8>> {
        let step = std::fs::read_dir(work.join("features"))
            .expect("features folder")
            .map(|e| e.expect("entry").path())
            .find(|p| !p.to_string_lossy().contains(".tmp-"))
            .expect("features step");
        [
            "sample.bin",
            "sample.bin.images.csv",
            "sample.bin.skipped.csv",
        ]
        .iter()
        .map(|f| std::fs::read(step.join(f)).expect("read"))
        .collect()
    };
    assert!(
        sample(&mpi) == sample(&single),
        "the resumed sample differs"
    );
}

/// Runs `args` (a command writing `--out OUT`) once in one process to `one` and once on 3 MPI
/// ranks to `three`, and checks that the file and its `suffixes` beside it are the same bytes.
fn one_process_equals_three_ranks(
    args: &dyn Fn(&Path) -> Vec<String>,
    (one, three): (&Path, &Path),
    suffixes: &[&str],
) {
    let local: Vec<String> = args(one);
    vocab(&local.iter().map(String::as_str).collect::<Vec<_>>());
    let mut ranked = args(three);
    ranked.extend(["--engine".to_string(), "mpi".to_string()]);
    let stdout = mpi_ok(3, &ranked.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stdout.contains("on MPI ranks (3 nodes)"), "{stdout}");
    for suffix in suffixes {
        let read = |p: &Path| std::fs::read(format!("{}{suffix}", p.display())).expect("read");
        assert!(read(one) == read(three), "{suffix} differs under MPI");
    }
}

#[test]
fn vocab_features_under_mpi_writes_the_single_process_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    std::fs::write(photos.join("broken.jpg"), b"not a jpeg").expect("broken");
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| -> Vec<String> {
        [
            "features",
            "--input",
            s(&photos),
            "--out",
            s(out),
            "--per-image",
            "7",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".skipped.csv"]);
}

#[test]
fn vlad_encode_under_mpi_writes_the_single_process_vectors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    let (features, words) = (tmp.path().join("f.bin"), tmp.path().join("v.bin"));
    vocab(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&features),
        "--per-image",
        "20",
    ]);
    vocab(&[
        "kmeans",
        "--features",
        s(&features),
        "--k",
        "4",
        "--out",
        s(&words),
    ]);
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| -> Vec<String> {
        [
            "encode",
            "--vocabulary",
            s(&words),
            "--input",
            s(&photos),
            "--method",
            "vlad",
            "--soft",
            "2",
            "--pyramid",
            "2",
            "--stride",
            "16",
            "--out",
            s(out),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".encoding.json"]);
}

#[test]
fn a_mixture_under_mpi_is_the_single_process_mixture() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (parts, _) = setup(tmp.path(), &KMEANS);
    let args = |out: &Path| -> Vec<String> {
        [
            "mixture",
            "--features",
            s(&parts),
            "--components",
            "5",
            "--pca-dims",
            "6",
            "--iterations",
            "5",
            "--tol",
            "0",
            "--out",
            s(out),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let (one, three) = (tmp.path().join("one.json"), tmp.path().join("three.json"));
    vocab(&args(&one).iter().map(String::as_str).collect::<Vec<_>>());
    let mut ranked = args(&three);
    ranked.extend(["--engine".to_string(), "mpi".to_string()]);
    let stdout = mpi_ok(3, &ranked.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(stdout.contains("on 3 MPI ranks"), "{stdout}");
    let read = |p: &Path| std::fs::read(p).expect("read");
    assert!(read(&one) == read(&three), "the ranks' mixture differs");
}

#[test]
fn fisher_encode_under_mpi_writes_the_single_process_vectors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    let (features, mixture) = (tmp.path().join("f.bin"), tmp.path().join("g.json"));
    vocab(&[
        "features",
        "--input",
        s(&photos),
        "--out",
        s(&features),
        "--per-image",
        "20",
    ]);
    vocab(&[
        "mixture",
        "--features",
        s(&features),
        "--components",
        "3",
        "--pca-dims",
        "6",
        "--out",
        s(&mixture),
    ]);
    let (one, three) = (tmp.path().join("one.bin"), tmp.path().join("three.bin"));
    let args = |out: &Path| -> Vec<String> {
        [
            "encode",
            "--vocabulary",
            s(&mixture),
            "--input",
            s(&photos),
            "--method",
            "fisher",
            "--pyramid",
            "2",
            "--out",
            s(out),
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let files = (one.as_path(), three.as_path());
    one_process_equals_three_ranks(&args, files, &["", ".images.csv", ".encoding.json"]);
}
