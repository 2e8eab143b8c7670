//! The features stage: a photo collection in, a feature file and its manifests out.
//!
//! Photos are decoded and described in parallel (rayon) in batches of bounded size, and written in
//! picture-id order, so the output is byte-identical whatever the thread count. Memory is bounded
//! by one batch of decoded photos and their descriptors, whatever the collection's size.
//!
//! Beside the feature file `<out>` the stage writes `<out>.images.csv`
//! (`picture_id,path,width,height` of every photo used; the size is the one patches were cut from,
//! after EXIF orientation and `max_side`) and `<out>.skipped.csv` (`picture_id,path,reason`).
//!
//! Which HOG definition applies: random patches use the patch definition (gradients inside the
//! patch, `hog(patch)`); dense patches on a stride that is a multiple of 8 use the image definition
//! (`hog(image, feature_vector=False)[r/8:r/8+4, c/8:c/8+4]`, computed once per photo); dense
//! patches on any other stride fall back to the patch definition.

use std::io::{self, BufWriter};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tempfile::NamedTempFile;
use thiserror::Error;

use crate::atomic;
use crate::hog::{
    BlockGrid, CELL_SIDE, DIMS, PATCH_SIDE, PLANES_BELOW_STRIDE, PatchDescriber, PatchPlanes,
};
use crate::image_io::{Collection, Luminance, Photo, Skip, load_luminance};
use crate::params::Broken;
use crate::patch::{MAX_PER_IMAGE, Sampling};
use crate::store::{FeatureWriter, Format, StoreError};

/// Errors of the features stage (skipped photos are not errors).
#[derive(Debug, Error)]
pub enum FeaturesError {
    /// Writing the feature file failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The photos' results came from elsewhere (other nodes) and that failed.
    #[error(transparent)]
    Source(Box<dyn std::error::Error + Send + Sync>),
    /// A source of results gave a batch that does not fit the photos left.
    #[error("a batch of {got} photo results came for {left} photos left")]
    Batch {
        /// Results in the batch.
        got: usize,
        /// Photos not yet written.
        left: usize,
    },
    /// Not one photo of the collection could be used.
    #[error("none of the {skipped} photos of {root} could be read ({reasons})")]
    NoneRead {
        /// The collection's folder.
        root: PathBuf,
        /// Photos skipped: all of them.
        skipped: usize,
        /// The first few photos' reasons, `a.jpg: not a JPEG; ...`.
        reasons: String,
    },
    /// Writing a manifest failed.
    #[error("cannot write manifest {path}")]
    Manifest {
        /// Manifest file.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
}

/// Settings of the features stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct FeatureParams {
    /// Where patches are cut.
    pub sampling: Sampling,
    /// Downscale photos whose longer side exceeds this many pixels.
    pub max_side: Option<usize>,
    /// Skip photos whose header declares more pixels than this, before decoding them
    /// (default [`crate::image_io::MAX_PIXELS`]); with a patch side under 40 px, more than this
    /// once enlarged ([`FeatureParams::decode_limit`]).
    pub max_pixels: u64,
    /// Describe each photo mirrored left to right (after decoding and any downscale): the
    /// training copies of `vocab train --mirrored`. Absent from records when false, so keys and
    /// files of unmirrored stages stay what they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mirror: bool,
    /// The side, in pixels of the photo (after any downscale), that a patch covers: each photo
    /// is resized by [`PATCH_SIDE`]` / patch` before it is described ([`Luminance::zoomed`]:
    /// enlarged for smaller patches), so patches, strides and places are in pixels of the
    /// resized photo. None: [`PATCH_SIDE`], the photo as it is; absent from records then, so
    /// keys and files stay what they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<usize>,
    /// The local descriptor: HOG of 40-px patches (the default, absent from records, so keys
    /// and files stay what they were) or dense SIFT ([`Descriptor::Sift`]).
    #[serde(default, skip_serializing_if = "Descriptor::is_hog")]
    pub descriptor: Descriptor,
}

