//! Arguments of `vocab train`, `vocab evaluate` and `vocab classify`.

use std::path::PathBuf;

use clap::Args;

/// Arguments of `vocab train`.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Histograms from `vocab encode` (CSV, or bin with its manifest).
    #[arg(long, value_name = "FILE")]
    pub histograms: PathBuf,
    /// Histograms of the same photos mirrored left to right (`vocab encode --mirror`, same
    /// vocabulary and settings): each training photo's mirror image trains beside it, in its
    /// cross-validation fold; photos are scored as they are.
    #[arg(long, value_name = "FILE")]
    pub mirrored: Option<PathBuf>,
    /// Labels CSV: path, then attribute columns; an empty cell leaves the photo out.
    #[arg(long, value_name = "CSV")]
    pub labels: PathBuf,
    /// The attribute column to learn.
    #[arg(long, value_name = "NAME")]
    pub attribute: String,
    /// Use this C instead of choosing it by cross-validation.
    #[arg(long, value_name = "C", conflicts_with = "cv")]
    pub c: Option<f64>,
    /// Split CSV (path,split with train/test): train on its train part only [default: train on
    /// every labelled photo].
    #[arg(long, value_name = "CSV", conflicts_with = "holdout")]
    pub split: Option<PathBuf>,
    /// Hold out this fraction of each class (seeded, stratified) for `vocab evaluate
    /// --held-out`; 0.5 is the split of `vocab run` [default: nothing held out].
    #[arg(long, value_name = "FRACTION")]
    pub holdout: Option<f64>,
    /// Cross-validation, solver and kernel map: a config's `[classify]`.
    #[command(flatten)]
    pub options: crate::options::ClassifyOptions,
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
    /// Histograms of the same photos mirrored left to right (`vocab encode --mirror`, same
    /// vocabulary and settings): each photo is scored by the mean of its own and its mirror
    /// image's decision values.
    #[arg(long, value_name = "FILE")]
    pub mirrored: Option<PathBuf>,
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
    /// The photos' descriptors made elsewhere, for a model trained on such (a folder that
    /// mirrors --input's, a file per photo: a.npy or a.csv for a.jpg).
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
}
