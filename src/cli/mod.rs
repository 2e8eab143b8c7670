//! Command-line interface: the doc comments here are the help text. The commands and their
//! groups here; each group's arguments in a file of their own (`photo_args`,
//! `vocabulary_args`, `model_args`, `run_args`, `daemon_args`).

mod daemon_args;
pub mod guard;
mod model_args;
mod photo_args;
mod run_args;
mod vocabulary_args;

use clap::{Parser, Subcommand};

pub use self::daemon_args::*;
pub use self::model_args::*;
pub use self::photo_args::*;
pub use self::run_args::*;
pub use self::vocabulary_args::*;

/// Visual vocabularies from photo collections, at cluster scale.
#[derive(Debug, Parser)]
#[command(name = "vocab", version, about, propagate_version = true)]
pub struct Cli {
    /// Worker threads for parallel stages (default: all cores).
    #[arg(long, global = true, value_name = "T")]
    pub threads: Option<usize>,
    /// Hide progress bars and progress lines (summaries are still printed).
    #[arg(long, global = true)]
    pub quiet: bool,
    /// Seconds between progress lines when stderr is not a terminal (a log under Slurm,
    /// nohup or CI); a terminal gets bars instead.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = crate::progress::DEFAULT_LOG_EVERY,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub log_every: u64,
    #[command(subcommand)]
    pub command: Command,
}

/// The stages and tools.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sample patches from a folder of photos and describe them with 512-d HOG (or dense SIFT,
    /// --descriptor sift).
    Features(FeaturesArgs),
    /// Convert vectors between formats: vocab's text and binary, .npy, .fvecs, .bvecs, CSV
    /// (streaming).
    Convert(ConvertArgs),
    /// Generate datasets.
    #[command(subcommand)]
    Datasets(DatasetsCommand),
    /// Encode photos as histograms over a vocabulary (bag of visual words).
    Encode(EncodeArgs),
    /// Join encodings of the same photos in one vector a photo, each part's vector times 1 /
    /// sqrt(parts): HOG's and dense SIFT's Fisher vectors, say. Models trained on the joined
    /// histograms classify new photos by encoding every part.
    Join(JoinArgs),
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
    /// Learn a Gaussian mixture over PCA-reduced vectors by EM (the vocabulary of Fisher
    /// vectors), on one process, TCP workers or MPI ranks.
    Mixture(MixtureArgs),
    /// Draw a vocabulary's most used words as the photo patches nearest them (PNG + CSV).
    Words(WordsArgs),
    /// Run the stages of a TOML config in a work directory (cached, resumable).
    Run(RunArgs),
    /// Drop what a finished run no longer needs from its work directory: interrupted runs'
    /// folders, steps of settings no longer used, and (--encodings) trained models' encodings.
    Clean(CleanArgs),
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

impl Command {
    /// The `--engine` flag of a command that has one (the distributed stages and `vocab run`):
    /// the flag as given; [`crate::settings::Backend::of`] reads it with the others.
    pub fn engine(&self) -> Option<vocab_cluster::net::transport::Kind> {
        match self {
            Command::Kmeans(args) => args.team.engine,
            Command::Mixture(args) => args.team.engine,
            Command::Features(args) => args.nodes.engine,
            Command::Encode(args) => args.nodes.engine,
            Command::Run(args) => args.engine,
            _ => None,
        }
    }
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
    /// Time one exact assignment pass of the first rows of a partition set against a
    /// vocabulary, per kernel: seconds, multiply-adds per second and the inertia (CSV).
    Assign(BenchAssignArgs),
}

/// `vocab datasets ...`
#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// Generate the synthetic photo set (four scene kinds, labels.csv) into a folder.
    Photos(PhotosArgs),
    /// Generate Gaussian-blob feature vectors (for scale tests and benchmarks).
    Synth(SynthArgs),
    /// Make the unpacked 15-Scene class folders a dataset folder with the project's labels.csv.
    Scene15(Scene15Args),
}

/// `vocab config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config file (unknown keys and bad values name the key and line).
    Check(ExperimentArgs),
    /// Print a config with every default filled in.
    Show(ConfigFileArgs),
}

/// `err` with a tip when its unknown flag is a flag of the command `args` name, in another
/// case (`--K` for `--k`): clap suggests misspellings but not a flag written in capitals.
pub fn hint_case(
    mut err: clap::Error,
    command: &clap::Command,
    args: &[std::ffi::OsString],
) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::UnknownArgument || err.get(ContextKind::SuggestedArg).is_some() {
        return err;
    }
    let Some(ContextValue::String(given)) = err.get(ContextKind::InvalidArg) else {
        return err;
    };
    let Some(flag) = given.strip_prefix("--") else {
        return err;
    };
    let flag = flag.split('=').next().unwrap_or(flag).to_lowercase();
    // The subcommand the arguments name, and the flags it takes (the global ones included).
    let mut at = command;
    for arg in args.iter().skip(1).filter_map(|a| a.to_str()) {
        if let Some(sub) = at.find_subcommand(arg) {
            at = sub;
        }
    }
    let mut known =
        (at.get_arguments()).chain(command.get_arguments().filter(|a| a.is_global_set()));
    if known.any(|a| a.get_long() == Some(flag.as_str())) {
        err.insert(
            ContextKind::SuggestedArg,
            ContextValue::String(format!("--{flag}")),
        );
    }
    err
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// `vocab ARGS...`'s error, with the case tip.
    fn error_of(args: &[&str]) -> String {
        let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
        let command = Cli::command();
        let err = (command.clone().try_get_matches_from(&args)).expect_err("refused");
        hint_case(err, &command, &args).to_string()
    }

    #[test]
    fn a_flag_in_capitals_gets_its_lower_case_name() {
        let err = error_of(&[
            "vocab",
            "kmeans",
            "--K",
            "32",
            "--features",
            "f",
            "--out",
            "v",
        ]);
        assert!(err.contains("a similar argument exists: '--k'"), "{err}");
        let err = error_of(&["vocab", "mixture", "--Components=3"]);
        assert!(err.contains("'--components'"), "{err}");
        // Another command's flag is not offered, nor a flag that does not exist in any case.
        let err = error_of(&["vocab", "kmeans", "--Mirror"]);
        assert!(!err.contains("similar argument"), "{err}");
        let err = error_of(&["vocab", "kmeans", "--Nope"]);
        assert!(!err.contains("similar argument"), "{err}");
    }
}
