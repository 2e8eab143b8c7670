//! `[encode]` and `vocab encode`: how photos become vectors.

use serde::{Deserialize, Serialize};
use vocab_pipeline::encode::{Norm, Pooling};
use vocab_pipeline::features::Descriptor;
use vocab_pipeline::kmeans::{Kernel, Search};

use super::{DEFAULT_MAX_MPIX, DEFAULT_PROBES, is_default, is_default_mpix, is_default_probes};

/// The default of `sharpness` (soft assignment).
pub const DEFAULT_SHARPNESS: f32 = 10.0;

/// How photos are encoded: `vocab encode`'s options and a config's `[encode]`, the same type.
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncodeOptions {
    /// Dense grid step in pixels.
    #[arg(long, value_name = "PX", default_value_t = EncodeOptions::default().stride)]
    pub stride: usize,
    /// Normalisation.
    #[arg(long, value_enum, default_value_t = EncodeOptions::default().norm)]
    pub norm: Norm,
    /// Spatial pyramid levels (1 = plain bag of words; 3 = 1x1 + 2x2 + 4x4).
    #[arg(long, value_name = "LEVELS", default_value_t = EncodeOptions::default().pyramid)]
    pub pyramid: usize,
    /// Horizontal strips pooled after the pyramid's levels, top to bottom, weighted as its
    /// finest level (0: none; --pyramid 2 --strips 3 is 1x1 + 2x2 + 3x1).
    #[arg(long, value_name = "N", default_value_t = EncodeOptions::default().strips)]
    #[serde(skip_serializing_if = "is_zero")]
    pub strips: usize,
    /// How a photo's patches become its vector: bag of words (word counts per pyramid cell),
    /// VLAD (each word's residual sum, 512 values a word and cell; intra-normalised, signed
    /// square root, L2), or Fisher vectors (over a mixture from vocab mixture given as
    /// --vocabulary: gradients for each Gaussian's means and variances, 2 d values a Gaussian
    /// and cell; signed square root, L2). --norm applies to bag of words only.
    #[arg(long, value_enum, default_value_t = EncodeOptions::default().method)]
    #[serde(skip_serializing_if = "Pooling::is_bow")]
    pub method: Pooling,
    /// Downscale photos whose longer side exceeds PX (area averaging).
    #[arg(long, value_name = "PX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_side: Option<usize>,
    /// The side in pixels of the photo that a patch covers (MPIX then bounds the photo as
    /// enlarged): each photo is resized by 40 / PX
    /// before it is described, as the vocabulary's sample was (a config's is `[features]
    /// patch`) [default: 40, the photo as it is].
    #[arg(long, value_name = "PX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<usize>,
    /// The local descriptor, as the vocabulary's sample was described (a config's is
    /// `[features] descriptor`): HOG, or dense RootSIFT at windows of 24, 42 and 60 px around
    /// centres every STRIDE px.
    #[arg(long, value_enum, default_value_t = EncodeOptions::default().descriptor)]
    #[serde(skip_serializing_if = "is_default")]
    pub descriptor: Descriptor,
    /// Skip photos whose header declares more than MPIX megapixels, before decoding them.
    #[arg(long, value_name = "MPIX", default_value_t = EncodeOptions::default().max_pixels)]
    #[serde(skip_serializing_if = "is_default_mpix")]
    pub max_pixels: u64,
    /// Soft assignment: each patch counts toward its N nearest words, weighted by distance
    /// (0: its nearest word only).
    #[arg(long, value_name = "N", default_value_t = EncodeOptions::default().soft)]
    #[serde(skip_serializing_if = "is_zero")]
    pub soft: usize,
    /// How fast a soft weight falls with distance: word j weighs exp(-S (d_j / d_1 - 1)) of
    /// squared distances d.
    #[arg(long, value_name = "S", default_value_t = EncodeOptions::default().sharpness)]
    #[serde(skip_serializing_if = "is_default_sharpness")]
    pub sharpness: f32,
    /// How patches find their words: the f32 GEMM, or 7-bit integer products with exact
    /// re-ranking (words are the arg-min of direct distances; eval/encode_bench).
    #[arg(long, value_enum, default_value_t = EncodeOptions::default().kernel)]
    #[serde(skip_serializing_if = "is_default")]
    pub kernel: Kernel,
    /// Patch sides in pixels, 40 first: each larger side S also describes the photo downscaled
    /// by 40/S, so its patches cover S pixels (e.g. 40,64).
    #[arg(long, value_name = "PX,PX", value_delimiter = ',', default_values_t = EncodeOptions::default().scales)]
    #[serde(skip_serializing_if = "vocab_pipeline::encode::is_base_scale")]
    pub scales: Vec<usize>,
    /// Exact or approximate word search (approx: an inverted file over the words, for
    /// vocabularies of hundreds of thousands to millions of words; nearest word only, f32).
    #[arg(long, value_enum, default_value_t = EncodeOptions::default().assign)]
    #[serde(skip_serializing_if = "is_default")]
    pub assign: Search,
    /// Lists of the approximate search's index [default: sqrt(K)].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lists: Option<u32>,
    /// Lists the approximate search visits per patch.
    #[arg(long, value_name = "N", default_value_t = EncodeOptions::default().probes)]
    #[serde(skip_serializing_if = "is_default_probes")]
    pub probes: u32,
    /// Describe every photo mirrored left to right: training copies for `vocab train
    /// --mirrored` (a config asks for them with `[classify] mirror`).
    #[arg(long)]
    #[serde(skip)]
    pub mirror: bool,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            stride: 8,
            norm: Norm::L1,
            pyramid: 1,
            strips: 0,
            method: Pooling::Bow,
            max_side: None,
            patch: None,
            descriptor: Descriptor::Hog,
            max_pixels: DEFAULT_MAX_MPIX,
            soft: 0,
            sharpness: DEFAULT_SHARPNESS,
            kernel: Kernel::F32,
            scales: vocab_pipeline::encode::base_scale(),
            assign: Search::Exact,
            lists: None,
            probes: DEFAULT_PROBES,
            mirror: false,
        }
    }
}

pub(crate) fn is_zero(v: &usize) -> bool {
    *v == 0
}

pub(crate) fn is_default_sharpness(v: &f32) -> bool {
    *v == DEFAULT_SHARPNESS
}
