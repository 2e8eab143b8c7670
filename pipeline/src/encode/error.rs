//! The limits of an encoding's parameters and the rules they break, one variant per rule.

use crate::features::FeatureParamsError;
use crate::hog::PATCH_SIDE;
use crate::params::Broken;

/// Spatial pyramid levels at most (5 levels: 341 cells of k words each).
pub const MAX_PYRAMID: usize = 5;
/// Words of a soft assignment at most.
pub const MAX_SOFT: usize = 64;
/// Most patch scales an encoding may use.
pub const MAX_SCALES: usize = 4;
/// Largest patch side of a scale: 8x the base (the photo downscaled 8 times).
pub const MAX_SCALE_SIDE: usize = 320;
/// Most values a photo's VLAD vector may hold: 2^22 (16 MiB of f32 a photo), e.g. 256 words
/// over a 2-level pyramid (5 cells x 256 x 512 = 655,360) or 1,024 words without one.
pub const MAX_VLAD_VALUES: usize = 1 << 22;

/// Most encodings one joined encoding holds.
pub const MAX_PARTS: usize = 8;

/// A rule an encoding's parameters break.
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeParamsError {
    /// A rule of the photos' description.
    Features(FeatureParamsError),
    /// Random sampling: an encoding describes every patch on a grid.
    NotDense,
    /// Pyramid levels outside `1..=MAX_PYRAMID`.
    Pyramid(usize),
    /// Strips other than none or 2 to [`super::bow::MAX_STRIPS`] (one strip is the whole
    /// photo, pooled already).
    Strips(usize),
    /// Soft assignment over fewer than 2 or more than [`MAX_SOFT`] words.
    SoftWords(usize),
    /// Soft assignment over more words than the vocabulary has.
    SoftOverVocabulary {
        /// Words of the soft assignment.
        words: usize,
        /// Words of the vocabulary.
        k: usize,
    },
    /// A sharpness that is not a positive number.
    Sharpness(f32),
    /// Patch sides that are not the base then larger ones, ascending, within the limits.
    Scales(Vec<usize>),
    /// The approximate search with soft assignment.
    ApproxSoft,
    /// The approximate search with another kernel than f32.
    ApproxKernel,
    /// The approximate search visiting no list.
    Probes,
    /// An approximate search recorded with lists of another version than this build makes
    /// ([`crate::kmeans::approx::LISTS_VERSION`]; absent in a record: 1).
    ListsVersion(u32),
    /// A normalisation other than `l1` or `hellinger` (a file read back).
    Norm(String),
    /// A vocabulary digest that is not 64 hex digits (a file read back).
    Digest(String),
    /// A normalisation other than VLAD's or the Fisher vector's own (`l1`, the default, stands
    /// for it).
    VladNorm(super::bow::Norm),
    /// Fisher vectors with soft assignment (they weigh components by posteriors).
    FisherSoft,
    /// Fisher vectors with a word search's setting (another kernel, the approximate search).
    FisherSearch,
    /// Fisher vectors without a mixture's projected dims (none, or 0).
    FisherDims(Option<usize>),
    /// Another method with projected dims it has no use for.
    Projected {
        /// The method's name.
        pooling: &'static str,
        /// The dims given.
        projected: usize,
    },
    /// Descriptors of no values, or more than [`crate::descriptors::MAX_DIMS`] (or HOG's of
    /// other than 512).
    Dims(usize),
    /// Descriptors made elsewhere with a setting of vocab's own description (mirror images,
    /// a downscale, other patch sides).
    Foreign,
    /// Patch scales for dense SIFT, which has its own windows.
    SiftScales(Vec<usize>),
    /// A joined encoding of fewer than 2 or more than [`MAX_PARTS`] parts.
    Parts(usize),
    /// A joined encoding of photos as they are and mirrored.
    PartsMirrored,
    /// A joined encoding of more than one part of descriptors made elsewhere.
    PartsForeign,
    /// A joined encoding's part that is itself joined.
    PartsNested,
    /// A VLAD or Fisher vector past [`MAX_VLAD_VALUES`] values.
    VladTooLong {
        /// A Fisher vector (else VLAD).
        fisher: bool,
        /// Words (Gaussians of a Fisher vector).
        k: usize,
        /// Pyramid levels.
        levels: usize,
        /// Values it would hold.
        values: usize,
    },
}

