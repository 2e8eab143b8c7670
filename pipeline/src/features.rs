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

use std::ffi::OsString;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tempfile::NamedTempFile;
use thiserror::Error;

use crate::atomic;
use crate::hog::{BlockGrid, CELL_SIDE, DIMS, PATCH_SIDE, PatchDescriber};
use crate::image_io::{Collection, Luminance, Photo, Skip, load_luminance};
use crate::patch::Sampling;
use crate::store::{FeatureWriter, Format, StoreError};

/// Errors of the features stage (skipped photos are not errors).
#[derive(Debug, Error)]
pub enum FeaturesError {
    /// Writing the feature file failed.
    #[error(transparent)]
    Store(#[from] StoreError),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureParams {
    /// Where patches are cut.
    pub sampling: Sampling,
    /// Downscale photos whose longer side exceeds this many pixels.
    pub max_side: Option<usize>,
    /// Skip photos whose header declares more pixels than this, before decoding them
    /// (default [`crate::image_io::MAX_PIXELS`]).
    pub max_pixels: u64,
}

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
    /// Patches written.
    pub patches: u64,
}

/// Path of a manifest beside `out`: `<out>.<suffix>`.
pub fn manifest_path(out: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(out.as_os_str());
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// The patches of one photo.
#[derive(Debug)]
pub(crate) struct Described {
    pub width: usize,
    pub height: usize,
    pub positions: Vec<(usize, usize)>,
    pub values: Vec<f32>,
}

/// Per-thread buffers of the photo stages.
#[derive(Debug, Default)]
pub(crate) struct Describers {
    patch: PatchDescriber,
    grid: BlockGrid,
    /// For stages that assign patches to words.
    pub assign: crate::kmeans::AssignScratch,
    /// The same with the integer kernel (nearest word, nearest few).
    pub quant: crate::kmeans::quant::QuantScratch,
    pub few: crate::kmeans::quant::FewScratch,
}

/// Describes the patches of one decoded photo.
pub(crate) fn describe(
    lum: &Luminance,
    picture_id: u32,
    sampling: &Sampling,
    describers: &mut Describers,
) -> Result<Described, Skip> {
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
    let mut values = vec![0f32; positions.len() * DIMS];
    if sampling.is_cell_aligned() {
        describers.grid.compute(&lum.data, width, height);
        for (&(r, c), out) in positions.iter().zip(values.chunks_exact_mut(DIMS)) {
            describers.grid.window(r / CELL_SIDE, c / CELL_SIDE, out);
        }
    } else {
        for (&(r, c), out) in positions.iter().zip(values.chunks_exact_mut(DIMS)) {
            describers.patch.describe(&lum.data, width, r, c, out);
        }
    }
    Ok(Described {
        width,
        height,
        positions,
        values,
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

/// A stage's result for one photo, with the facts the summary and manifest need.
struct Computed<T> {
    width: usize,
    height: usize,
    patches: usize,
    value: T,
}

/// What a photo stage makes of one described photo (given its luminance too): a result and the
/// number of patches it used.
pub(crate) type Compute<'a, T> =
    dyn Fn(&mut Describers, &Photo, &Luminance, Described) -> (T, usize) + Sync + 'a;

/// The shared driver of the photo stages (features, encode): decodes and describes photos in
/// parallel batches, lets `compute` turn each description (and the photo's luminance) into a
/// result and the number of patches it used (in parallel, with the thread's buffers), then writes
/// results and manifest rows in picture-id order.
pub(crate) fn run_stage<T: Send, O: StageOutput<T>>(
    collection: &Collection,
    params: &FeatureParams,
    out: &Path,
    mut output: O,
    compute: &Compute<'_, T>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    let mut manifests = Manifests::create(out)?;
    let mut summary = FeatureSummary::default();
    let batch = (rayon::current_num_threads() * 8).max(16);
    let mut processed = 0;
    for chunk in collection.photos().chunks(batch) {
        let results: Vec<Result<Computed<T>, Skip>> = chunk
            .par_iter()
            .map_init(Describers::default, |describers, photo: &Photo| {
                if let Some(reason) = &photo.unusable {
                    return Err(Skip::Unusable(reason.clone()));
                }
                let lum = load_luminance(
                    &collection.path_of(photo),
                    params.max_side,
                    params.max_pixels,
                )?;
                let described = describe(&lum, photo.picture_id, &params.sampling, describers)?;
                let (width, height) = (described.width, described.height);
                let (value, patches) = compute(describers, photo, &lum, described);
                Ok(Computed {
                    width,
                    height,
                    patches,
                    value,
                })
            })
            .collect();
        for (photo, result) in chunk.iter().zip(results) {
            let id = photo.picture_id.to_string();
            match result {
                Ok(Computed {
                    width,
                    height,
                    patches,
                    value,
                }) => {
                    output.write(photo, value)?;
                    summary.images += 1;
                    summary.patches += patches as u64;
                    summary.pixels += (width * height) as u64;
                    let (w, h) = (width.to_string(), height.to_string());
                    Manifests::row(&mut manifests.images, &[&id, &photo.rel_path, &w, &h])?;
                }
                Err(skip) => {
                    summary.skipped += 1;
                    let reason = skip.to_string();
                    Manifests::row(&mut manifests.skipped, &[&id, &photo.rel_path, &reason])?;
                }
            }
        }
        processed += chunk.len();
        progress(Progress {
            images: processed,
            patches: summary.patches,
        });
    }
    output.finish()?;
    manifests.finish()?;
    Ok(summary)
}

impl StageOutput<Described> for FeatureWriter {
    fn write(&mut self, photo: &Photo, described: Described) -> Result<(), FeaturesError> {
        for (&(r, c), values) in described
            .positions
            .iter()
            .zip(described.values.chunks_exact(DIMS))
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

/// Runs the stage: describes every photo of `collection` into a feature file at `out`.
///
/// `progress` is called after each batch. Nothing appears at `out` (nor its manifests) unless the
/// whole run succeeds.
pub fn extract(
    collection: &Collection,
    params: &FeatureParams,
    out: &Path,
    format: Format,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    // Create the output first so an unwritable destination fails before any decoding.
    let writer = FeatureWriter::create(out, format, DIMS)?;
    run_stage(
        collection,
        params,
        out,
        writer,
        &|_, _, _, described| {
            let patches = described.positions.len();
            (described, patches)
        },
        progress,
    )
}