/// The local descriptor a photo stage computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Descriptor {
    /// HOG ([`crate::hog`]): 512 values a 40-px patch, patches cut by the sampling.
    #[default]
    Hog,
    /// Dense upright RootSIFT ([`crate::sift`]): 128 values a keypoint, at windows of
    /// [`SIFT_WINDOWS`] px of the photo around centres every `stride` px of a dense sampling
    /// (each window inside the photo); a random sampling draws `per_image` of the keypoints
    /// every [`SIFT_SAMPLE_STEP`] px, seeded per photo as descriptors made elsewhere are.
    Sift,
}

/// Window sides of [`Descriptor::Sift`], in pixels of the photo: the three that scored best
/// joined with HOG (`eval/descriptors/README.md`, "A second descriptor beside HOG").
pub const SIFT_WINDOWS: [f32; 3] = [24.0, 42.0, 60.0];
/// The grid step, in pixels, a random sample of [`Descriptor::Sift`] draws its keypoints from.
pub const SIFT_SAMPLE_STEP: usize = 6;

impl Descriptor {
    /// Whether it is HOG (the default).
    pub fn is_hog(&self) -> bool {
        *self == Self::Hog
    }

    /// Values of one descriptor.
    pub fn dims(&self) -> usize {
        match self {
            Self::Hog => DIMS,
            Self::Sift => crate::sift::SIFT_DIMS,
        }
    }

    /// Its name in configs, records and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Hog => "hog",
            Self::Sift => "sift",
        }
    }
}

/// Smallest side a patch may cover ([`FeatureParams::patch`]: the photo enlarged 2.5 times).
pub const MIN_PATCH: usize = 16;
/// Largest side a patch may cover (the photo shrunk 4 times).
pub const MAX_PATCH: usize = 160;

impl FeatureParams {
    /// How much a photo is resized before it is described (1: as it is).
    pub fn zoom(&self) -> f64 {
        self.patch
            .map_or(1.0, |p| PATCH_SIDE as f64 / p.max(1) as f64)
    }

    /// The photo at `path` as the stage describes it: decoded within the pixel limit
    /// ([`FeatureParams::decode_limit`], a skip said of the photo as described), downscaled to
    /// `max_side`, then [`FeatureParams::prepare`]d. Every stage that describes photos loads
    /// them here, so a sample and the encoding over its words see the same pixels.
    pub fn load(&self, path: &Path) -> Result<Luminance, Skip> {
        let lum = load_luminance(path, self.max_side, self.decode_limit())
            .map_err(|skip| self.skipped(skip))?;
        Ok(self.prepare(lum))
    }

    /// A decoded photo as the stage describes it: mirrored when asked, then resized for the
    /// patch side ([`FeatureParams::patch`]).
    pub fn prepare(&self, mut lum: Luminance) -> Luminance {
        if self.mirror {
            lum.mirror();
        }
        match self.patch.filter(|&p| p != PATCH_SIDE) {
            Some(_) => lum.zoomed(self.zoom()),
            None => lum,
        }
    }

    /// The most memory the features stage holds for one photo of at most `max_pixels` pixels:
    /// its working memory ([`crate::image_io::BYTES_PER_PIXEL`]) and its descriptors (2 KiB a
    /// patch: the per-image count, or a dense grid over the whole photo).
    pub fn photo_memory(&self) -> u64 {
        if self.descriptor == Descriptor::Sift {
            return self.sift_memory();
        }
        let patch = (DIMS * 4) as u64;
        let patches = match self.sampling {
            Sampling::Random { per_image, .. } => per_image as u64,
            Sampling::Dense { stride } => {
                let step = (stride.max(1) as u64).saturating_mul(stride.max(1) as u64);
                self.max_pixels / step + 1
            }
        };
        self.max_pixels
            .saturating_mul(crate::image_io::BYTES_PER_PIXEL)
            .saturating_add(patches.saturating_mul(patch))
    }

