//! Arguments of `vocab convert`, `vocab datasets synth`, `vocab partition`, `vocab kmeans` and
//! `vocab mixture`.

use std::path::PathBuf;

use clap::Args;

use super::daemon_args::parse_size;

use vocab_cluster::collective::Algorithm;
use vocab_cluster::collective::calibration::Order;
use vocab_cluster::net::transport::Kind as TransportKind;
use vocab_pipeline::store::Element;
use vocab_pipeline::store::Format;

/// Arguments of `vocab convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Feature file to read: vocab's binary or text format, .npy (2-D float32, float64 or
    /// uint8), .fvecs, .bvecs or .csv (comma-separated, optional header), told by magic or
    /// extension.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// File to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Output format [default: by the output's extension: .txt/.text text, .npy, .fvecs,
    /// .bvecs, .csv; vocab's binary format otherwise].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// The input is a vocabulary (a centroid per record or line, as `vocab kmeans` writes it):
    /// text and CSV are written as bare values, a centroid a line.
    #[arg(long)]
    pub vocabulary: bool,
}

/// Arguments of `vocab datasets synth`.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Number of vectors.
    #[arg(long, value_name = "N")]
    pub n: u64,
    /// Values per vector.
    #[arg(long, value_name = "D", default_value_t = 512)]
    pub dims: usize,
    /// Number of blobs.
    #[arg(long, value_name = "C", default_value_t = 64)]
    pub clusters: usize,
    /// Seed.
    #[arg(long, value_name = "S", default_value_t = 0, value_parser = crate::options::parse_seed)]
    pub seed: u64,
    /// Output format [default: text for .txt/.text files, bin otherwise].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Feature file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Arguments of `vocab partition`.
#[derive(Debug, Args)]
pub struct PartitionArgs {
    /// Feature file to split: vocab's binary or text format, .npy, .fvecs, .bvecs or .csv.
    #[arg(long, value_name = "FILE")]
    pub features: PathBuf,
    /// Number of partitions [default: 4 per core].
    #[arg(long, value_name = "P")]
    pub parts: Option<usize>,
    /// Folder for the partitions and manifest.toml.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Storage of the values: f32, or u8 (4x smaller; values must lie in [0, 1], as HOG values
    /// do; at most 1/510 absolute error).
    #[arg(long, value_enum, default_value_t = Element::default())]
    pub element: Element,
}

/// Where a job over partitions runs (`vocab kmeans`, `vocab mixture`): one process, TCP
/// workers or MPI ranks, and how its collectives go.
#[derive(Debug, Args)]
pub struct TeamArgs {
    /// Run on the workers of this cluster file (Map-Collective: chain broadcast, map on cached
    /// partitions, three-stage aggregation). --features must be a partition folder that every
    /// worker can read at the same absolute path.
    #[arg(long, value_name = "FILE", conflicts_with = "local_nodes")]
    pub cluster: Option<PathBuf>,
    /// Start N workers on loopback for this run and run on them (same code path as a cluster);
    /// their logs go to <out>.workers/.
    #[arg(long, value_name = "N")]
    pub local_nodes: Option<usize>,
    /// Broadcast algorithm for the centroids (or the mixture) on a cluster.
    #[arg(long, value_enum, default_value_t = Algorithm::default())]
    pub broadcast: Algorithm,
    /// Switch stage-1 (local) aggregation off: every map task ships its own partial sums (to
    /// measure what local aggregation saves).
    #[arg(long)]
    pub no_local_aggregation: bool,
    /// The distributed engine: `tcp` (vocab's worker daemons: --cluster or --local-nodes) or
    /// `mpi` (under mpirun or srun: rank 0 drives and maps, every rank maps its share; needs a
    /// build with `--features mpi`).
    #[arg(long, value_enum)]
    pub engine: Option<TransportKind>,
    /// Rack map for `--engine mpi`: a TOML file of `"host" = "rack"` lines (default: each host
    /// is a rack). The chain keeps a rack's ranks together.
    #[arg(long, value_name = "FILE")]
    pub racks: Option<PathBuf>,
    /// Chain order on a distributed engine: `racks` (rack labels, or the cluster file's order)
    /// or `auto` (measure every link at the start, build the chain from the measurements).
    #[arg(long, value_enum, default_value_t = Order::default())]
    pub order: Order,
    /// Chunk size of the pipelined broadcasts and of stage 2 under `--engine mpi`.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "1M")]
    pub chunk_size: u64,
    /// Fault injection for tests: rank R exits in iteration N after its map tasks ("R:N").
    #[arg(long, value_name = "R:N", hide = true)]
    pub exit_rank_at: Option<String>,
}

/// Arguments of `vocab kmeans`.
#[derive(Debug, Args)]
pub struct KmeansArgs {
    /// A feature file (loaded into memory) or a partition folder (memory-mapped).
    #[arg(long, value_name = "FILE|DIR")]
    pub features: PathBuf,
    /// Number of centroids (visual words).
    #[arg(long, value_name = "K")]
    pub k: usize,
    /// Start from these centroids (a vocabulary: vocab's text or binary, .npy, .fvecs, .bvecs,
    /// .csv) instead.
    #[arg(long, value_name = "FILE", conflicts_with = "init")]
    pub init_centroids: Option<PathBuf>,
    /// How it runs: a config's `[kmeans]`.
    #[command(flatten)]
    pub options: crate::options::KmeansOptions,
    /// Continue from the checkpoint of a previous run with the same --out, k, seed and input.
    #[arg(long)]
    pub resume: bool,
    /// Fault injection for tests: exit right after checkpointing iteration N (a crash).
    #[arg(long, value_name = "N", hide = true)]
    pub exit_after_iteration: Option<u64>,
    /// Where it runs.
    #[command(flatten)]
    pub team: TeamArgs,
    /// Vocabulary format: text (one centroid per line, its values separated by spaces; no
    /// picture id, row or column) or bin (the binary feature format, record j = centroid j)
    /// [default: text for .txt/.text files, bin otherwise].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Vocabulary file; beside it <out>.meta.toml, <out>.iterations.csv, <out>.ckpt/.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Arguments of `vocab mixture`.
#[derive(Debug, Args)]
pub struct MixtureArgs {
    /// A feature file (loaded into memory) or a partition folder (memory-mapped).
    #[arg(long, value_name = "FILE|DIR")]
    pub features: PathBuf,
    /// Gaussians in the mixture (the Fisher vector's vocabulary).
    #[arg(long, value_name = "K", default_value_t = vocab_pipeline::mixture::Params::default().components)]
    pub components: usize,
    /// How it is learned: a config's `[mixture]`.
    #[command(flatten)]
    pub options: crate::options::MixtureOptions,
    /// Where it runs.
    #[command(flatten)]
    pub team: TeamArgs,
    /// Mixture file (JSON: the PCA and the mixture); beside it <out>.steps.csv and the
    /// checkpoint <out>.ckpt, written after every EM step.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Take up an interrupted run from its checkpoint (the same --out, features, Gaussians,
    /// projection, seed and reg; more or fewer steps may be asked): the same mixture as a run
    /// never interrupted.
    #[arg(long)]
    pub resume: bool,
    /// Fault injection for tests: exit right after checkpointing EM step N (a crash).
    #[arg(long, value_name = "N", hide = true)]
    pub exit_after_iteration: Option<u64>,
}
