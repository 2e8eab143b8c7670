//! Settings of the photo stages: features (and a config's `[features]`), encode, photo sets.

use std::path::{Path, PathBuf};

use vocab_pipeline::encode::{EncodeParams, Method, Norm, Pooling, Soft};
use vocab_pipeline::features::{Descriptor, FeatureParams};
use vocab_pipeline::kmeans::{Assignment, approx};
use vocab_pipeline::mixture::MixtureFile;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::store::Format;

use super::rules::{Invalid, Kind, apart, new_folder, output, within};
use super::vocabulary_settings::assignment_of;
use crate::options::{EncodeOptions, FeaturesOptions};
use vocab_pipeline::kmeans::Search;
use vocab_pipeline::patch::Mode;

/// The parameters of a photo stage's description, checked ([`FeatureParams::check`]): the
/// descriptor, where patches are cut (`mode`: `per_image` random ones seeded by `seed`, or a grid of `stride`),
/// the downscale limit, the side a patch covers and the pixel limit in megapixels.
pub fn feature_params(
    (mode, descriptor): (Mode, Descriptor),
    (per_image, stride, seed): (usize, usize, u64),
    (max_side, patch): (Option<usize>, Option<usize>),
    max_mpix: u64,
) -> Result<FeatureParams, Invalid> {
    let params = FeatureParams {
        sampling: match mode {
            Mode::Random => Sampling::Random { per_image, seed },
            Mode::Dense => Sampling::Dense { stride },
        },
        max_side,
        max_pixels: pixels(max_mpix)?,
        mirror: false,
        // 40 px is the photo as it is: recorded as no patch side, so keys stay what they were.
        patch: patch.filter(|&p| p != vocab_pipeline::hog::PATCH_SIDE),
        descriptor,
    };
    params.check()?;
    Ok(params)
}

/// A pixel limit in megapixels, in pixels (the rule of a limit of 0 is the parameters').
fn pixels(max_mpix: u64) -> Result<u64, Invalid> {
    max_mpix
        .checked_mul(1_000_000)
        .ok_or_else(|| Invalid::new("max_pixels", max_mpix, "1 or more megapixels"))
}

/// Settings of the features stage.
#[derive(Debug, Clone)]
pub struct FeatureSettings {
    /// Photo folder.
    pub input: PathBuf,
    /// Optional labels CSV restricting the photos.
    pub labels: Option<PathBuf>,
    /// Feature file.
    pub out: PathBuf,
    /// Output format.
    pub format: Format,
    /// Sampling and decoding parameters.
    pub params: FeatureParams,
    /// Descriptors made elsewhere, instead of HOG: their folder.
    pub from: Option<PathBuf>,
}

impl FeatureSettings {
    /// From `vocab features`.
    pub fn from_args(args: &crate::cli::FeaturesArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        let o = &args.sample;
        let shape = (o.per_image, args.stride, o.seed);
        let how = (args.mode, o.descriptor);
        let params = feature_params(how, shape, (o.max_side, o.patch), o.max_pixels)?;
        o.check_from()?;
        let mut inputs = vec![("input", args.input.as_path())];
        inputs.extend(args.labels.as_deref().map(|l| ("labels", l)));
        inputs.extend(o.from.as_deref().map(|f| ("from", f)));
        apart("out", &args.out, Kind::File, &inputs)?;
        if o.from.is_some() && args.mode == Mode::Dense {
            return Err(Invalid::new(
                "mode",
                "dense",
                "descriptors made elsewhere (--from) are sampled at random (--per-image); an \
                 encoding takes every one",
            ));
        }
        Ok(Self {
            input: args.input.clone(),
            labels: args.labels.clone(),
            out: args.out.clone(),
            format: super::rules::vectors_out("out", &args.out, args.format)?,
            params,
            from: o.from.clone(),
        })
    }