    /// The most memory dense SIFT holds for one photo of at most `max_pixels` pixels: its
    /// working memory ([`crate::image_io::BYTES_PER_PIXEL`]), the smoothed photo and its
    /// orientation planes (40 bytes a pixel), and every keypoint's descriptor and place (524
    /// bytes) at each of [`SIFT_WINDOWS`].
    pub fn sift_memory(&self) -> u64 {
        let step = match self.sampling {
            Sampling::Dense { stride } => stride.max(1) as u64,
            Sampling::Random { .. } => SIFT_SAMPLE_STEP as u64,
        };
        let keypoints = (self.max_pixels / step.saturating_mul(step).max(1))
            .saturating_add(1)
            .saturating_mul(SIFT_WINDOWS.len() as u64)
            .saturating_mul((crate::sift::SIFT_DIMS * 4 + 12) as u64);
        self.max_pixels
            .saturating_mul(crate::image_io::BYTES_PER_PIXEL + 40)
            .saturating_add(keypoints)
    }

    /// The dense SIFT of [`Descriptor::Sift`] as the sampling lays it out: keypoints every
    /// `stride` px (dense) or every [`SIFT_SAMPLE_STEP`] px (random), at [`SIFT_WINDOWS`], each
    /// window inside the photo.
    pub fn sift(&self) -> Result<crate::sift::DenseSift, crate::sift::SiftError> {
        let step = match self.sampling {
            Sampling::Dense { stride } => stride,
            Sampling::Random { .. } => SIFT_SAMPLE_STEP,
        };
        crate::sift::DenseSift::new(step, SIFT_WINDOWS.to_vec(), crate::sift::Grid::Inside)
    }

    /// How many of a photo's keypoints the sample keeps and the seed that draws them
    /// ([`crate::descriptors::sample_rows`]): `per_image` of a random sampling, all of a dense.
    pub fn draw(&self) -> (usize, u64) {
        match self.sampling {
            Sampling::Random { per_image, seed } => (per_image, seed),
            Sampling::Dense { .. } => (usize::MAX, 0),
        }
    }

    /// The most pixels a photo's header may declare to be decoded: `max_pixels`, divided by the
    /// area the patch side enlarges it by (`(40 / patch)^2`), so the enlarged photo stays
    /// within `max_pixels`; the limit itself when `max_side` shrinks every photo enough first.
    pub fn decode_limit(&self) -> u64 {
        let zoom = self.zoom().max(1.0);
        let fits = |side: usize| (side as f64 * zoom).powi(2) <= self.max_pixels as f64;
        if zoom == 1.0 || self.max_side.is_some_and(fits) {
            return self.max_pixels;
        }
        ((self.max_pixels as f64 / (zoom * zoom)) as u64).max(1)
    }

    /// A photo skipped before decoding, said of the photo as described: with a patch side that
    /// enlarges it, its pixels once enlarged against `max_pixels` (the limit it broke is
    /// [`FeatureParams::decode_limit`]).
    fn skipped(&self, skip: Skip) -> Skip {
        match skip {
            Skip::TooManyPixels { width, height, .. } if self.decode_limit() < self.max_pixels => {
                Skip::TooManyPixels {
                    width,
                    height,
                    limit: self.max_pixels,
                    patch: self.patch,
                }
            }
            other => other,
        }
    }

    /// Photos a stage computes per batch on `threads` threads: eight a thread when a photo's
    /// result is small, one a thread when it holds a dense grid's descriptors.
    pub(crate) fn batch(&self, threads: usize, keeps_descriptors: bool) -> usize {
        match (self.sampling, keeps_descriptors) {
            (Sampling::Dense { .. }, true) => threads.max(1),
            _ => (threads * 8).max(16),
        }
    }

    /// Checks the rules of the parameters: patches per photo, a grid step, a downscale no
    /// smaller than a patch, a pixel limit.
    pub fn check(&self) -> Result<(), FeatureParamsError> {
        match self.sampling {
            Sampling::Random { per_image: 0, .. } => return Err(FeatureParamsError::NoPatches),
            Sampling::Random { per_image, .. } if per_image > MAX_PER_IMAGE => {
                return Err(FeatureParamsError::TooManyPatches(per_image));
            }
            Sampling::Dense { stride: 0 } => return Err(FeatureParamsError::Stride),
            _ => {}
        }
        if let Some(side) = self.max_side.filter(|&s| s < PATCH_SIDE) {
            return Err(FeatureParamsError::MaxSide(side));
        }
        if self.max_pixels == 0 {
            return Err(FeatureParamsError::MaxPixels);
        }
        if let Some(side) = self.patch.filter(|p| !(MIN_PATCH..=MAX_PATCH).contains(p)) {
            return Err(FeatureParamsError::Patch(side));
        }
        if let (Descriptor::Sift, Some(side)) = (self.descriptor, self.patch) {
            return Err(FeatureParamsError::SiftPatch(side));
        }
        Ok(())
    }
}

