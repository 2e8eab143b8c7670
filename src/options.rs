//! The values the command line and the configs share: the choice enums (clap value enums that
//! are also TOML values), their conversions into the libraries' types, the defaults, and
//! [`EncodeOptions`], the one description of an encoding's settings before they are checked
//! (`crate::settings` checks them). Imports nothing of the binary, so `cli`, `config` and
//! `settings` can all lean on it.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// Default pixel limit of the photo stages, in megapixels.
pub const DEFAULT_MAX_MPIX: u64 = vocab_pipeline::image_io::MAX_PIXELS / 1_000_000;

/// The default of `sharpness` (soft assignment).
pub const DEFAULT_SHARPNESS: f32 = 10.0;

/// Where the chain order of a distributed run comes from.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum OrderArg {
    /// Racks: the cluster file's racks or `order`, or the MPI rack map.
    #[default]
    Racks,
    /// Measured: every link probed when the job starts, the chain and the trees built from
    /// the measurements (groups kept together, slow links at the end or at a leaf).
    Auto,
}

/// Broadcast algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BroadcastAlgorithm {
    /// Pipelined chain, racks together.
    Chain,
    /// Root sends to each node in turn.
    Simple,
    /// Binomial tree (MPI's MST).
    Mst,
    /// Several chains in parallel, each with a slice.
    Multichain,
}

/// Patch sampling mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// N random patches per photo (the vocabulary's sample).
    Random,
    /// Every patch on a grid (encoding).
    Dense,
}

/// Feature file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileFormat {
    /// `picture_id row col f1 ... f512` per line (the paper's format).
    Text,
    /// vocab's checksummed, memory-mappable binary format.
    Bin,
}

impl From<FileFormat> for vocab_pipeline::store::Format {
    fn from(f: FileFormat) -> Self {
        match f {
            FileFormat::Text => Self::Text,
            FileFormat::Bin => Self::Bin,
        }
    }
}

/// Histogram normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NormArg {
    /// Rows sum to 1.
    L1,
    /// Square root of the L1-normalised histogram.
    Hellinger,
}

/// SVM solvers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SolverArg {
    /// Dual coordinate descent (liblinear, scikit-learn's LinearSVC).
    Dcd,
    /// linfa-svm (SMO, linear kernel).
    Linfa,
}

/// Explicit kernel maps before the linear SVM.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum KernelMapArg {
    /// The histograms as they are (a linear kernel on them).
    #[default]
    None,
    /// Chi-squared, `2xy / (x + y)` per bin.
    Chi2,
    /// Histogram intersection, `min(x, y)` per bin.
    Intersection,
    /// Jensen-Shannon.
    Js,
}

impl KernelMapArg {
    /// The pipeline's kernel (none for `none`).
    pub fn kernel(self) -> Option<vocab_pipeline::kernel_map::Kernel> {
        use vocab_pipeline::kernel_map::Kernel;
        match self {
            Self::None => None,
            Self::Chi2 => Some(Kernel::Chi2),
            Self::Intersection => Some(Kernel::Intersection),
            Self::Js => Some(Kernel::Js),
        }
    }
}

impl From<SolverArg> for vocab_pipeline::svm::Solver {
    fn from(s: SolverArg) -> Self {
        match s {
            SolverArg::Dcd => Self::Dcd,
            SolverArg::Linfa => Self::Linfa,
        }
    }
}

/// Value storage of partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ElementArg {
    /// 4-byte floats.
    F32,
    /// One byte per value, scale 1/255.
    U8,
}

impl From<ElementArg> for vocab_pipeline::store::Element {
    fn from(e: ElementArg) -> Self {
        match e {
            ElementArg::F32 => Self::F32,
            ElementArg::U8 => Self::U8,
        }
    }
}

/// Lists the approximate search visits per vector unless told.
pub const DEFAULT_PROBES: u32 = 8;

/// Initialisation of k-means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InitMethod {
    /// k distinct vectors drawn uniformly.
    Random,
    /// k-means++ on a sample of max(2k, 1024) vectors.
    #[value(name = "kmeans++")]
    #[serde(rename = "kmeans++")]
    PlusPlus,
}

/// Kernel of the full assignment pass.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum KernelArg {
    /// f32 GEMM with a fused arg-min.
    #[default]
    F32,
    /// 7-bit integer products (AVX2 `vpmaddubsw`) with exact re-ranking of the candidates their
    /// error bound leaves: labels are the arg-min of direct distances; 0.54-0.58x the f32
    /// kernel's time per iteration here (eval/kmeans_bench).
    Int8,
}

impl From<KernelArg> for vocab_pipeline::kmeans::Kernel {
    fn from(k: KernelArg) -> Self {
        match k {
            KernelArg::F32 => Self::F32,
            KernelArg::Int8 => Self::Int8,
        }
    }
}