    /// From a config's `[features]`: random patches of the photos `labels` lists.
    pub fn from_config(
        f: &FeaturesOptions,
        input: &Path,
        labels: &Path,
        out: &Path,
    ) -> Result<Self, Invalid> {
        Ok(Self {
            input: input.to_path_buf(),
            labels: Some(labels.to_path_buf()),
            out: out.to_path_buf(),
            format: f.format,
            params: f.params()?,
            from: f.from.clone(),
        })
    }
}

impl FeaturesOptions {
    /// The checked parameters of the sample's description (random patches).
    pub fn params(&self) -> Result<FeatureParams, Invalid> {
        if !matches!(self.format, Format::Bin | Format::Text) {
            return Err(Invalid::new(
                "format",
                self.format.name(),
                "must be \"bin\" or \"text\": the sample keeps each patch's photo and place",
            ));
        }
        let shape = (self.per_image, 8, self.seed);
        self.check_from()?;
        feature_params(
            (Mode::Random, self.descriptor),
            shape,
            (self.max_side, self.patch),
            self.max_pixels,
        )
    }

    /// Descriptors made elsewhere are taken as they are: no patch side of vocab's own.
    fn check_from(&self) -> Result<(), Invalid> {
        match (&self.from, self.patch, self.descriptor) {
            (Some(_), Some(patch), _) => Err(Invalid::new(
                "patch",
                patch,
                "descriptors made elsewhere (from) are taken as they are: drop patch",
            )),
            (Some(_), None, Descriptor::Sift) => Err(Invalid::new(
                "descriptor",
                "sift",
                "is vocab's own: descriptors made elsewhere (from) are read instead (drop one)",
            )),
            _ => Ok(()),
        }
    }
}

impl EncodeOptions {
    /// The checked parameters of the encoding ([`EncodeParams::check`]; the approximate
    /// search's own settings by [`assignment_of`]); Fisher vectors over a mixture of
    /// `projected` dims (none for the other methods).
    pub fn params_for(&self, projected: Option<usize>) -> Result<EncodeParams, Invalid> {
        let soft = (self.soft > 0).then_some(Soft {
            words: self.soft,
            sharpness: self.sharpness,
        });
        let approx = if self.assign == Search::Approx && soft.is_some() {
            // Exact or approximate, soft or not: [`EncodeParams::check`] names the conflict.
            Some(approx::Search {
                lists: self.lists.unwrap_or(0),
                probes: self.probes,
            })
        } else {
            match assignment_of(
                Some(false),
                self.kernel,
                self.assign,
                self.lists,
                self.probes,
            )? {
                Assignment::Approx { lists, probes, .. } => Some(approx::Search { lists, probes }),
                _ => None,
            }
        };
        let params = EncodeParams {
            dims: self.descriptor.dims(),
            foreign: false,
            features: FeatureParams {
                sampling: Sampling::Dense {
                    stride: self.stride,
                },
                max_side: self.max_side,
                max_pixels: pixels(self.max_pixels)?,
                mirror: self.mirror,
                patch: self.patch.filter(|&p| p != vocab_pipeline::hog::PATCH_SIDE),
                descriptor: self.descriptor,
            },
            norm: match self.norm {
                Norm::L1 => Norm::L1,
                Norm::Hellinger => Norm::Hellinger,
            },
            levels: self.pyramid,
            strips: self.strips,
            method: Method::new(self.method, soft, projected)?,
            kernel: self.kernel,
            scales: self.scales.clone(),
            approx,
        };
        params.check(None)?;
        Ok(params)
    }
}