/// A rule [`FeatureParams`] break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureParamsError {
    /// No random patch per photo.
    NoPatches,
    /// More random patches per photo than [`MAX_PER_IMAGE`].
    TooManyPatches(usize),
    /// A grid step of 0.
    Stride,
    /// A downscale limit below a patch's side.
    MaxSide(usize),
    /// A pixel limit of 0.
    MaxPixels,
    /// A patch side outside [`MIN_PATCH`]`..=`[`MAX_PATCH`].
    Patch(usize),
    /// A patch side for dense SIFT, whose windows are in pixels of the photo.
    SiftPatch(usize),
}

impl Broken for FeatureParamsError {
    fn key(&self) -> &'static str {
        match self {
            Self::NoPatches | Self::TooManyPatches(_) => "per_image",
            Self::Stride => "stride",
            Self::MaxSide(_) => "max_side",
            Self::MaxPixels => "max_pixels",
            Self::Patch(_) | Self::SiftPatch(_) => "patch",
        }
    }

    fn value(&self) -> String {
        match self {
            Self::TooManyPatches(n) | Self::MaxSide(n) | Self::Patch(n) | Self::SiftPatch(n) => {
                n.to_string()
            }
            Self::NoPatches | Self::Stride | Self::MaxPixels => "0".into(),
        }
    }

    fn rule(&self) -> String {
        match self {
            Self::NoPatches => "must be at least 1 patch per photo".into(),
            Self::TooManyPatches(_) => format!("at most {MAX_PER_IMAGE} patches per photo"),
            Self::Stride => "must be at least 1 pixel".into(),
            Self::MaxSide(_) => format!("smaller than a {PATCH_SIDE}x{PATCH_SIDE} patch"),
            Self::MaxPixels => "1 or more megapixels".into(),
            Self::Patch(_) => format!(
                "must be {MIN_PATCH} to {MAX_PATCH} pixels of the photo a patch covers (the photo \
                 is resized by {PATCH_SIDE} / patch; {PATCH_SIDE}: as it is)"
            ),
            Self::SiftPatch(_) => format!(
                "is HOG's: dense SIFT describes the photo as it is, at windows of {:?} px of it \
                 (drop patch, or describe with hog)",
                SIFT_WINDOWS
            ),
        }
    }
}

impl std::fmt::Display for FeatureParamsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::params::show(self, f)
    }
}

impl std::error::Error for FeatureParamsError {}

/// Counts reported when the stage ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureSummary {
    /// Photos described.
    pub images: usize,
    /// Photos skipped (see the skipped manifest).
    pub skipped: usize,
    /// Patches written.
    pub patches: u64,
    /// Pixels of the described photos (after downscale).
    pub pixels: u64,
}

/// Progress after each batch: photos processed so far (described or skipped) and patches written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Photos processed.
    pub images: usize,
    /// Patches written, when this process knows them (`None` while nodes keep their patches
    /// and only tell how many photos they have done).
    pub patches: Option<u64>,
}

/// Path of a manifest beside `out`: `<out>.<suffix>`.
pub fn manifest_path(out: &Path, suffix: &str) -> PathBuf {
    crate::output::side(out, suffix)
}

/// The patches of one photo.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    /// Width of the photo the patches were cut from (after EXIF orientation and `max_side`).
    pub width: usize,
    /// Its height.
    pub height: usize,
    /// Top-left `(row, col)` of each patch.
    pub positions: Vec<(usize, usize)>,
    /// [`DIMS`] values per patch, in the order of `positions`.
    pub values: Vec<f32>,
}

/// What a photo stage made of one photo.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// The photo was described.
    Done {
        /// Width of the photo the patches were cut from.
        width: usize,
        /// Its height.
        height: usize,
        /// Patches it gave.
        patches: usize,
        /// The stage's result.
        value: T,
    },
    /// The photo was skipped, for this reason (the skipped manifest's text).
    Skipped(String),
}

