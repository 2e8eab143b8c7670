//! Helpers shared by the CLI tests: running `vocab`, small data sets, worker processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn vocab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .arg("--quiet")
        .output()
        .expect("vocab runs")
}

pub fn ok(args: &[&str]) -> String {
    let out = vocab(args);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "vocab {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout.into_owned()
}

pub fn fails(args: &[&str]) -> String {
    let out = vocab(args);
    assert!(!out.status.success(), "vocab {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A folder with the synthetic photo set (2 per kind = 8 photos).
pub fn photo_set(dir: &Path) -> PathBuf {
    photo_set_of(dir, 2, 3)
}

/// `dir/photos`: the synthetic photo set of `per_kind` photos per scene kind, from `seed`.
pub fn photo_set_of(dir: &Path, per_kind: usize, seed: u64) -> PathBuf {
    let photos = dir.join("photos");
    let (per_kind, seed) = (per_kind.to_string(), seed.to_string());
    ok(&[
        "datasets",
        "photos",
        "--out",
        s(&photos),
        "--per-kind",
        &per_kind,
        "--seed",
        &seed,
    ]);
    photos
}

/// `dir/f.bin`: 30 random patches of each photo of `photos`, described.
pub fn sample_of(dir: &Path, photos: &Path) -> PathBuf {
    let out = dir.join("f.bin");
    ok(&[
        "features",
        "--input",
        s(photos),
        "--per-image",
        "30",
        "--out",
        s(&out),
    ]);
    out
}

pub fn csv_rows(path: &Path) -> Vec<Vec<String>> {
    let mut reader =
        csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    reader
        .records()
        .map(|r| r.expect("csv row").iter().map(str::to_string).collect())
        .collect()
}

/// Reads a binary feature file's header count by converting it to text and counting lines.
pub fn text_lines(features: &Path, dir: &Path) -> Vec<String> {
    let txt = dir.join(format!(
        "{}.txt",
        features.file_name().expect("name").to_string_lossy()
    ));
    ok(&[
        "convert",
        "--input",
        s(features),
        "--out",
        s(&txt),
        "--format",
        "text",
    ]);
    std::fs::read_to_string(&txt)
        .expect("text")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Step folders of a work directory: `stage/label-key`, finished ones only.
pub fn steps(work: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for stage in std::fs::read_dir(work).expect("work dir") {
        let stage = stage.expect("entry").path();
        if !stage.is_dir() || stage.ends_with("report") {
            continue;
        }
        for step in std::fs::read_dir(&stage).expect("stage dir") {
            let name = step
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            let stage_name = stage
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            out.push(format!("{stage_name}/{name}"));
        }
    }
    out.sort();
    out
}

/// Worker processes that are killed when the test ends, however it ends.
pub struct Workers(pub Vec<std::process::Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Blob vectors (`vocab datasets synth`) split into `parts` partitions under `dir/parts`.
pub fn synth_parts(
    dir: &Path,
    n: u64,
    dims: usize,
    clusters: usize,
    seed: u64,
    parts: usize,
) -> PathBuf {
    let features = dir.join("f.bin");
    let (n, dims, clusters, seed, parts) = (
        n.to_string(),
        dims.to_string(),
        clusters.to_string(),
        seed.to_string(),
        parts.to_string(),
    );
    ok(&[
        "datasets",
        "synth",
        "--out",
        s(&features),
        "--n",
        &n,
        "--dims",
        &dims,
        "--clusters",
        &clusters,
        "--seed",
        &seed,
    ]);
    let out = dir.join("parts");
    ok(&[
        "partition",
        "--features",
        s(&features),
        "--parts",
        &parts,
        "--out",
        s(&out),
    ]);
    out
}

/// Writes a cluster file for `n` loopback workers; returns its path and the ports.
pub fn cluster_file(dir: &Path, name: &str, n: usize, retries: u32) -> (PathBuf, Vec<u16>) {
    let secret = dir.join("secret");
    std::fs::write(
        &secret,
        "3f8a1c9e5b7d2046f1e8a3c5b9d70e2a4c6f8b1d3e5a7c9f0b2d4e6a8c1f3e5b\n",
    )
    .expect("secret");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("mode");
    }
    let mut text = format!(
        "[settings]\nsecret_file = \"secret\"\nretries = {retries}\nchunk_size = 65536\nio_timeout_ms = 5000\n"
    );
    let mut ports = Vec::new();
    for i in 0..n {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("port")
            .local_addr()
            .expect("addr")
            .port();
        text.push_str(&format!(
            "[[nodes]]\nname = \"w{i}\"\naddress = \"127.0.0.1:{port}\"\n"
        ));
        ports.push(port);
    }
    let path = dir.join(name);
    std::fs::write(&path, text).expect("cluster file");
    (path, ports)
}

/// `n` worker daemons of a new cluster file `name` that notices a lost worker quickly (3 s I/O
/// timeout), `retries` teams, worker `w{faulty}` started with the fault flags `fault`.
pub fn workers_with_a_fault(
    dir: &Path,
    name: &str,
    n: usize,
    retries: u32,
    faulty: usize,
    fault: &[&str],
) -> (PathBuf, Workers) {
    let (cluster, ports) = cluster_file(dir, name, n, retries);
    let text = std::fs::read_to_string(&cluster).expect("read").replace(
        "io_timeout_ms = 5000",
        "io_timeout_ms = 3000\nconnect_timeout_ms = 500",
    );
    std::fs::write(&cluster, text).expect("write");
    let workers = (ports.iter().enumerate())
        .map(|(i, &port)| {
            let extra = if i == faulty { fault } else { &[] };
            spawn_worker_args(&cluster, i, port, extra)
        })
        .collect();
    (cluster, Workers(workers))
}

pub fn spawn_worker(
    cluster: &Path,
    i: usize,
    port: u16,
    exit_after: Option<u64>,
) -> std::process::Child {
    spawn_worker_with(cluster, i, port, exit_after, None)
}

pub fn spawn_worker_with(
    cluster: &Path,
    i: usize,
    port: u16,
    exit_after: Option<u64>,
    exit_at_step: Option<u64>,
) -> std::process::Child {
    let mut extra = Vec::new();
    if let Some(n) = exit_after {
        extra.extend(["--exit-after-bytes".to_string(), n.to_string()]);
    }
    if let Some(n) = exit_at_step {
        extra.extend(["--exit-at-step".to_string(), n.to_string()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    spawn_worker_args(cluster, i, port, &extra)
}

/// A worker daemon `w{i}` of `cluster` on `port`, with `extra` arguments; waits until it listens.
pub fn spawn_worker_args(
    cluster: &Path,
    i: usize,
    port: u16,
    extra: &[&str],
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vocab"));
    cmd.args([
        "worker",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--name",
        &format!("w{i}"),
        "--cluster",
        s(cluster),
    ])
    .args(extra);
    let child = cmd
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("worker starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "worker w{i} did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// `dir/c.toml`: `photos`, 10 random patches a photo, 2 partitions, one vocabulary of 4 words
/// in one process (2 iterations), stride-16 histograms, SVMs by 2-fold CV split by kind.
pub fn small_config(dir: &Path, photos: &Path) -> PathBuf {
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = {:?}\n\n[features]\nper_image = 10\nseed = 1\n\n[partition]\n\
             parts = 2\n\n[kmeans]\nk = [4]\niterations = 2\nseed = 1\nnodes = 0\n\n[encode]\n\
             stride = 16\n\n[classify]\nsplit_by = \"kind\"\ncv = 2\n",
            s(photos)
        ),
    )
    .expect("config");
    config
}

/// Owned arguments as the `&str`s `ok` and `fails` take.
pub fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// The first finished step folder of `stage` in the work directory `work`.
pub fn step_dir(work: &Path, stage: &str) -> PathBuf {
    std::fs::read_dir(work.join(stage))
        .expect("the stage's steps")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a finished step")
}

/// A copy of the folder `from` at `to` (`cp -r`).
pub fn copy_tree(from: &Path, to: &Path) {
    let copied = Command::new("cp")
        .args(["-r", s(from), s(to)])
        .status()
        .expect("cp");
    assert!(
        copied.success(),
        "cp -r {} {}",
        from.display(),
        to.display()
    );
}

/// Every file below `dir`, sorted (entries that vanish while it walks are left out).
pub fn files_below(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<std::path::PathBuf> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    all.sort();
    all
}

/// Runs vocab for at most `secs` seconds: its stderr, or a timeout named as a failure.
pub fn fails_within(args: &[&str], secs: u64) -> String {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vocab"))
        .args(args)
        .arg("--quiet")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("vocab starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut err = String::new();
            let mut pipe = child.stderr.take().expect("stderr");
            pipe.read_to_string(&mut err).expect("stderr text");
            assert!(!status.success(), "vocab {args:?} should fail");
            return err;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vocab {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `vocab run config --work work` on 3 worker daemons (cluster file `dir/strict.toml`) of which
/// w1 ends in k-means, taking the partitions born there: checks the next team made them again
/// from their photos and returns what the run said.
pub fn run_losing_w1_in_kmeans(dir: &Path, config: &Path, work: &Path) -> String {
    let (strict, _workers) =
        workers_with_a_fault(dir, "strict.toml", 3, 2, 1, &["--exit-at-step", "2"]);
    let said = ok(&["run", s(config), "--work", s(work), "--cluster", s(&strict)]);
    assert!(
        said.contains("dropped w1") && said.contains("made again from their photos: part-000"),
        "{said}"
    );
    said
}
