//! Command-line interface: the doc comments here are the help text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::options::{
    AssignArg, BroadcastAlgorithm, DEFAULT_PROBES, ElementArg, EngineArg, FileFormat, InitMethod,
    KernelArg, KernelMapArg, Mode, OrderArg, SolverArg,
};

/// Visual vocabularies from photo collections, at cluster scale.
#[derive(Debug, Parser)]
#[command(name = "vocab", version, about, propagate_version = true)]
pub struct Cli {
    /// Worker threads for parallel stages (default: all cores).
    #[arg(long, global = true, value_name = "T")]
    pub threads: Option<usize>,
    /// Hide progress bars (summaries are still printed).
    #[arg(long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The stages and tools.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sample patches from a folder of photos and describe them with 512-d HOG.
    Features(FeaturesArgs),
    /// Convert a feature file between the text and binary formats (streaming).
    Convert(ConvertArgs),
    /// Generate datasets.
    #[command(subcommand)]
    Datasets(DatasetsCommand),
    /// Encode photos as histograms over a vocabulary (bag of visual words).
    Encode(EncodeArgs),
    /// Train a linear SVM for one attribute on histograms (C by cross-validation by default).
    Train(TrainArgs),
    /// Evaluate a model on the held-out part of its split: accuracy, balanced accuracy, confusion.
    Evaluate(EvaluateArgs),
    /// Label new photos with a model (encoded as its training photos were).
    Classify(ClassifyArgs),
    /// Split a feature file into even partitions for map tasks (streaming).
    Partition(PartitionArgs),
    /// Cluster feature vectors into a vocabulary (k-means).
    Kmeans(KmeansArgs),
    /// Run the stages of a TOML config in a work directory (cached, resumable).
    Run(RunArgs),
    /// Check or show a config file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Run a worker daemon (one per cluster node).
    Worker(WorkerArgs),
    /// Start or inspect a cluster.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Benchmarks (results feed eval/).
    #[command(subcommand)]
    Bench(BenchCommand),
}

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

/// `vocab cluster ...`
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start N workers on loopback as separate processes, with a fresh cluster file and secret;
    /// runs in the foreground until Ctrl-C (use the cluster file from another terminal).
    Local(LocalArgs),
    /// Report which nodes of a cluster file answer.
    Status(StatusArgs),
    /// Measure every link between the driver and the workers, print the matrices, the groups
    /// and the chain built from them, and save them beside the cluster file.
    Calibrate(CalibrateArgs),
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
    #[arg(long, value_enum, default_value_t = BroadcastAlgorithm::Chain)]
    pub algorithm: BroadcastAlgorithm,
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
    #[arg(long, value_enum, default_value_t = OrderArg::Racks)]
    pub order: OrderArg,
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

/// `vocab bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time broadcasts over a cluster: seconds and GB/s per run.
    Broadcast(BenchBroadcastArgs),
    /// Time gathers over a cluster (stage 3's pattern): every worker's piece to the driver,
    /// directly or up the measured gather tree; seconds per run.
    Gather(BenchGatherArgs),
    /// Time the HOG kernels on decoded photos: dense (Mpix/s) and random patches (patches/s).
    Hog(BenchHogArgs),
    /// Under mpirun (build with --features mpi): vocab's collectives against MPI's own on the
    /// same ranks and bytes (chain broadcast vs MPI_Bcast; stage 2 vs MPI_Reduce_scatter_block
    /// and MPI_Allreduce). Rank 0 prints one CSV row per run.
    Collectives(BenchCollectivesArgs),
    /// Time one node's partial sums (accumulation, stage-1 merge, stage-2 encoding) held
    /// sparse, dense per map task and dense shared, on synthetic vectors with uniform labels.
    Partials(BenchPartialsArgs),
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
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Timed repetitions of each measurement; the best is reported.
    #[arg(long, value_name = "R", default_value_t = 5)]
    pub repeat: usize,
    /// Folder for patches.csv (the random patches timed) and vocab.csv (the results).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Arguments of `vocab features`.