impl<T> Outcome<T> {
    /// Patches the photo gave (0 when skipped).
    pub fn patches(&self) -> usize {
        match self {
            Self::Done { patches, .. } => *patches,
            Self::Skipped(_) => 0,
        }
    }

    /// The outcome without its result: the photo's size and patch count, or the skip.
    pub fn sized(&self) -> Outcome<()> {
        match self {
            Self::Done {
                width,
                height,
                patches,
                ..
            } => Outcome::Done {
                width: *width,
                height: *height,
                patches: *patches,
                value: (),
            },
            Self::Skipped(reason) => Outcome::Skipped(reason.clone()),
        }
    }
}

/// Where a photo stage's results come from, batch after batch in picture-id order: computed
/// here ([`run_stage`]'s own batches) or by other nodes (the cluster's sharded stages).
pub trait Source<T> {
    /// The results of the photos from index `from` on (at least one, at most the rest), or
    /// `None` when the source has nothing more.
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError>;
}

/// Every photo's result at once (gathered before the stage writes).
#[derive(Debug)]
pub struct Given<T>(pub Option<Vec<Outcome<T>>>);

impl<T> Source<T> for Given<T> {
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        Ok(if from == 0 { self.0.take() } else { None })
    }
}

/// Per-thread buffers of the photo stages.
#[derive(Debug, Default)]
pub(crate) struct Describers {
    patch: PatchDescriber,
    grid: BlockGrid,
    planes: PatchPlanes,
    /// For stages that assign patches to words.
    pub assign: crate::kmeans::AssignScratch,
    /// The same with the integer kernel (nearest word, nearest few).
    pub quant: crate::kmeans::quant::QuantScratch,
    pub few: crate::kmeans::quant::FewScratch,
    /// The approximate search's.
    pub approx: crate::kmeans::approx::SearchScratch,
}

/// Patches a photo stage describes at a time: a strip of 4,096 patches' descriptors (8 MiB),
/// however many the photo has.
pub const STRIP: usize = 4096;

/// A decoded photo's patches, laid out and ready to be described a strip at a time
/// ([`Layout::describe`]): the HOG grid of a cell-aligned sampling is computed once here.
#[derive(Debug)]
pub(crate) struct Layout {
    /// Width of the photo the patches are cut from.
    pub width: usize,
    /// Its height.
    pub height: usize,
    /// Top-left `(row, col)` of each patch.
    pub positions: Vec<(usize, usize)>,
    /// How the patches are described.
    by: DescribedBy,
}

/// How a layout's patches are described, all to the same definition (`hog(patch)`, or the
/// grid's windows for cell-aligned grids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DescribedBy {
    /// Windows of the photo's block grid (a cell-aligned dense grid).
    Grid,
    /// Gradients binned once for the photo ([`PatchPlanes`]: a fine dense grid off the cells).
    Planes,
    /// Each patch on its own (random patches, coarse grids off the cells).
    Patch,
}

impl DescribedBy {
    /// How the patches of `sampling` are described.
    fn of(sampling: &Sampling) -> Self {
        match sampling {
            _ if sampling.is_cell_aligned() => Self::Grid,
            Sampling::Dense { stride } if *stride < PLANES_BELOW_STRIDE => Self::Planes,
            Sampling::Dense { .. } | Sampling::Random { .. } => Self::Patch,
        }
    }
}

/// Whether the patches of `sampling` are described each on its own (random patches, and dense
/// grids off the cells from [`PLANES_BELOW_STRIDE`] px), rather than from gradients the photo's
/// patches share.
pub fn each_patch_alone(sampling: &Sampling) -> bool {
    DescribedBy::of(sampling) == DescribedBy::Patch
}

impl Layout {
    /// Writes the descriptors of patches `range` into `values` (resized to hold them).
    pub fn describe(
        &self,
        lum: &Luminance,
        describers: &mut Describers,
        range: Range<usize>,
        values: &mut Vec<f32>,
    ) {
        let positions = &self.positions[range];
        values.resize(positions.len() * DIMS, 0.0);
        let size = (self.width, self.height);
        for (&(r, c), out) in positions.iter().zip(values.chunks_exact_mut(DIMS)) {
            match self.by {
                DescribedBy::Grid => describers.grid.window(r / CELL_SIDE, c / CELL_SIDE, out),
                DescribedBy::Planes => describers.planes.describe(&lum.data, size, (r, c), out),
                DescribedBy::Patch => describers.patch.describe(&lum.data, self.width, r, c, out),
            }
        }
    }

