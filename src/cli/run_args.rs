//! Arguments of `vocab run` and `vocab config`.

use std::path::PathBuf;
use vocab_cluster::net::transport::Kind as TransportKind;

use clap::Args;

/// A config and the photos it runs on: `vocab run`'s and `vocab config check`'s.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The experiment's TOML config.
    pub config: PathBuf,
    /// Photo folder instead of the config's [dataset] (its labels: DIR/labels.csv, or --labels).
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// Labels CSV (path, then attribute columns) instead of the config's or the photo folder's.
    #[arg(long, value_name = "CSV")]
    pub labels: Option<PathBuf>,
    /// Test folder: train on every photo of the dataset, score every labelled photo here (its
    /// labels: DIR/labels.csv, or --test-labels).
    #[arg(long, value_name = "DIR")]
    pub test: Option<PathBuf>,
    /// The test folder's labels CSV.
    #[arg(long, value_name = "CSV")]
    pub test_labels: Option<PathBuf>,
    /// Descriptors made elsewhere of the test folder's photos (with [features] from): a folder
    /// mirroring the test folder's.
    #[arg(long, value_name = "DIR")]
    pub test_from: Option<PathBuf>,
}

/// Arguments of `vocab run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The config and its photos.
    #[command(flatten)]
    pub experiment: ExperimentArgs,
    /// Work directory for the stages' outputs [default: work/<config name>].
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Re-run this stage and every later one even if cached
    /// (dataset, features, partition, kmeans, mixture, encode, svm, report).
    #[arg(long, value_name = "STAGE")]
    pub force: Option<String>,
    /// Run k-means on the workers of this cluster file (default: loopback workers started for
    /// the run, or [kmeans] cluster).
    #[arg(long, value_name = "FILE")]
    pub cluster: Option<PathBuf>,
    /// Print the stages, data sizes and the cost model's per-iteration traffic, without running.
    #[arg(long)]
    pub plan: bool,
    /// Fault injection for tests: exit right after k-means checkpoints iteration N, or the
    /// mixture EM step N (a crash).
    #[arg(long, value_name = "N", hide = true)]
    pub exit_after_iteration: Option<u64>,
    /// Fault injection for tests (`--engine mpi`): rank R exits when given photo round N.
    #[arg(long, value_name = "R:N", hide = true)]
    pub exit_rank_in_round: Option<String>,
    /// Run k-means on `mpi` (under mpirun or srun; rank 0 runs every other stage) or on `tcp`
    /// workers (the default when k-means is distributed).
    #[arg(long, value_enum)]
    pub engine: Option<TransportKind>,
    /// Rack map for `--engine mpi` (TOML: `"host" = "rack"`).
    #[arg(long, value_name = "FILE")]
    pub racks: Option<PathBuf>,
}

/// A config file argument.
#[derive(Debug, Args)]
pub struct ConfigFileArgs {
    /// The TOML config.
    pub config: PathBuf,
}

/// Arguments of `vocab clean`.
#[derive(Debug, Args)]
pub struct CleanArgs {
    /// The run's config (its work directory is work/<config name>, unless --work says).
    pub config: Option<PathBuf>,
    /// The run's work directory.
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// Also drop the encodings whose models are trained (the largest part of a run; a later
    /// run makes them again only for a model that needs them).
    #[arg(long)]
    pub encodings: bool,
    /// Say what would be removed, and how much it frees, without removing it.
    #[arg(long)]
    pub dry_run: bool,
}