#[derive(Debug, Args)]
pub struct FeaturesArgs {
    /// Folder of photos, searched recursively (JPEG, PNG, WebP, TIFF, BMP).
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Feature file to write; manifests go beside it as <out>.images.csv and <out>.skipped.csv.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Use only the photos listed in the first column of this CSV (paths relative to --input).
    #[arg(long, value_name = "CSV")]
    pub labels: Option<PathBuf>,
    /// Where patches are cut.
    #[arg(long, value_enum, default_value_t = Mode::Random)]
    pub mode: Mode,
    /// Random mode: patches per photo.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub per_image: usize,
    /// Dense mode: grid step in pixels (multiples of 8 use the whole-image HOG definition).
    #[arg(long, value_name = "PX", default_value_t = 8)]
    pub stride: usize,
    /// Random mode: seed of the patch positions.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Output format [default: text for .txt/.text files, bin otherwise].
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    /// Downscale photos whose longer side exceeds PX (area averaging).
    #[arg(long, value_name = "PX")]
    pub max_side: Option<usize>,
    /// Skip photos whose header declares more than MPIX megapixels, before decoding them.
    #[arg(long, value_name = "MPIX", default_value_t = crate::options::DEFAULT_MAX_MPIX)]
    pub max_pixels: u64,
    #[command(flatten)]
    pub nodes: NodesArgs,
}

/// Where a photo stage runs: here, or sharded over nodes (the same files either way).
#[derive(Debug, Args)]
pub struct NodesArgs {
    /// Share the photos out to the workers of this cluster file (every worker reads the photo
    /// folder at the same absolute path); the output is this machine's, byte for byte.
    #[arg(long, value_name = "FILE", conflicts_with = "local_nodes")]
    pub cluster: Option<PathBuf>,
    /// Start N workers on loopback and share the photos out to them; their logs go to
    /// <out>.workers/.
    #[arg(long, value_name = "N")]
    pub local_nodes: Option<usize>,
    /// `mpi`: share the photos out to the ranks of the MPI job this runs in (under mpirun or
    /// srun; needs a build with `--features mpi`); `tcp`: to worker daemons.
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
}

/// Arguments of `vocab encode`.
#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// Vocabulary file (text or bin, from `vocab kmeans`).
    #[arg(long, value_name = "FILE")]
    pub vocabulary: PathBuf,
    /// Folder of photos, searched recursively.
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Only the photos listed in the first column of this CSV.
    #[arg(long, value_name = "CSV")]
    pub labels: Option<PathBuf>,
    /// Histograms: CSV (picture_id,path,h0,...) for .csv paths, binary feature format otherwise.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub options: crate::options::EncodeOptions,
    #[command(flatten)]
    pub nodes: NodesArgs,
}

/// Arguments of `vocab train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Histograms from `vocab encode` (CSV, or bin with its manifest).
    #[arg(long, value_name = "FILE")]
    pub histograms: PathBuf,
    /// Labels CSV: path, then attribute columns; an empty cell leaves the photo out.
    #[arg(long, value_name = "CSV")]
    pub labels: PathBuf,
    /// The attribute column to learn.
    #[arg(long, value_name = "NAME")]
    pub attribute: String,
    /// Use this C instead of choosing it by cross-validation.
    #[arg(long, value_name = "C", conflicts_with = "cv")]
    pub c: Option<f64>,
    /// Folds of the cross-validation that chooses C on the training part.
    #[arg(long, value_name = "FOLDS", default_value_t = 5)]
    pub cv: usize,
    /// Solver: dcd (dual coordinate descent, liblinear's; fast) or linfa (linfa-svm's SMO; builds
    /// an n x n kernel matrix, for small sets and cross-checks).
    #[arg(long, value_enum, default_value_t = SolverArg::Dcd)]
    pub solver: SolverArg,
    /// Split CSV (path,split with train/test): train on its train part only [default: train on
    /// every labelled photo].
    #[arg(long, value_name = "CSV", conflicts_with = "holdout")]
    pub split: Option<PathBuf>,
    /// Hold out this fraction of each class (seeded, stratified) for `vocab evaluate
    /// --held-out`; 0.5 is the split of `vocab run` [default: nothing held out].
    #[arg(long, value_name = "FRACTION")]
    pub holdout: Option<f64>,
    /// Seed of the held-out split and of cross-validation.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub split_seed: u64,
    /// An explicit feature map of an additive kernel on the histograms, so that the linear SVM
    /// approximates that kernel's SVM (Vedaldi and Zisserman's homogeneous kernel maps; for
    /// L1-normalised histograms, `vocab encode --norm l1`); the model keeps it and applies it
    /// to every photo it scores.
    #[arg(long, value_enum, default_value_t = KernelMapArg::None)]
    pub kernel_map: KernelMapArg,
    /// Frequencies of the kernel map after the first: 2 N + 1 values per histogram bin.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub map_order: usize,
    /// Model file (JSON).
    #[arg(long, value_name = "MODEL")]
    pub out: PathBuf,
}