    /// Every patch described at once (the features stage's result, which is all of them).
    pub fn describe_all(self, lum: &Luminance, describers: &mut Describers) -> Described {
        let mut values = Vec::new();
        self.describe(lum, describers, 0..self.positions.len(), &mut values);
        Described {
            width: self.width,
            height: self.height,
            positions: self.positions,
            values,
        }
    }
}

/// Lays out the patches of one decoded photo.
pub(crate) fn lay_out(
    lum: &Luminance,
    picture_id: u32,
    sampling: &Sampling,
    describers: &mut Describers,
) -> Result<Layout, Skip> {
    let (width, height) = (lum.width, lum.height);
    if width < PATCH_SIDE || height < PATCH_SIDE {
        return Err(Skip::TooSmall {
            width,
            height,
            patch: PATCH_SIDE,
        });
    }
    if width > usize::from(u16::MAX) || height > usize::from(u16::MAX) {
        return Err(Skip::TooLarge { width, height });
    }
    let positions = sampling.positions(picture_id, width, height);
    let by = DescribedBy::of(sampling);
    match by {
        DescribedBy::Grid => describers.grid.compute(&lum.data, width, height),
        DescribedBy::Planes => describers.planes.forget(),
        DescribedBy::Patch => {}
    }
    Ok(Layout {
        width,
        height,
        positions,
        by,
    })
}

/// The two manifests, written to temporary files and renamed into place on success.
struct Manifests {
    images: (PathBuf, csv::Writer<BufWriter<NamedTempFile>>),
    skipped: (PathBuf, csv::Writer<BufWriter<NamedTempFile>>),
}

impl Manifests {
    fn create(out: &Path) -> Result<Self, FeaturesError> {
        let open = |suffix: &str, header: &[&str]| {
            let path = manifest_path(out, suffix);
            let err = |source| FeaturesError::Manifest {
                path: path.clone(),
                source,
            };
            let tmp = atomic::temp_beside(&path).map_err(err)?;
            let mut w = csv::Writer::from_writer(BufWriter::new(tmp));
            w.write_record(header).map_err(|e| err(e.into()))?;
            Ok::<_, FeaturesError>((path, w))
        };
        Ok(Self {
            images: open("images.csv", &["picture_id", "path", "width", "height"])?,
            skipped: open("skipped.csv", &["picture_id", "path", "reason"])?,
        })
    }

    fn row(
        entry: &mut (PathBuf, csv::Writer<BufWriter<NamedTempFile>>),
        fields: &[&str],
    ) -> Result<(), FeaturesError> {
        entry
            .1
            .write_record(fields)
            .map_err(|e| FeaturesError::Manifest {
                path: entry.0.clone(),
                source: e.into(),
            })
    }

    fn finish(self) -> Result<(), FeaturesError> {
        for (path, writer) in [self.images, self.skipped] {
            let err = |source| FeaturesError::Manifest {
                path: path.clone(),
                source,
            };
            let tmp = writer
                .into_inner()
                .map_err(|e| err(e.into_error()))?
                .into_inner()
                .map_err(|e| err(e.into_error()))?;
            atomic::persist(tmp, &path).map_err(err)?;
        }
        Ok(())
    }
}

/// Where a stage built on [`run_stage`] writes what it makes of each photo, in picture-id order.
pub(crate) trait StageOutput<T> {
    /// Writes the result for one described photo.
    fn write(&mut self, photo: &Photo, value: T) -> Result<(), FeaturesError>;
    /// Completes the output (atomically); called before the manifests appear.
    fn finish(self) -> Result<(), FeaturesError>;
}

/// What a photo stage makes of one photo's laid-out patches (describing them as it needs, with
/// the photo's luminance): a result and the number of patches it used.
pub(crate) type Compute<'a, T> =
    dyn Fn(&mut Describers, &Photo, &Luminance, Layout) -> (T, usize) + Sync + 'a;

