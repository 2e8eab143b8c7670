//! `vocab worker`, `vocab cluster local|status` and `vocab bench broadcast`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use rand::RngCore;
use vocab_cluster::collective::Algorithm;
use vocab_cluster::net::auth::Secret;
use vocab_cluster::net::config::Cluster;
use vocab_cluster::net::peer::{PingError, ping};
use vocab_cluster::worker::Worker;

use crate::cli::{
    BenchBroadcastArgs, BenchGatherArgs, BenchTeamArgs, CalibrateArgs, LocalArgs, StatusArgs,
    WorkerArgs,
};
use crate::faults::ExitAt;
use crate::options::BroadcastAlgorithm;

use vocab_cluster::engine::crew::DRIVER;
use vocab_cluster::jobs::bench::{BroadcastReport, Broadcaster};

pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Loads a cluster file and its secret.
pub fn load(path: &Path) -> anyhow::Result<(Cluster, Secret)> {
    let cluster = Cluster::load(path)?;
    let secret_path = cluster.settings.secret_file.clone().with_context(|| {
        format!(
            "cluster file {} sets no settings.secret_file",
            path.display()
        )
    })?;
    let secret = Secret::load(&secret_path)?;
    Ok((cluster, secret))
}

/// `vocab worker`.
pub fn worker(args: &WorkerArgs) -> anyhow::Result<()> {
    let (cluster, secret) = load(&args.cluster)?;
    ensure!(
        cluster.nodes.iter().any(|n| n.name == args.name),
        "node {} is not in cluster file {}",
        args.name,
        args.cluster.display()
    );
    runtime()?.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "worker {} listening on {}",
            args.name,
            listener.local_addr()?
        );
        let faults = ExitAt {
            after_bytes: args.exit_after_bytes,
            step: args.exit_at_step,
            round: args.exit_at_round,
        };
        let worker = Worker::new(&args.name, cluster, secret, std::sync::Arc::new(faults));
        tokio::select! {
            served = worker.serve(listener) => served.context("accept loop failed"),
            _ = tokio::signal::ctrl_c() => {
                eprintln!("worker {} shutting down", args.name);
                Ok(())
            }
        }
    })
}

/// Pings every node; returns `(name, Ok(rtt) | Err(reason))` in chain order.
async fn ping_all(
    cluster: &Cluster,
    secret: &Secret,
) -> Vec<(String, Result<Duration, PingError>)> {
    let mut out = Vec::new();
    for node in cluster.chain_nodes() {
        out.push((node.name.clone(), ping(cluster, node, secret, DRIVER).await));
    }
    out
}

