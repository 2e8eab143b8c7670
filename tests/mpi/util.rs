//! Helpers shared by the MPI tests: running `vocab`, alone and under `mpirun`, and blob features
//! in partitions beside their single-process vocabulary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VOCAB: &str = env!("CARGO_BIN_EXE_vocab");

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

pub fn vocab(args: &[&str]) -> String {
    let out = Command::new(VOCAB)
        .args(args)
        .arg("--quiet")
        .output()
        .expect("vocab runs");
    assert!(out.status.success(), "vocab {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `mpirun -n ranks vocab ARGS` (as root too: Open MPI asks for explicit consent).
pub fn mpirun(ranks: usize, args: &[&str]) -> Output {
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

pub fn mpi_ok(ranks: usize, args: &[&str]) -> String {
    let out = mpirun(ranks, args);
    assert!(
        out.status.success(),
        "mpirun -n {ranks} vocab {args:?}: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Blob features split into 7 partitions, and the single-process vocabulary of `kmeans_args`.
pub fn setup(dir: &Path, kmeans_args: &[&str]) -> (PathBuf, Vec<u8>) {
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

pub const KMEANS: [&str; 8] = [
    "--k",
    "20",
    "--iterations",
    "5",
    "--tol",
    "0",
    "--seed",
    "3",
];