/// Decodes and describes the photos `range` of `collection` in parallel (rayon) and lets
/// `compute` turn each description into a result, in picture-id order.
pub(crate) fn compute_range<T: Send>(
    collection: &Collection,
    params: &FeatureParams,
    range: Range<usize>,
    compute: &Compute<'_, T>,
) -> Vec<Outcome<T>> {
    let photos = collection.photos().get(range).unwrap_or_default();
    photos
        .par_iter()
        .map_init(Describers::default, |describers, photo: &Photo| {
            let computed = (|| {
                if let Some(reason) = &photo.unusable {
                    return Err(Skip::Unusable(reason.clone()));
                }
                let lum = params.load(&collection.path_of(photo))?;
                let layout = lay_out(&lum, photo.picture_id, &params.sampling, describers)?;
                let (width, height) = (layout.width, layout.height);
                let (value, patches) = compute(describers, photo, &lum, layout);
                Ok(Outcome::Done {
                    width,
                    height,
                    patches,
                    value,
                })
            })();
            computed.unwrap_or_else(|skip: Skip| Outcome::Skipped(skip.to_string()))
        })
        .collect()
}

/// The photos' results computed here, in batches of bounded size.
struct Here<'c, 'f, T> {
    collection: &'c Collection,
    params: &'c FeatureParams,
    compute: &'c Compute<'f, T>,
    batch: usize,
}

impl<T: Send> Source<T> for Here<'_, '_, T> {
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        let n = self.collection.photos().len();
        if from >= n {
            return Ok(None);
        }
        let range = from..n.min(from.saturating_add(self.batch));
        Ok(Some(compute_range(
            self.collection,
            self.params,
            range,
            self.compute,
        )))
    }
}

/// The photo stages' own source: batches of a few per thread computed in this process.
pub(crate) fn here<'c, 'f, T: Send>(
    collection: &'c Collection,
    params: &'c FeatureParams,
    compute: &'c Compute<'f, T>,
    keeps_descriptors: bool,
) -> impl Source<T> + use<'c, 'f, T> {
    Here {
        collection,
        params,
        compute,
        batch: params.batch(rayon::current_num_threads(), keeps_descriptors),
    }
}

/// The shared writer of the photo stages (features, encode): takes the photos' results from
/// `source` batch by batch and writes results and manifest rows in picture-id order. Memory is
/// bounded by one batch.
pub(crate) fn run_stage<T, O: StageOutput<T>>(
    collection: &Collection,
    out: &Path,
    mut output: O,
    source: &mut dyn Source<T>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    let mut manifests = Manifests::create(out)?;
    let mut unread = Unread::default();
    let mut summary = FeatureSummary::default();
    let photos = collection.photos();
    let mut processed = 0;
    while processed < photos.len() {
        let left = photos.len() - processed;
        let batch = source.next(processed)?.unwrap_or_default();
        if batch.is_empty() || batch.len() > left {
            return Err(FeaturesError::Batch {
                got: batch.len(),
                left,
            });
        }
        let chunk = &photos[processed..processed + batch.len()];
        for (photo, outcome) in chunk.iter().zip(batch) {
            let id = photo.picture_id.to_string();
            match outcome {
                Outcome::Done {
                    width,
                    height,
                    patches,
                    value,
                } => {
                    output.write(photo, value)?;
                    summary.images += 1;
                    summary.patches += patches as u64;
                    summary.pixels += (width as u64).saturating_mul(height as u64);
                    let (w, h) = (width.to_string(), height.to_string());
                    Manifests::row(&mut manifests.images, &[&id, &photo.rel_path, &w, &h])?;
                }
                Outcome::Skipped(reason) => {
                    summary.skipped += 1;
                    unread.note(&photo.rel_path, &reason);
                    Manifests::row(&mut manifests.skipped, &[&id, &photo.rel_path, &reason])?;
                }
            }
        }
        processed += chunk.len();
        progress(Progress {
            images: processed,
            patches: Some(summary.patches),
        });
    }
    unread.check(collection, summary.images)?;
    output.finish()?;
    manifests.finish()?;
    Ok(summary)
}

