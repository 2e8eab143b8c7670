//! `vocab worker`, `vocab cluster local|status` and `vocab bench broadcast`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use rand::RngCore;
use vocab_cluster::auth::Secret;
use vocab_cluster::broadcast::{Algorithm, broadcast};
use vocab_cluster::config::Cluster;
use vocab_cluster::peer::ping;
use vocab_cluster::worker::Worker;

use crate::cli::{BenchBroadcastArgs, BroadcastAlgorithm, LocalArgs, StatusArgs, WorkerArgs};

/// The name the driver authenticates with.
const DRIVER: &str = "driver";

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Loads a cluster file and its secret.
fn load(path: &Path) -> anyhow::Result<(Cluster, Secret)> {
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
        let worker = Worker::new(&args.name, cluster, secret, args.exit_after_bytes);
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
async fn ping_all(cluster: &Cluster, secret: &Secret) -> Vec<(String, Result<Duration, String>)> {
    let mut out = Vec::new();
    for node in cluster.chain_nodes() {
        out.push((node.name.clone(), ping(cluster, node, secret, DRIVER).await));
    }
    out
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
                "{name:<12} {:<22} rack {:<8} DOWN: {reason}",
                node.address, node.rack
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
    ensure!(args.nodes > 0, "--nodes must be at least 1");
    ensure!(args.racks > 0, "--racks must be at least 1");
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let secret_path = args.dir.join("secret");
    std::fs::write(&secret_path, hex + "\n")
        .with_context(|| format!("cannot write {}", secret_path.display()))?;
    // Ports: ask the kernel for free ones (a small race with other programs, reported clearly).
    let mut text = String::from("[settings]\nsecret_file = \"secret\"\n");
    let mut ports = Vec::new();
    for i in 0..args.nodes {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        ports.push(port);
        let _ = write!(
            text,
            "\n[[nodes]]\nname = \"w{i}\"\naddress = \"127.0.0.1:{port}\"\nrack = \"r{}\"\n",
            i % args.racks
        );
    }
    let cluster_path = args.dir.join("cluster.toml");
    std::fs::write(&cluster_path, &text)
        .with_context(|| format!("cannot write {}", cluster_path.display()))?;
    let exe = std::env::current_exe().context("cannot find the vocab executable")?;
    let mut children = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let child = std::process::Command::new(&exe)
            .args([
                "worker",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--name",
                &format!("w{i}"),
                "--cluster",
            ])
            .arg(&cluster_path)
            .spawn()
            .with_context(|| format!("cannot start worker w{i}"))?;
        children.push(child);
    }
    let (cluster, secret) = load(&cluster_path)?;
    let rt = runtime()?;
    let started = Instant::now();
    loop {
        let results = rt.block_on(ping_all(&cluster, &secret));
        if results.iter().all(|(_, r)| r.is_ok()) {
            break;
        }
        if started.elapsed() > Duration::from_secs(10) {
            for c in &mut children {
                let _ = c.kill();
            }
            bail!("workers did not come up within 10 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "cluster local: {} workers up; cluster file {}",
        args.nodes,
        cluster_path.display()
    );
    let _ = std::io::stdout().flush();
    rt.block_on(tokio::signal::ctrl_c())
        .context("waiting for Ctrl-C")?;
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    Ok(())
}

/// `vocab bench broadcast`.
pub fn bench(args: &BenchBroadcastArgs) -> anyhow::Result<()> {
    let (cluster, secret) = load(&args.cluster)?;
    let algorithm = match args.algorithm {
        BroadcastAlgorithm::Chain => Algorithm::Chain,
        BroadcastAlgorithm::Simple => Algorithm::Simple,
        BroadcastAlgorithm::Mst => Algorithm::Mst,
        BroadcastAlgorithm::Multichain => Algorithm::MultiChain,
    };
    let data = Bytes::from(
        (0..args.bytes)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect::<Vec<_>>(),
    );
    let rt = runtime()?;
    let mut csv = String::new();
    for run in 0..args.repeat.max(1) {
        let id = (std::process::id() as u64) << 32 | run as u64;
        let report = rt
            .block_on(broadcast(
                &cluster,
                &secret,
                DRIVER,
                id,
                data.clone(),
                algorithm,
            ))
            .with_context(|| format!("broadcast of {} bytes ({})", args.bytes, algorithm.name()))?;
        println!(
            "nodes={} bytes={} algorithm={} seconds={:.6} gbytes_per_s={:.3}{}",
            report.nodes,
            args.bytes,
            algorithm.name(),
            report.seconds,
            args.bytes as f64 / report.seconds / 1e9,
            if report.dropped.is_empty() {
                String::new()
            } else {
                format!(" dropped={}", report.dropped.join(","))
            }
        );
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.6},{},{}",
            report.nodes,
            args.bytes,
            algorithm.name(),
            cluster.settings.chunk_size,
            report.seconds,
            report.attempts,
            report.dropped.join(";")
        );
    }
    if let Some(path) = &args.csv {
        let new = !path.exists();
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        if new {
            file.write_all(b"nodes,bytes,algorithm,chunk_size,seconds,attempts,dropped\n")?;
        }
        file.write_all(csv.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