/// Settings of the encode stage.
#[derive(Debug, Clone)]
pub struct EncodeSettings {
    /// Vocabulary file.
    pub vocabulary: PathBuf,
    /// Photo folder.
    pub input: PathBuf,
    /// Optional labels CSV restricting the photos.
    pub labels: Option<PathBuf>,
    /// Histogram file.
    pub out: PathBuf,
    /// The checked parameters.
    pub params: EncodeParams,
    /// Fisher vectors: the mixture at `vocabulary`, read and checked once, here, with the
    /// SHA-256 of the bytes it was read from (what the encoding's record binds to).
    pub mixture: Option<(MixtureFile, String)>,
    /// Descriptors made elsewhere, instead of HOG: their folder (`params.dims` is set from
    /// their files when the stage runs).
    pub from: Option<PathBuf>,
}

impl EncodeSettings {
    /// Checks the options; `held`, the mixture at `vocabulary` and its digest when the caller
    /// holds them already (Fisher vectors; read here otherwise).
    pub fn new(
        vocabulary: &Path,
        input: &Path,
        labels: Option<&Path>,
        out: &Path,
        (options, held): (&EncodeOptions, Option<&(MixtureFile, String)>),
    ) -> Result<Self, Invalid> {
        output("out", out)?;
        super::rules::vectors_out("out", out, None)?;
        let mut inputs = vec![("vocabulary", vocabulary), ("input", input)];
        inputs.extend(labels.map(|l| ("labels", l)));
        apart("out", out, Kind::File, &inputs)?;
        // Fisher vectors: the mixture says its projected dims.
        let mixture = match (options.method, held) {
            (Pooling::Fisher, Some(held)) => Some(held.clone()),
            (Pooling::Fisher, None) => Some(read_mixture(vocabulary)?),
            _ => None,
        };
        let projected = mixture.as_ref().map(|(m, _)| m.pca.output_dims());
        Ok(Self {
            vocabulary: vocabulary.to_path_buf(),
            input: input.to_path_buf(),
            labels: labels.map(Path::to_path_buf),
            out: out.to_path_buf(),
            params: options.params_for(projected)?,
            mixture,
            from: None,
        })
    }
}

/// Settings of the synthetic photo set (`vocab datasets photos`, a config's
/// `[dataset.synthetic]`).
#[derive(Debug, Clone)]
pub struct PhotoSetSettings {
    /// Folder of the photos and labels.csv.
    pub out: PathBuf,
    /// Photos per scene kind.
    pub per_kind: usize,
    /// Generator seed.
    pub seed: u64,
}

impl PhotoSetSettings {
    /// Checks the settings.
    pub fn new(out: &Path, per_kind: usize, seed: u64) -> Result<Self, Invalid> {
        within(
            "per_kind",
            per_kind,
            (1, vocab_pipeline::synth::MAX_PER_KIND),
            " photo",
        )?;
        new_folder("out", out, &[])?;
        Ok(Self {
            out: out.to_path_buf(),
            per_kind,
            seed,
        })
    }
}

/// The mixture at `path`, read and checked whole, and the digest of its bytes.
fn read_mixture(path: &Path) -> Result<(MixtureFile, String), Invalid> {
    MixtureFile::read_digested(path).map_err(|e| {
        Invalid::new(
            "vocabulary",
            path.display(),
            format!(
                "Fisher vectors encode over a mixture (vocab mixture): {}",
                vocab_pipeline::chain(&e)
            ),
        )
    })
}

/// Settings of `vocab join`: the parts' histograms and the joined file.
#[derive(Debug, Clone)]
pub struct JoinSettings {
    /// The parts, in the order their vectors are joined.
    pub parts: Vec<PathBuf>,
    /// The joined histograms.
    pub out: PathBuf,
}

impl JoinSettings {
    /// From `vocab join`: an output of vectors that is none of the parts.
    pub fn from_args(args: &crate::cli::JoinArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        super::rules::vectors_out("out", &args.out, None)?;
        let inputs: Vec<(&'static str, &Path)> = (args.parts.iter())
            .map(|p| ("histograms", p.as_path()))
            .collect();
        apart("out", &args.out, Kind::File, &inputs)?;
        Ok(Self {
            parts: args.parts.clone(),
            out: args.out.clone(),
        })
    }
}