/// The first reasons photos were skipped, for the error when none could be read.
#[derive(Debug, Default)]
pub struct Unread {
    skipped: usize,
    first: Vec<String>,
}

impl Unread {
    /// Reasons the error names.
    const SHOWN: usize = 3;

    /// `path` was skipped for `reason`.
    pub fn note(&mut self, path: &str, reason: &str) {
        self.skipped += 1;
        if self.first.len() < Self::SHOWN {
            self.first.push(format!("{path}: {reason}"));
        }
    }

    /// Refuses a stage over `collection` that read no photo (`read` of them): nothing it
    /// would write can serve, and the run after it would fail far from the cause.
    pub fn check(&self, collection: &Collection, read: usize) -> Result<(), FeaturesError> {
        if read > 0 || self.skipped == 0 {
            return Ok(());
        }
        let mut reasons = self.first.join("; ");
        if self.skipped > self.first.len() {
            reasons.push_str("; ...");
        }
        Err(FeaturesError::NoneRead {
            root: collection.root().to_path_buf(),
            skipped: self.skipped,
            reasons,
        })
    }
}

impl StageOutput<Described> for FeatureWriter {
    fn write(&mut self, photo: &Photo, described: Described) -> Result<(), FeaturesError> {
        let dims = self.dims();
        for (&(r, c), values) in described
            .positions
            .iter()
            .zip(described.values.chunks_exact(dims))
        {
            // Both fit: `describe` skipped photos with a side above u16::MAX.
            FeatureWriter::write(self, photo.picture_id, r as u16, c as u16, values)?;
        }
        Ok(())
    }

    fn finish(self) -> Result<(), FeaturesError> {
        FeatureWriter::finish(self)?;
        Ok(())
    }
}

/// Writes nothing for a photo: the stage's results stay where they were made.
struct WriteNothing;

impl StageOutput<()> for WriteNothing {
    fn write(&mut self, _: &Photo, (): ()) -> Result<(), FeaturesError> {
        Ok(())
    }

    fn finish(self) -> Result<(), FeaturesError> {
        Ok(())
    }
}

/// The features stage's manifests (`<out>.images.csv`, `<out>.skipped.csv`) and summary from
/// the photos' sizes and patch counts in `source`, when the patches stay on the nodes that
/// described them (no feature file at `out`): the manifests are those [`crate::describe::extract`] writes.
pub fn manifests_from(
    collection: &Collection,
    out: &Path,
    source: &mut dyn Source<()>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    run_stage(collection, out, WriteNothing, source, progress)
}

/// Runs the stage over HOG patches: describes every photo of `collection` into a feature file at
/// `out` ([`crate::describe::extract`] is the stage whatever the descriptor).
///
/// `progress` is called after each batch. Nothing appears at `out` (nor its manifests) unless the
/// whole run succeeds.
pub(crate) fn extract_patches(
    collection: &Collection,
    params: &FeatureParams,
    out: &Path,
    format: Format,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    extract_from(
        collection,
        (out, format, DIMS),
        &mut here(collection, params, &patches_of, true),
        progress,
    )
}

/// The features stage's result for one photo: its patches.
fn patches_of(
    describers: &mut Describers,
    _: &Photo,
    lum: &Luminance,
    layout: Layout,
) -> (Described, usize) {
    let patches = layout.positions.len();
    (layout.describe_all(lum, describers), patches)
}

/// Describes the HOG patches of the photos `range` of `collection` ([`crate::describe::range`]
/// is one node's part of the stage whatever the descriptor).
pub(crate) fn describe_patches(
    collection: &Collection,
    params: &FeatureParams,
    range: Range<usize>,
) -> Vec<Outcome<Described>> {
    compute_range(collection, params, range, &patches_of)
}

/// [`crate::describe::extract`] with the photos' patches of `dims` values from `source`
/// (computed elsewhere, by [`crate::describe::range`] or `descriptors::sample_range`): the same
/// file and manifests, byte for byte.
pub fn extract_from(
    collection: &Collection,
    (out, format, dims): (&Path, Format, usize),
    source: &mut dyn Source<Described>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    // Create the output first so an unwritable destination fails before any decoding.
    let writer = FeatureWriter::create(out, format, dims)?;
    run_stage(collection, out, writer, source, progress)
}