/// How k-means searches for each vector's nearest centroid.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum AssignArg {
    /// Every vector against every centroid (or Yinyang-pruned with --prune): the nearest.
    #[default]
    Exact,
    /// An inverted file over the centroids, rebuilt every iteration: each vector searches the
    /// members of its --probes nearest of --lists lists (for very large k; the run reports how
    /// often it found the exact nearest on a sample).
    Approx,
}

/// Distributed engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// vocab's authenticated TCP worker daemons.
    Tcp,
    /// MPI ranks (mpirun, srun).
    Mpi,
}

/// How photos are encoded: `vocab encode`'s options and a config's `[encode]`, the same type.
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncodeOptions {
    /// Dense grid step in pixels.
    #[arg(long, value_name = "PX", default_value_t = 8)]
    pub stride: usize,
    /// Normalisation.
    #[arg(long, value_enum, default_value_t = NormArg::L1)]
    pub norm: NormArg,
    /// Spatial pyramid levels (1 = plain bag of words; 3 = 1x1 + 2x2 + 4x4).
    #[arg(long, value_name = "LEVELS", default_value_t = 1)]
    pub pyramid: usize,
    /// Downscale photos whose longer side exceeds PX (area averaging).
    #[arg(long, value_name = "PX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_side: Option<usize>,
    /// Skip photos whose header declares more than MPIX megapixels, before decoding them.
    #[arg(long, value_name = "MPIX", default_value_t = DEFAULT_MAX_MPIX)]
    #[serde(skip_serializing_if = "is_default_mpix")]
    pub max_pixels: u64,
    /// Soft assignment: each patch counts toward its N nearest words, weighted by distance
    /// (0: its nearest word only).
    #[arg(long, value_name = "N", default_value_t = 0)]
    #[serde(skip_serializing_if = "is_zero")]
    pub soft: usize,
    /// How fast a soft weight falls with distance: word j weighs exp(-S (d_j / d_1 - 1)) of
    /// squared distances d.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SHARPNESS)]
    #[serde(skip_serializing_if = "is_default_sharpness")]
    pub sharpness: f32,
    /// How patches find their words: the f32 GEMM, or 7-bit integer products with exact
    /// re-ranking (words are the arg-min of direct distances; eval/encode_bench).
    #[arg(long, value_enum, default_value_t = KernelArg::F32)]
    #[serde(skip_serializing_if = "is_f32")]
    pub kernel: KernelArg,
    /// Patch sides in pixels, 40 first: each larger side S also describes the photo downscaled
    /// by 40/S, so its patches cover S pixels (e.g. 40,64).
    #[arg(long, value_name = "PX,PX", value_delimiter = ',', default_values_t = [40])]
    #[serde(skip_serializing_if = "vocab_pipeline::encode::is_base_scale")]
    pub scales: Vec<usize>,
    /// Exact or approximate word search (approx: an inverted file over the words, for
    /// vocabularies of hundreds of thousands to millions of words; nearest word only, f32).
    #[arg(long, value_enum, default_value_t = AssignArg::Exact)]
    #[serde(skip_serializing_if = "is_exact")]
    pub assign: AssignArg,
    /// Lists of the approximate search's index [default: sqrt(K)].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lists: Option<u32>,
    /// Lists the approximate search visits per patch.
    #[arg(long, value_name = "N", default_value_t = crate::options::DEFAULT_PROBES)]
    #[serde(skip_serializing_if = "is_default_probes")]
    pub probes: u32,
}

fn is_exact(assign: &AssignArg) -> bool {
    *assign == AssignArg::Exact
}

/// Whether `probes` is the default (left out of serialized settings, so keys stay the same).
pub(crate) fn is_default_probes(probes: &u32) -> bool {
    *probes == crate::options::DEFAULT_PROBES
}

fn is_f32(kernel: &KernelArg) -> bool {
    *kernel == KernelArg::F32
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            stride: 8,
            norm: NormArg::L1,
            pyramid: 1,
            max_side: None,
            max_pixels: DEFAULT_MAX_MPIX,
            soft: 0,
            sharpness: DEFAULT_SHARPNESS,
            kernel: KernelArg::F32,
            scales: vocab_pipeline::encode::base_scale(),
            assign: AssignArg::Exact,
            lists: None,
            probes: crate::options::DEFAULT_PROBES,
        }
    }
}

pub(crate) fn is_default_mpix(v: &u64) -> bool {
    *v == DEFAULT_MAX_MPIX
}

pub(crate) fn is_zero(v: &usize) -> bool {
    *v == 0
}

pub(crate) fn is_default_sharpness(v: &f32) -> bool {
    *v == DEFAULT_SHARPNESS
}