/// `vocab cluster calibrate`: forms a team of the driver and the workers, measures every link
/// (rounds of disjoint pairs, both directions), prints the matrices, the groups and the chain,
/// and saves them to `<cluster>.links.json` (written beside, then renamed).
pub fn calibrate(args: &CalibrateArgs) -> anyhow::Result<()> {
    let (cluster, secret) = load(&args.cluster)?;
    let mut team = Broadcaster::connect(cluster, secret).with_context(|| {
        format!(
            "forming a team of the workers of {}",
            args.cluster.display()
        )
    })?;
    let auto = vocab_cluster::collective::calibration::Auto {
        probe: vocab_cluster::collective::Probe {
            large: usize::try_from(args.probe)
                .ok()
                .filter(|&b| b >= 1024)
                .context("--probe must be at least 1K")?,
            ..Default::default()
        },
        bytes: args.bytes as f64,
    };
    let (calibration, names) = team.calibrate(auto).context("measuring the links")?;
    if !team.dropped().is_empty() {
        println!("dropped (no answer): {}", team.dropped().join(", "));
    }
    println!("{}", calibration.describe(&names));
    let saved = serde_json::json!({
        "members": names,
        "latency_seconds": calibration.links.latency,
        "bandwidth_bytes_per_second": calibration.links.bandwidth,
        "groups": calibration.groups.leaves().iter()
            .map(|g| g.iter().map(|&r| names[r].clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        "chain": calibration.order.iter().map(|&r| names[r].clone()).collect::<Vec<_>>(),
        "probe_bytes": args.probe,
        "seconds": calibration.seconds,
    });
    let path = links_path(&args.cluster);
    let text = serde_json::to_string_pretty(&saved).context("formatting the links")?;
    vocab_pipeline::atomic::write(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    println!("  wrote {}", path.display());
    Ok(())
}

/// Where the measured links of a cluster file go.
pub fn links_path(cluster: &Path) -> PathBuf {
    let mut name = cluster.as_os_str().to_owned();
    name.push(".links.json");
    PathBuf::from(name)
}

/// `vocab cluster status`.
pub fn status(args: &StatusArgs) -> anyhow::Result<()> {
    let (cluster, secret) = load(&args.cluster)?;
    let results = runtime()?.block_on(ping_all(&cluster, &secret));
    let mut alive = 0;
    for ((name, result), node) in results.iter().zip(cluster.chain_nodes()) {
        match result {
            Ok(rtt) => {
                alive += 1;
                println!(
                    "{name:<12} {:<22} rack {:<8} alive ({:.2} ms)",
                    node.address,
                    node.rack,
                    rtt.as_secs_f64() * 1e3
                );
            }
            Err(reason) => println!(
                "{name:<12} {:<22} rack {:<8} DOWN: {}",
                node.address,
                node.rack,
                vocab_pipeline::chain(reason)
            ),
        }
    }
    println!("cluster status: {alive} of {} nodes alive", results.len());
    if alive < results.len() {
        bail!("{} nodes do not answer", results.len() - alive);
    }
    Ok(())
}

impl From<BroadcastAlgorithm> for Algorithm {
    fn from(a: BroadcastAlgorithm) -> Self {
        match a {
            BroadcastAlgorithm::Chain => Self::Chain,
            BroadcastAlgorithm::Simple => Self::Simple,
            BroadcastAlgorithm::Mst => Self::Mst,
            BroadcastAlgorithm::Multichain => Self::MultiChain,
        }
    }
}

/// Loopback workers and the folder of their cluster file, stopped (then removed) when dropped.
pub type Loopback = (LocalCluster, tempfile::TempDir);

/// The cluster file of a TCP engine: `--cluster`'s, or that of loopback workers started now
/// (`--local-nodes`, `[kmeans] nodes`; their logs in `logs`), returned with them.
pub fn workers_of(
    engine: &crate::settings::Backend,
    logs: &Path,
) -> anyhow::Result<(std::path::PathBuf, Option<Loopback>)> {
    use crate::settings::Backend;
    match engine {
        Backend::Tcp {
            cluster: Some(path),
            ..
        } => Ok((path.clone(), None)),
        Backend::Local | Backend::Mpi => anyhow::bail!("the TCP engine runs on TCP workers"),
        Backend::Tcp { .. } => {
            let n = engine.local_nodes();
            let tmp = tempfile::tempdir().context("cannot create a folder for local workers")?;
            let threads = (rayon::current_num_threads() / n).max(1);
            let local = LocalCluster::start(tmp.path(), n, 1, threads, logs)?;
            Ok((local.path.clone(), Some((local, tmp))))
        }
    }
}

/// Worker processes on loopback with their cluster file; the workers are killed when dropped.
pub struct LocalCluster {
    /// The cluster file.
    pub path: std::path::PathBuf,
    /// The folder of the workers' logs (`w0.log`, ...).
    pub logs: std::path::PathBuf,
    children: Vec<std::process::Child>,
}

impl LocalCluster {
    /// Writes a cluster file and secret into `dir` and starts `nodes` workers (spread over
    /// `racks`), each with `threads` map threads (0: the default), then waits until all answer.
    /// Each worker's output goes to its own file in `logs` (`w0.log`, appended), so that it
    /// never interleaves with the driver's.
    pub fn start(
        dir: &Path,
        nodes: usize,
        racks: usize,
        threads: usize,
        logs: &Path,
    ) -> anyhow::Result<Self> {
        ensure!(nodes > 0, "the local cluster needs at least 1 node");
        ensure!(racks > 0, "the local cluster needs at least 1 rack");
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let secret_path = dir.join("secret");
        write_private(&secret_path, (hex + "\n").as_bytes())
            .with_context(|| format!("cannot write {}", secret_path.display()))?;
        // Ports: ask the kernel for free ones (a small race with other programs, reported clearly).
        let mut text = String::from("[settings]\nsecret_file = \"secret\"\n");
        let mut ports = Vec::new();
        for i in 0..nodes {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            ports.push(port);
            let _ = write!(
                text,
                "\n[[nodes]]\nname = \"w{i}\"\naddress = \"127.0.0.1:{port}\"\nrack = \"r{}\"\n",
                i % racks
            );
        }
        let path = dir.join("cluster.toml");
        vocab_pipeline::atomic::write(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        let exe = std::env::current_exe().context("cannot find the vocab executable")?;
        std::fs::create_dir_all(logs)
            .with_context(|| format!("cannot create {}", logs.display()))?;
        let mut local = Self {
            path,
            logs: logs.to_path_buf(),
            children: Vec::new(),
        };
        for (i, port) in ports.iter().enumerate() {
            let mut command = std::process::Command::new(&exe);
            command
                .args([
                    "worker",
                    "--listen",
                    &format!("127.0.0.1:{port}"),
                    "--name",
                    &format!("w{i}"),
                    "--cluster",
                ])
                .arg(&local.path);
            if threads > 0 {
                command.env("RAYON_NUM_THREADS", threads.to_string());
            }
            let log_path = logs.join(format!("w{i}.log"));
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .with_context(|| format!("cannot open {}", log_path.display()))?;
            let err_log = log
                .try_clone()
                .with_context(|| format!("cannot open {}", log_path.display()))?;
            command
                .stdin(std::process::Stdio::null())
                .stdout(log)
                .stderr(err_log);
            #[cfg(target_os = "linux")]
            {
                use std::os::unix::process::CommandExt;
                // SAFETY: prctl is async-signal-safe and touches only the child being started.
                // With it the kernel kills the worker when this process dies, even by SIGKILL,
                // so loopback workers never outlive the run that started them.
                unsafe {
                    command.pre_exec(|| {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            let child = command
                .spawn()
                .with_context(|| format!("cannot start worker w{i}"))?;
            local.children.push(child);
        }
        let (cluster, secret) = load(&local.path)?;
        let rt = runtime()?;
        let started = Instant::now();
        loop {
            let results = rt.block_on(ping_all(&cluster, &secret));
            if results.iter().all(|(_, r)| r.is_ok()) {
                return Ok(local);
            }
            if started.elapsed() > Duration::from_secs(10) {
                let down: Vec<String> = results
                    .into_iter()
                    .filter_map(|(name, r)| {
                        r.err()
                            .map(|e| format!("{name}: {}", vocab_pipeline::chain(&e)))
                    })
                    .collect();
                bail!(
                    "workers did not come up within 10 s: {}; their logs are in {}",
                    down.join("; "),
                    logs.display()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `vocab cluster local`: writes a cluster file and secret, starts the workers, waits for Ctrl-C.
pub fn local(args: &LocalArgs) -> anyhow::Result<()> {
    let cluster = LocalCluster::start(&args.dir, args.nodes, args.racks, 0, &args.dir)?;
    println!(
        "cluster local: {} workers up; cluster file {}; logs {}/w*.log\n\
         running in the foreground: use the cluster from another terminal (--cluster {}); \
         Ctrl-C stops the workers",
        args.nodes,
        cluster.path.display(),
        cluster.logs.display(),
        cluster.path.display()
    );
    let _ = std::io::stdout().flush();
    runtime()?
        .block_on(tokio::signal::ctrl_c())
        .context("waiting for Ctrl-C")?;
    Ok(())
}

/// `vocab bench broadcast`: forms a team of the driver and the workers, then times
/// broadcasts of `--bytes` with the k-means collectives, every copy checked by its CRC.
pub fn bench(args: &BenchBroadcastArgs) -> anyhow::Result<()> {
    let algorithm = Algorithm::from(args.algorithm);
    let data: Vec<u8> = (0..args.bytes)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let (mut broadcaster, chunk_size) = bench_team(&args.team, |_| args.bytes as f64)?;
    let runs = timed_runs(
        &mut broadcaster,
        args.team.repeat,
        args.bytes,
        algorithm.name(),
        chunk_size,
        |b| {
            b.broadcast(&data, algorithm).with_context(|| {
                format!("broadcast of {} bytes ({})", args.bytes, algorithm.name())
            })
        },
    )?;
    append_csv(args.team.csv.as_deref(), &runs)
}

/// `vocab bench gather`: forms a team of the driver and the workers, then times gathers of a
/// piece of `--bytes` from every worker at the driver (stage 3's pattern), every piece checked.
pub fn bench_gather(args: &BenchGatherArgs) -> anyhow::Result<()> {
    // The calibration models a gather of a piece per worker from the total it is told.
    let total = |c: &Cluster| args.bytes as f64 * c.nodes.len().max(1) as f64;
    let (mut broadcaster, chunk_size) = bench_team(&args.team, total)?;
    let runs = timed_runs(
        &mut broadcaster,
        args.team.repeat,
        args.bytes,
        "gather",
        chunk_size,
        |b| {
            b.gather(args.bytes)
                .with_context(|| format!("gather of {} bytes per worker", args.bytes))
        },
    )?;
    append_csv(args.team.csv.as_deref(), &runs)
}

/// The benchmarks' team, with its links measured first for `--order auto` (the calibration,
/// chosen for a collective of `bytes(cluster)`, goes to stderr); and the cluster's chunk size.
fn bench_team(
    args: &BenchTeamArgs,
    bytes: impl Fn(&Cluster) -> f64,
) -> anyhow::Result<(Broadcaster, usize)> {
    let path = &args.cluster;
    let (cluster, secret) = load(path)?;
    let chunk_size = cluster.settings.chunk_size;
    let bytes = bytes(&cluster);
    let mut broadcaster = Broadcaster::connect(cluster, secret)
        .with_context(|| format!("forming a team of the workers of {}", path.display()))?;
    if args.order == crate::options::OrderArg::Auto {
        let auto = vocab_cluster::collective::calibration::Auto {
            probe: vocab_cluster::collective::Probe::default(),
            bytes,
        };
        let (calibration, names) = broadcaster.calibrate(auto).context("measuring the links")?;
        eprintln!("{}", calibration.describe(&names));
    }
    Ok((broadcaster, chunk_size))
}

/// Runs `once` `repeat` times, printing a line per run; returns the CSV rows.
fn timed_runs(
    broadcaster: &mut Broadcaster,
    repeat: usize,
    bytes: u64,
    name: &str,
    chunk_size: usize,
    mut once: impl FnMut(&mut Broadcaster) -> anyhow::Result<BroadcastReport>,
) -> anyhow::Result<String> {
    let mut dropped = broadcaster.dropped().to_vec();
    let mut csv = String::new();
    for _ in 0..repeat.max(1) {
        let mut report = once(broadcaster)?;
        // Nodes dropped while the team formed count against the first run.
        dropped.append(&mut report.dropped);
        let dropped = std::mem::take(&mut dropped);
        println!(
            "nodes={} bytes={} algorithm={name} seconds={:.6} gbytes_per_s={:.3}{}",
            report.nodes,
            bytes,
            report.seconds,
            bytes as f64 / report.seconds / 1e9,
            if dropped.is_empty() {
                String::new()
            } else {
                format!(" dropped={}", dropped.join(","))
            }
        );
        let _ = writeln!(
            csv,
            "{},{},{name},{},{:.6},{},{}",
            report.nodes,
            bytes,
            chunk_size,
            report.seconds,
            report.attempts,
            dropped.join(";")
        );
    }
    Ok(csv)
}

/// Appends benchmark rows to `path` (with a header when the file is new).
fn append_csv(path: Option<&Path>, rows: &str) -> anyhow::Result<()> {
    let Some(path) = path else { return Ok(()) };
    let new = !path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    if new {
        file.write_all(b"nodes,bytes,algorithm,chunk_size,seconds,attempts,dropped\n")?;
    }
    file.write_all(rows.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes a file only its owner may read (mode 0600 on Unix), as secrets must be.
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    #[cfg(unix)]
    {
        // An existing file keeps its mode on open: narrow it too.
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)?;
    file.sync_all()
}
