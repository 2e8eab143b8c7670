//! `vocab run --engine mpi`: the single-process steps, with the sample gathered at the driver or
//! its partitions born on the ranks, each work folder serving the other engine from its cache,
//! and a run that loses a rank resumed from the rounds it saved.

use std::path::{Path, PathBuf};

use crate::util::*;

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

#[test]
fn a_run_of_descriptors_made_elsewhere_under_mpi_is_the_single_process_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let photos = tmp.path().join("photos");
    vocab(&["datasets", "photos", "--out", s(&photos), "--per-kind", "3"]);
    let desc = crate::commands::descriptors(tmp.path(), &photos);
    let config = tmp.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = {:?}\n\n[features]\nfrom = {:?}\nper_image = 10\nseed = 1\n\n\
             [partition]\nparts = 4\n\n[kmeans]\nk = [4]\niterations = 3\nseed = 1\nnodes = 2\n\n\
             [classify]\nsplit_by = \"kind\"\ncv = 2\n",
            s(&photos),
            s(&desc)
        ),
    )
    .expect("config");
    let (mpi, single) = (tmp.path().join("mpi"), tmp.path().join("single"));
    let stdout = mpi_ok(
        2,
        &["run", s(&config), "--work", s(&mpi), "--engine", "mpi"],
    );
    // The sample born on the ranks as partitions, the encodings sharded over them.
    assert!(
        stdout.contains("kept at the nodes as 4 partitions"),
        "{stdout}"
    );
    assert!(stdout.contains("on MPI ranks (2 nodes): 0@"), "{stdout}");
    vocab(&["run", s(&config), "--work", s(&single)]);
    assert_eq!(vocabularies(&mpi), vocabularies(&single), "{stdout}");
    let accuracy = |work: &Path| std::fs::read(work.join("report/accuracy.csv")).expect("read");
    assert!(accuracy(&mpi) == accuracy(&single), "{stdout}");
}
