//! Arguments of the worker daemon and of the cluster and benchmark commands.

use std::path::PathBuf;
use vocab_cluster::collective::Algorithm;
use vocab_cluster::collective::calibration::Order;
use vocab_pipeline::kmeans::Kernel;

use clap::Args;

/// Arguments of `vocab worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Address to listen on (host:port).
    #[arg(long, value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// The cluster file (nodes, racks, settings, secret file).
    #[arg(long, value_name = "FILE")]
    pub cluster: PathBuf,
    /// This node's name in the cluster file.
    #[arg(long, value_name = "NODE")]
    pub name: String,
    /// Read the secret from standard input instead of the cluster file's secret_file (loopback
    /// workers: their secret is never written to disk).
    #[arg(long, hide = true)]
    pub secret_stdin: bool,
    /// Fault injection for tests: exit after receiving this many broadcast bytes.
    #[arg(long, value_name = "BYTES", hide = true)]
    pub exit_after_bytes: Option<u64>,
    /// Fault injection for tests: exit in k-means iteration N, after its map tasks.
    #[arg(long, value_name = "N", hide = true)]
    pub exit_at_step: Option<u64>,
    /// Fault injection for tests: exit when given the photos of round N of a photo stage.
    #[arg(long, value_name = "N", hide = true)]
    pub exit_at_round: Option<u64>,
}

/// Arguments of `vocab cluster calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The cluster file; the measurements go to <cluster>.links.json.
    #[arg(long, value_name = "FILE")]
    pub cluster: PathBuf,
    /// Bytes of the bandwidth probe of each link (each way).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "1M")]
    pub probe: u64,
    /// Bytes of the broadcast the chain is chosen for.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64M")]
    pub bytes: u64,
}

/// Arguments of `vocab cluster local`.
#[derive(Debug, Args)]
pub struct LocalArgs {
    /// Number of workers.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub nodes: usize,
    /// Number of racks the nodes are spread over (round robin).
    #[arg(long, value_name = "R", default_value_t = 1)]
    pub racks: usize,
    /// Folder for cluster.toml and the secret file.
    #[arg(long, value_name = "DIR", default_value = "work/cluster")]
    pub dir: PathBuf,
}

/// Arguments of `vocab cluster status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    pub cluster: PathBuf,
}

/// Arguments of `vocab bench broadcast`.
#[derive(Debug, Args)]
pub struct BenchBroadcastArgs {
    /// Message size, e.g. 1000, 64K, 512M, 1G (binary units).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bytes: u64,
    /// Algorithm.
    #[arg(long, value_enum, default_value_t = Algorithm::Chain)]
    pub algorithm: Algorithm,
    #[command(flatten)]
    pub team: BenchTeamArgs,
}

/// Arguments of `vocab bench gather`.
#[derive(Debug, Args)]
pub struct BenchGatherArgs {
    /// Bytes each worker sends to the driver, e.g. 1000, 64K, 2M (binary units).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bytes: u64,
    #[command(flatten)]
    pub team: BenchTeamArgs,
}

/// What the cluster benchmarks share.
#[derive(Debug, Args)]
pub struct BenchTeamArgs {
    /// The cluster file.
    #[arg(long, value_name = "FILE")]
    pub cluster: PathBuf,
    /// Timed runs.
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub repeat: usize,
    /// `racks`: the cluster file's chain, the binomial tree, the direct gather; `auto`: the
    /// chain and trees built from measured links (measured once, before the timed runs; the
    /// calibration goes to stderr).
    #[arg(long, value_enum, default_value_t = Order::Racks)]
    pub order: Order,
    /// Append one CSV row per run to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// Parses `123`, `64K`, `512M`, `1G` (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&t[..i], t[i..].trim().to_ascii_uppercase()),
        None => (t, String::new()),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("size {text:?} does not start with a number"))?;
    let scale: u64 = match unit.trim_end_matches(['B', 'I']) {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return Err(format!("size {text:?}: unit must be K, M or G")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("size {text:?} is too large"))
}

/// Arguments of `vocab bench partials`.
#[derive(Debug, Args)]
pub struct BenchPartialsArgs {
    /// Centroid counts.
    #[arg(
        long,
        value_name = "K",
        value_delimiter = ',',
        default_value = "65536,1048576"
    )]
    pub k: Vec<usize>,
    /// Values per vector.
    #[arg(long, value_name = "D", default_value_t = 512)]
    pub dims: usize,
    /// The node's vectors.
    #[arg(long, value_name = "N", default_value_t = 59_360)]
    pub vectors: usize,
    /// Map tasks (one partial each; vocab runs one per thread).
    #[arg(long, value_name = "T", default_value_t = 2)]
    pub tasks: usize,
    /// Nodes of the cluster (the centroids are cut into this many stage-2 ranges).
    #[arg(long, value_name = "W", default_value_t = 125)]
    pub nodes: usize,
    /// Timed repetitions; the best is reported.
    #[arg(long, value_name = "R", default_value_t = 3)]
    pub repeat: usize,
    /// Memory the dense forms may take; a form that needs more is reported as skipped.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "12G")]
    pub max_bytes: u64,
}

/// Arguments of `vocab bench assign`.
#[derive(Debug, Args)]
pub struct BenchAssignArgs {
    /// Partition folder whose first rows are assigned (held as stored: u8 codes or f32).
    #[arg(long, value_name = "DIR")]
    pub features: PathBuf,
    /// The centroids: a vocabulary file.
    #[arg(long, value_name = "FILE")]
    pub vocabulary: PathBuf,
    /// Rows taken from the start of the partition set.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub rows: usize,
    /// Kernels of the full pass, timed one after another.
    #[arg(
        long,
        value_name = "KERNEL",
        value_delimiter = ',',
        default_value = "int8"
    )]
    pub kernel: Vec<Kernel>,
}

/// Arguments of `vocab bench collectives`.
#[derive(Debug, Args)]
pub struct BenchCollectivesArgs {
    /// Message sizes (a broadcast's bytes; stage 2 reduces as many bytes of sums per rank).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, value_delimiter = ',', default_value = "16M")]
    pub bytes: Vec<u64>,
    /// Chunk size of vocab's pipelined chain and stage 2.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "1M")]
    pub chunk_size: u64,
    /// Timed runs of each collective (alternating, after one untimed warm-up round).
    #[arg(long, value_name = "R", default_value_t = 5)]
    pub repeat: usize,
    /// Append the CSV rows to this file too.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// A label for the rows (e.g. the network).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub label: String,
}

/// Arguments of `vocab bench hog`.
#[derive(Debug, Args)]
pub struct BenchHogArgs {
    /// Folder of photos.
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Only the photos listed in this CSV (first column: path relative to --input).
    #[arg(long, value_name = "CSV")]
    pub labels: Option<PathBuf>,
    /// Random patches per photo.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub per_image: usize,
    /// Seed of the random patch positions.
    #[arg(long, value_name = "S", default_value_t = 1, value_parser = crate::options::parse_seed)]
    pub seed: u64,
    /// Timed repetitions of each measurement; the best is reported.
    #[arg(long, value_name = "R", default_value_t = 5)]
    pub repeat: usize,
    /// Folder for patches.csv (the random patches timed) and vocab.csv (the results).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}