impl Broken for EncodeParamsError {
    fn key(&self) -> &'static str {
        match self {
            Self::Features(e) => e.key(),
            Self::NotDense => "sampling",
            Self::Pyramid(_) => "pyramid",
            Self::Strips(_) => "strips",
            Self::SoftWords(_) | Self::SoftOverVocabulary { .. } => "soft",
            Self::Sharpness(_) => "sharpness",
            Self::Scales(_) | Self::SiftScales(_) => "scales",
            Self::ApproxSoft => "assign",
            Self::ApproxKernel => "kernel",
            Self::Probes => "probes",
            Self::ListsVersion(_) => "lists_version",
            Self::Norm(_) => "norm",
            Self::Digest(_) => "vocabulary_sha256",
            Self::VladTooLong { .. }
            | Self::FisherSoft
            | Self::FisherSearch
            | Self::FisherDims(_)
            | Self::Projected { .. } => "method",
            Self::VladNorm(_) => "norm",
            Self::Dims(_) => "dims",
            Self::Foreign => "from",
            Self::Parts(_) | Self::PartsMirrored | Self::PartsForeign | Self::PartsNested => {
                "joined"
            }
        }
    }

    fn value(&self) -> String {
        match self {
            Self::Features(e) => e.value(),
            Self::NotDense => "random".into(),
            Self::Pyramid(n) | Self::Strips(n) | Self::SoftWords(n) => n.to_string(),
            Self::SoftOverVocabulary { words, .. } => words.to_string(),
            Self::Sharpness(s) => s.to_string(),
            Self::Scales(sides) | Self::SiftScales(sides) => (sides.iter().map(usize::to_string))
                .collect::<Vec<_>>()
                .join(","),
            Self::ApproxSoft => "approx".into(),
            Self::ApproxKernel => "int8".into(),
            Self::Probes => "0".into(),
            Self::ListsVersion(v) => v.to_string(),
            Self::Norm(n) | Self::Digest(n) => n.clone(),
            Self::VladTooLong { fisher: false, .. } => "vlad".into(),
            Self::VladTooLong { fisher: true, .. } => "fisher".into(),
            Self::FisherSoft | Self::FisherSearch | Self::FisherDims(_) => "fisher".into(),
            Self::Projected { pooling, .. } => (*pooling).into(),
            Self::VladNorm(norm) => norm.name().into(),
            Self::Dims(d) => d.to_string(),
            Self::Foreign => "a folder".into(),
            Self::Parts(n) => format!("{n} parts"),
            Self::PartsMirrored => "parts mirrored and not".into(),
            Self::PartsForeign => "parts made elsewhere".into(),
            Self::PartsNested => "a part joined".into(),
        }
    }

    fn rule(&self) -> String {
        match self {
            Self::Features(e) => e.rule(),
            Self::NotDense => "an encoding describes every patch on a grid (dense)".into(),
            Self::Pyramid(_) => format!("must be 1 to {MAX_PYRAMID} levels"),
            Self::Strips(_) => format!(
                "must be 0 (none) or 2 to {} horizontal strips (one is the whole photo, which the \
                 pyramid's first level pools already)",
                super::bow::MAX_STRIPS
            ),
            Self::SoftWords(_) => {
                format!("must be 0 (the nearest word alone) or 2 to {MAX_SOFT} words")
            }
            Self::SoftOverVocabulary { k, .. } => format!("more words than the vocabulary's {k}"),
            Self::Sharpness(_) => "must be a positive number".into(),
            Self::Scales(_) => format!(
                "must be {PATCH_SIDE} followed by up to {} larger patch sides, ascending, at \
                 most {MAX_SCALE_SIDE} (e.g. 40,64)",
                MAX_SCALES - 1
            ),
            Self::SiftScales(_) => format!(
                "are HOG's patch sides: dense SIFT describes windows of {:?} px at every \
                 keypoint (drop scales)",
                crate::features::SIFT_WINDOWS
            ),
            Self::ApproxSoft => "finds each patch's nearest word only: drop soft".into(),
            Self::ApproxKernel => {
                "is a kernel of the exact search in an encoding; its approximate search uses f32"
                    .into()
            }
            Self::Probes => "must be at least 1 list".into(),
            Self::ListsVersion(_) => format!(
                "is another build's approximate word search; this build makes its lists as                  version {}, so photos would get other words than the training photos got:                  encode the training photos again",
                crate::kmeans::approx::LISTS_VERSION
            ),
            Self::Norm(_) => "must be l1 or hellinger".into(),
            Self::Digest(_) => "must be a SHA-256 in 64 hex digits".into(),
            Self::VladNorm(_) => "does not apply to VLAD or Fisher vectors, which normalise their \
                 own vectors (signed square root, L2): leave norm at l1"
                .into(),
            Self::FisherSoft => "weighs every component by its posterior: drop soft".into(),
            Self::Dims(_) => format!(
                "must be 1 to {} values a descriptor made elsewhere, HOG's 512, SIFT's 128",
                crate::descriptors::MAX_DIMS
            ),
            Self::Foreign => "descriptors made elsewhere are taken as they are: no mirror \
                 images, max_side, patch, scales or descriptor of vocab's own"
                .into(),
            Self::Parts(_) => format!("must be 2 to {} encodings of the same photos", MAX_PARTS),
            Self::PartsMirrored => "must all be of the photos as they are, or all mirrored \
                 (vocab encode --mirror): join the mirror images apart"
                .into(),
            Self::PartsForeign => "may hold one encoding of descriptors made elsewhere: vocab \
                 classify reads one folder of them (--from)"
                .into(),
            Self::PartsNested => "must be encodings of their own: a joined one's vectors are \
                 weighed already (join its parts with the others instead)"
                .into(),
            Self::FisherSearch => "searches no word: drop the kernel and assign settings".into(),
            Self::FisherDims(None) => {
                "encodes over a mixture: its projected dims come from the mixture file".into()
            }
            Self::FisherDims(Some(_)) => "needs a mixture over at least 1 projected dim".into(),
            Self::Projected { projected, .. } => {
                format!("has no use for a mixture's {projected} projected dims")
            }
            Self::VladTooLong {
                fisher: false,
                k,
                levels,
                values,
            } => format!(
                "over {k} words and {levels} pyramid levels (and any strips) gives {values} \
                 values a photo, past the {MAX_VLAD_VALUES} allowed: use fewer words, levels or \
                 strips"
            ),
            Self::VladTooLong {
                fisher: true,
                k,
                levels,
                values,
            } => format!(
                "over {k} Gaussians and {levels} pyramid levels (and any strips) gives a Fisher \
                 vector of {values} values a photo, past the {MAX_VLAD_VALUES} allowed: use fewer \
                 Gaussians, projected dims, levels or strips"
            ),
        }
    }
}

impl std::fmt::Display for EncodeParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::params::show(self, f)
    }
}

impl std::error::Error for EncodeParamsError {}
