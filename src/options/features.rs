//! `[features]` and `vocab features`: the vocabulary's sample, random patches of the photos.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use vocab_pipeline::features::Descriptor;
use vocab_pipeline::store::Format;

use super::{DEFAULT_MAX_MPIX, is_default, is_default_mpix};

/// How the vocabulary's sample is described: `vocab features`' options and a config's
/// `[features]`, the same type (`vocab features` takes its own `--format`, by the output's
/// extension, and a dense `--mode`; a run's sample is random patches).
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesOptions {
    /// Random mode: patches per photo.
    #[arg(long, value_name = "N", default_value_t = FeaturesOptions::default().per_image)]
    pub per_image: usize,
    /// Random mode: seed of the patch positions.
    #[arg(long, value_name = "S", default_value_t = FeaturesOptions::default().seed,
          value_parser = super::parse_seed)]
    pub seed: u64,
    /// Feature file format (a config's: `bin` or `text`, the formats that keep each patch's
    /// photo and place).
    #[arg(skip = FeaturesOptions::default().format)]
    pub format: Format,
    /// Downscale photos whose longer side exceeds PX (area averaging).
    #[arg(long, value_name = "PX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_side: Option<usize>,
    /// The side in pixels of the photo that a patch covers (MPIX then bounds the photo as
    /// enlarged): each photo is resized by 40 / PX
    /// before it is described (enlarged for smaller patches; a run's encoding takes the same)
    /// [default: 40, the photo as it is].
    #[arg(long, value_name = "PX")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<usize>,
    /// Skip photos whose header declares more than MPIX megapixels, before decoding them (not
    /// in a run's cache key at its default).
    #[arg(long, value_name = "MPIX", default_value_t = FeaturesOptions::default().max_pixels)]
    #[serde(skip_serializing_if = "is_default_mpix")]
    pub max_pixels: u64,
    /// The local descriptor: HOG of 40-px patches, or dense RootSIFT at windows of 24, 42 and 60
    /// px of the photo (a random sample draws its keypoints from a 6-px grid; an encoding's
    /// stride is SIFT's grid step; a run's encoding takes the same).
    #[arg(long, value_enum, default_value_t = FeaturesOptions::default().descriptor)]
    #[serde(skip_serializing_if = "is_default")]
    pub descriptor: Descriptor,
    /// Descriptors made elsewhere instead of HOG: a folder that mirrors the photos', a file per
    /// photo (for street/a.jpg: street/a.npy or street/a.csv) of rows x, y, size, then the
    /// descriptor's values (a config's: relative to the config).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<PathBuf>,
}

impl Default for FeaturesOptions {
    fn default() -> Self {
        Self {
            per_image: 5,
            seed: 0,
            format: Format::Bin,
            max_side: None,
            patch: None,
            max_pixels: DEFAULT_MAX_MPIX,
            descriptor: Descriptor::Hog,
            from: None,
        }
    }
}
