//! Arguments of the photo stages: `vocab features`, `vocab encode`, and where they run.

use std::path::PathBuf;
use vocab_cluster::net::transport::Kind as TransportKind;
use vocab_pipeline::patch::Mode;
use vocab_pipeline::store::Format;

use clap::Args;

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
    /// Dense mode: grid step in pixels (multiples of 8 use the whole-image HOG definition).
    #[arg(long, value_name = "PX", default_value_t = 8)]
    pub stride: usize,
    /// Output format [default: text for .txt/.text files, bin otherwise].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Patches, seed and limits: a config's `[features]`.
    #[command(flatten)]
    pub sample: crate::options::FeaturesOptions,
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
    pub engine: Option<TransportKind>,
}

/// Arguments of `vocab encode`.
#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// Vocabulary file (from `vocab kmeans`: text or binary; or .npy, .fvecs, .bvecs, .csv).
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
    /// Descriptors made elsewhere instead of HOG (the vocabulary's): a folder that mirrors the
    /// photos', a file per photo (for street/a.jpg: street/a.npy or street/a.csv) of rows x, y,
    /// size, then the descriptor's values; every row is encoded.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    #[command(flatten)]
    pub nodes: NodesArgs,
}

/// Arguments of `vocab join`.
#[derive(Debug, Args)]
pub struct JoinArgs {
    /// Histograms of `vocab encode` of the same photos (2 to 8), each with its record
    /// (.encoding.json) and manifests beside it, in the order their vectors are joined.
    #[arg(required = true, num_args = 2.., value_name = "HISTOGRAMS")]
    pub parts: Vec<PathBuf>,
    /// The joined histograms: CSV (picture_id,path,h0,...) for .csv paths, binary feature
    /// format otherwise; its record lists the parts.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// Arguments of `vocab datasets scene15`.
#[derive(Debug, Args)]
pub struct Scene15Args {
    /// The unpacked set: a folder of the 15 class folders (MITcoast, ... or Coast, ...).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// New folder to copy the photos into, with labels.csv (path,class,urbanicity,elevation).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Arguments of `vocab datasets photos`.
#[derive(Debug, Args)]
pub struct PhotosArgs {
    /// Folder to write the photos and labels.csv into.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// How many, from which seed: a config's `[dataset.synthetic]`.
    #[command(flatten)]
    pub set: crate::options::SyntheticOptions,
}

/// Arguments of `vocab words`.
#[derive(Debug, Args)]
pub struct WordsArgs {
    /// Vocabulary file (from `vocab kmeans`, any format it reads).
    #[arg(long, value_name = "FILE")]
    pub vocabulary: PathBuf,
    /// Folder of photos to cut the patches from, searched recursively.
    #[arg(long, value_name = "DIR")]
    pub input: PathBuf,
    /// Only the photos listed in the first column of this CSV.
    #[arg(long, value_name = "CSV")]
    pub labels: Option<PathBuf>,
    /// The montage, PNG; the same figures go beside it as <out>.csv.
    #[arg(long, value_name = "PNG")]
    pub out: PathBuf,
    /// Words shown, a row each: those nearest to the most sample patches.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub words: usize,
    /// Patches per word, nearest first.
    #[arg(long, value_name = "M", default_value_t = 8)]
    pub patches: usize,
    /// Photos sampled at most, spread evenly over the folder.
    #[arg(long, value_name = "P", default_value_t = 300)]
    pub photos: usize,
    /// Random patches per photo.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub per_image: usize,
    /// Seed of the patches' positions.
    #[arg(long, value_name = "S", default_value_t = 1, value_parser = crate::options::parse_seed)]
    pub seed: u64,
    /// Picture pixels per photo pixel.
    #[arg(long, value_name = "Z", default_value_t = 2)]
    pub zoom: usize,
    /// Downscale photos whose longer side exceeds PX, as the vocabulary's sample was.
    #[arg(long, value_name = "PX")]
    pub max_side: Option<usize>,
    /// The side in pixels of the photo a patch covers, as the vocabulary's sample was
    /// described (`vocab features --patch`) [default: 40].
    #[arg(long, value_name = "PX")]
    pub patch: Option<usize>,
    /// Skip photos whose header declares more than MPIX megapixels, before decoding them.
    #[arg(long, value_name = "MPIX", default_value_t = crate::options::DEFAULT_MAX_MPIX)]
    pub max_pixels: u64,
}
