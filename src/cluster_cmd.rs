//! `vocab worker`, `vocab cluster local|status|calibrate` and `vocab bench broadcast|gather` (the
//! collectives timed on a team of the driver and the workers).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, bail, ensure};
use vocab_cluster::net::auth::Secret;
use vocab_cluster::net::config::Cluster;
use vocab_cluster::worker::Worker;

use crate::cli::{
    BenchBroadcastArgs, BenchGatherArgs, BenchTeamArgs, CalibrateArgs, LocalArgs, StatusArgs,
    WorkerArgs,
};
use crate::daemons::{LocalCluster, load, ping_all, runtime};
use crate::faults::ExitAt;
use crate::links::links_path;
use vocab_cluster::collective::calibration::Order;

use vocab_cluster::jobs::bench::{BroadcastReport, Broadcaster};

/// `vocab worker`.
/// Lifts the soft limit on open files to the hard one: a worker holds a connection per handshake
/// under way (up to `admission::MAX_HANDSHAKES`) besides its team's links, and a limit reached
/// would turn honest peers away with the flood.
fn raise_open_files() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit on a struct this function owns.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}

pub fn worker(args: &WorkerArgs) -> anyhow::Result<()> {
    let (cluster, secret) = if args.secret_stdin {
        let stdin = Path::new("<standard input>");
        let secret = Secret::read_from(std::io::stdin().lock(), stdin)?;
        (Cluster::load(&args.cluster)?, secret)
    } else {
        load(&args.cluster)?
    };
    ensure!(
        cluster.nodes.iter().any(|n| n.name == args.name),
        "node {} is not in cluster file {}",
        args.name,
        args.cluster.display()
    );
    raise_open_files();
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

/// `vocab cluster local`: writes a cluster file and secret, starts the workers, waits for Ctrl-C.
pub fn local(args: &LocalArgs) -> anyhow::Result<()> {
    let keep = crate::daemons::Keep::SecretFile;
    let cluster = LocalCluster::start(&args.dir, args.nodes, args.racks, 0, &args.dir, keep)?;
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
    let algorithm = args.algorithm;
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
    if args.order == Order::Auto {
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
    let mut file = vocab_pipeline::output::append(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    if new {
        file.write_all(b"nodes,bytes,algorithm,chunk_size,seconds,attempts,dropped\n")?;
    }
    file.write_all(rows.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