/// Arguments of `vocab evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// Model from `vocab train`.
    #[arg(long, value_name = "MODEL")]
    pub model: PathBuf,
    /// Histograms (the same file or one encoded the same way).
    #[arg(long, value_name = "FILE")]
    pub histograms: PathBuf,
    /// Labels CSV.
    #[arg(long, value_name = "CSV")]
    pub labels: PathBuf,
    /// Score only the photos the model held out (`vocab train --holdout` or `--split`) instead
    /// of every labelled photo of the histograms.
    #[arg(long)]
    pub held_out: bool,
}

/// Arguments of `vocab classify`.
#[derive(Debug, Args)]
pub struct ClassifyArgs {
    /// Model from `vocab train`.
    #[arg(long, value_name = "MODEL")]
    pub model: PathBuf,
    /// Folder of photos to label.
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// CSV to write: picture_id,path,<attribute>.
    #[arg(long, value_name = "CSV")]
    pub out: PathBuf,
}

/// Arguments of `vocab convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Feature file to read (format detected).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Feature file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Output format [default: the other one].
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
}

/// `vocab datasets ...`
#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// Generate the synthetic photo set (four scene kinds, labels.csv) into a folder.
    Photos(PhotosArgs),
    /// Generate Gaussian-blob feature vectors (for scale tests and benchmarks).
    Synth(SynthArgs),
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
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Output format [default: text for .txt/.text files, bin otherwise].
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    /// Feature file to write.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Arguments of `vocab partition`.
#[derive(Debug, Args)]
pub struct PartitionArgs {
    /// Feature file to split (text or bin).
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
    #[arg(long, value_enum, default_value_t = ElementArg::F32)]
    pub element: ElementArg,
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
    /// Iterations at most.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub iterations: u64,
    /// Stop when the relative change of inertia falls below this.
    #[arg(long, value_name = "TOL", default_value_t = 1e-4)]
    pub tol: f64,
    /// Seed of initialisation and empty-cluster splits.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub seed: u64,
    /// Initialisation.
    #[arg(long, value_enum, default_value_t = InitMethod::Random)]
    pub init: InitMethod,
    /// Start from these centroids (vocabulary file, text or bin) instead.
    #[arg(long, value_name = "FILE", conflicts_with = "init")]
    pub init_centroids: Option<PathBuf>,
    /// Prune the assignment with Yinyang bounds (centroids in groups, a lower bound per group):
    /// the nearest centroid still, up to float ties, with far fewer distance computations once
    /// centroids settle. Keeps 4 x min(k/10, 1024) bytes of bounds per vector.
    #[arg(long)]
    pub prune: bool,
    /// Kernel of the full assignment passes (also on cluster workers; with --prune, of the full
    /// passes pruning still makes: the first iteration and searches too wide to pay off).
    #[arg(long, value_enum, default_value_t = KernelArg::F32)]
    pub kernel: KernelArg,
    /// Exact or approximate assignment (approx: for vocabularies of hundreds of thousands to
    /// millions of words, minutes per iteration instead of hours).
    #[arg(long, value_enum, default_value_t = AssignArg::Exact)]
    pub assign: AssignArg,
    /// Lists of the approximate search's index [default: sqrt(k)].
    #[arg(long, value_name = "N")]
    pub lists: Option<u32>,
    /// Lists the approximate search visits per vector: more finds the nearest more often and
    /// costs more.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PROBES)]
    pub probes: u32,
    /// Continue from the checkpoint of a previous run with the same --out, k, seed and input.
    #[arg(long)]
    pub resume: bool,
    /// Run on the workers of this cluster file (Map-Collective: chain broadcast, map on cached
    /// partitions, three-stage aggregation). --features must be a partition folder that every
    /// worker can read at the same absolute path.
    #[arg(long, value_name = "FILE", conflicts_with = "local_nodes")]
    pub cluster: Option<PathBuf>,
    /// Start N workers on loopback for this run and run on them (same code path as a cluster);
    /// their logs go to <out>.workers/.
    #[arg(long, value_name = "N")]
    pub local_nodes: Option<usize>,
    /// Broadcast algorithm for the centroids on a cluster.
    #[arg(long, value_enum, default_value_t = BroadcastAlgorithm::Chain)]
    pub broadcast: BroadcastAlgorithm,
    /// Switch stage-1 (local) aggregation off: every map task ships its own partial sums (to
    /// measure what local aggregation saves).
    #[arg(long)]
    pub no_local_aggregation: bool,
    /// Fault injection for tests: exit right after checkpointing iteration N (a crash).
    #[arg(long, value_name = "N", hide = true)]
    pub exit_after_iteration: Option<u64>,
    /// The distributed engine: `tcp` (vocab's worker daemons: --cluster or --local-nodes) or
    /// `mpi` (under mpirun or srun: rank 0 drives and maps, every rank maps its share; needs a
    /// build with `--features mpi`).
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// Rack map for `--engine mpi`: a TOML file of `"host" = "rack"` lines (default: each host
    /// is a rack). The chain keeps a rack's ranks together.
    #[arg(long, value_name = "FILE")]
    pub racks: Option<PathBuf>,
    /// Chain order on a distributed engine: `racks` (rack labels, or the cluster file's order)
    /// or `auto` (measure every link at the start, build the chain from the measurements).
    #[arg(long, value_enum, default_value_t = OrderArg::Racks)]
    pub order: OrderArg,
    /// Chunk size of the pipelined broadcasts and of stage 2 under `--engine mpi`.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "1M")]
    pub chunk_size: u64,
    /// Fault injection for tests: rank R exits in iteration N after its map tasks ("R:N").
    #[arg(long, value_name = "R:N", hide = true)]
    pub exit_rank_at: Option<String>,
    /// Vocabulary format: text (one centroid per line, its values separated by spaces; no
    /// picture id, row or column) or bin (the binary feature format, record j = centroid j)
    /// [default: text for .txt/.text files, bin otherwise].
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    /// Vocabulary file; beside it <out>.meta.toml, <out>.iterations.csv, <out>.ckpt/.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Arguments of `vocab datasets photos`.
#[derive(Debug, Args)]
pub struct PhotosArgs {
    /// Folder to write the photos and labels.csv into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Photos per scene kind.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub per_kind: usize,
    /// Seed of the generator.
    #[arg(long, value_name = "S", default_value_t = 7)]
    pub seed: u64,
}

/// Arguments of `vocab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The experiment's TOML config.
    pub config: PathBuf,
    /// Work directory for the stages' outputs [default: work/<config name>].
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Photo folder instead of the config's [dataset] (its labels: DIR/labels.csv, or --labels).
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// Labels CSV (path, then attribute columns) instead of the config's or the photo folder's.
    #[arg(long, value_name = "CSV")]
    pub labels: Option<PathBuf>,
    /// Re-run this stage and every later one even if cached
    /// (dataset, features, partition, kmeans, encode, svm, report).
    #[arg(long, value_name = "STAGE")]
    pub force: Option<String>,
    /// Run k-means on the workers of this cluster file (default: loopback workers started for
    /// the run, or [kmeans] cluster).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// Print the stages, data sizes and the cost model's per-iteration traffic, without running.
    #[arg(long)]
    pub plan: bool,
    /// Fault injection for tests: exit right after k-means checkpoints iteration N (a crash).
    #[arg(long, value_name = "N", hide = true)]
    pub exit_after_iteration: Option<u64>,
    /// Fault injection for tests (`--engine mpi`): rank R exits when given photo round N.
    #[arg(long, value_name = "R:N", hide = true)]
    pub exit_rank_in_round: Option<String>,
    /// Run k-means on `mpi` (under mpirun or srun; rank 0 runs every other stage) or on `tcp`
    /// workers (the default when k-means is distributed).
    #[arg(long, value_enum)]
    pub engine: Option<EngineArg>,
    /// Rack map for `--engine mpi` (TOML: `"host" = "rack"`).
    #[arg(long, value_name = "FILE")]
    pub racks: Option<PathBuf>,
}

/// `vocab config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file (unknown keys and bad values name the key and line).
    Check(ConfigFileArgs),
    /// Print a config with every default filled in.
    Show(ConfigFileArgs),
}

/// A config file argument.
#[derive(Debug, Args)]
pub struct ConfigFileArgs {
    /// The TOML config.
    pub config: PathBuf,
}
