//! Visual words as pictures: for each of the most used words of a vocabulary, the sample patches
//! nearest it, cut from the photos, in one grayscale montage (a row per word).
//!
//! The sample is drawn here, as the vocabulary's was: random patches (seeded) of photos spread
//! evenly over the collection, described by the same HOG, each given its nearest word by the
//! exact f32 assignment. A word's row shows the patches nearest to it among those it won, nearest
//! first; the words shown are those that won the most patches (ties to the lower index).

use image::{GrayImage, Luma};
use rayon::prelude::*;

use crate::hog::{DIMS, PATCH_SIDE, PatchDescriber};
use crate::image_io::Collection;
use crate::kmeans::{AssignScratch, Centroids, assign};
use crate::partition::Matrix;
use crate::patch::Sampling;

/// What a montage shows and where its patches come from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MontageParams {
    /// Words shown (rows).
    pub words: usize,
    /// Patches per word (columns).
    pub patches: usize,
    /// Photos sampled at most, spread evenly over the collection.
    pub photos: usize,
    /// Random patches per photo.
    pub per_image: usize,
    /// Seed of the patches' positions.
    pub seed: u64,
    /// Pixels per patch pixel in the picture (1 to 8).
    pub zoom: usize,
    /// Downscale photos whose longer side exceeds this, as the vocabulary's photos were.
    pub max_side: Option<usize>,
    /// The side a patch covers, as the vocabulary's photos were described
    /// ([`crate::features::FeatureParams::patch`]; none: 40, the photo as it is).
    pub patch: Option<usize>,
    /// Skip photos declaring more pixels than this.
    pub max_pixels: u64,
}

/// Errors of a montage.
#[derive(Debug, thiserror::Error)]
pub enum MontageError {
    /// A setting out of range.
    #[error("{0}")]
    Params(String),
    /// The vocabulary is not of HOG descriptors.
    #[error("the vocabulary holds {0}-value words; patches are described by {DIMS} values")]
    Dims(usize),
    /// No patch could be drawn.
    #[error("no photo of {0} gave a patch (all skipped or smaller than {PATCH_SIDE} px)")]
    Empty(String),
}

impl MontageParams {
    /// Refuses settings that draw nothing or an unreasonably large picture.
    pub fn check(&self) -> Result<(), MontageError> {
        let bad = |m: String| Err(MontageError::Params(m));
        if !(1..=1024).contains(&self.words) {
            return bad(format!("words {}: must be 1 to 1024", self.words));
        }
        if !(1..=64).contains(&self.patches) {
            return bad(format!("patches {}: must be 1 to 64", self.patches));
        }
        if !(1..=100_000).contains(&self.photos) {
            return bad(format!("photos {}: must be 1 to 100000", self.photos));
        }
        if !(1..=10_000).contains(&self.per_image) {
            return bad(format!("per-image {}: must be 1 to 10000", self.per_image));
        }
        if !(1..=8).contains(&self.zoom) {
            return bad(format!("zoom {}: must be 1 to 8", self.zoom));
        }
        let sides = crate::features::MIN_PATCH..=crate::features::MAX_PATCH;
        if let Some(patch) = self.patch.filter(|p| !sides.contains(p)) {
            return bad(format!(
                "patch {patch}: must be {} to {} pixels",
                sides.start(),
                sides.end()
            ));
        }
        // The settings together, before anything is allocated.
        let need = self.memory();
        if need > MAX_MONTAGE_BYTES {
            return bad(format!(
                "photos {} x per-image {} sample patches ({} bytes each) and a picture of {} \
                 words x {} patches at zoom {} need {:.1} GB, more than the {:.1} GB a montage \
                 may take: sample fewer patches, or draw fewer words, patches or a smaller zoom",
                self.photos,
                self.per_image,
                SAMPLE_BYTES,
                self.words,
                self.patches,
                self.zoom,
                need as f64 / 1e9,
                MAX_MONTAGE_BYTES as f64 / 1e9
            ));
        }
        Ok(())
    }

    /// The most memory these settings take together: every sample patch ([`SAMPLE_BYTES`]) and
    /// the picture twice (its pixels and its PNG). A photo being decoded is bounded by the pixel
    /// limit as in every photo stage, whatever these settings are.
    pub fn memory(&self) -> u64 {
        let samples = (self.photos as u64).saturating_mul(self.per_image as u64);
        let side = (PATCH_SIDE * self.zoom) as u64 + u64::from(GAP);
        let picture = (self.words as u64 * side + u64::from(GAP))
            .saturating_mul(self.patches as u64 * side + u64::from(GAP));
        samples
            .saturating_mul(SAMPLE_BYTES)
            .saturating_add(picture.saturating_mul(2))
    }
}

/// What a sample patch holds at the peak of a montage: its pixels (1,600 bytes), its
/// descriptor twice (2 x 2,048: the photo's, then all of them together), its place, label and
/// distance; 6.65 kB a patch measured (1,000,000 patches took 6.65 GB).
pub const SAMPLE_BYTES: u64 = 7_000;

/// The most memory a montage may take: 4 GiB.
pub const MAX_MONTAGE_BYTES: u64 = 4 << 30;

/// One patch of the montage.
#[derive(Debug, Clone, PartialEq)]
pub struct Tile {
    /// The photo's picture id in the collection.
    pub picture_id: u32,
    /// Its path relative to the collection.
    pub path: String,
    /// Top-left pixel of the patch (in the photo as described: oriented, downscaled).
    pub row: usize,
    /// Its column.
    pub col: usize,
    /// Squared distance of its descriptor to the word.
    pub distance: f32,
}

/// One row of the montage.
#[derive(Debug, Clone, PartialEq)]
pub struct WordRow {
    /// The word's index in the vocabulary.
    pub word: usize,
    /// Sample patches whose nearest word it is.
    pub won: usize,
    /// The patches shown, nearest first.
    pub tiles: Vec<Tile>,
}

/// A drawn montage.
#[derive(Debug, Clone)]
pub struct Montage {
    /// The rows, most used word first.
    pub rows: Vec<WordRow>,
    /// The picture.
    pub image: GrayImage,
    /// Photos sampled.
    pub photos: usize,
    /// Photos skipped (undecodable, too large, smaller than a patch).
    pub skipped: usize,
    /// Patches described.
    pub patches: usize,
}

impl Montage {
    /// Picture rows from one word's row of tiles to the next's (a tile and its gap).
    pub fn pitch(&self) -> u32 {
        let rows = self.rows.len().max(1) as u32;
        self.image.height().saturating_sub(GAP) / rows
    }
}

/// A described patch with its pixels.
struct Sample {
    photo: usize,
    row: usize,
    col: usize,
    pixels: Vec<u8>,
}

/// Gap between tiles, in picture pixels.
pub const GAP: u32 = 2;

/// Draws the montage of `centroids` over `collection`.
pub fn draw(
    collection: &Collection,
    centroids: &Centroids,
    params: &MontageParams,
) -> Result<Montage, MontageError> {
    params.check()?;
    if centroids.dims() != DIMS {
        return Err(MontageError::Dims(centroids.dims()));
    }
    let photos = collection.photos();
    let chosen: Vec<usize> = spread(photos.len(), params.photos);
    let sampling = Sampling::Random {
        per_image: params.per_image,
        seed: params.seed,
    };
    let described: Vec<Option<(Vec<Sample>, Vec<f32>)>> = chosen
        .par_iter()
        .map(|&i| {
            let photo = &photos[i];
            // Loaded as the features stage loads them (downscale, patch side, pixel limit).
            let like_sample = crate::features::FeatureParams {
                sampling,
                max_side: params.max_side,
                max_pixels: params.max_pixels,
                mirror: false,
                patch: params.patch,
                descriptor: crate::features::Descriptor::Hog,
            };
            let lum = like_sample.load(&collection.path_of(photo)).ok()?;
            let positions = sampling.positions(photo.picture_id, lum.width, lum.height);
            if positions.is_empty() {
                return None;
            }
            let mut describer = PatchDescriber::default();
            let mut values = vec![0.0; positions.len() * DIMS];
            let mut samples = Vec::with_capacity(positions.len());
            for (&(r, c), out) in positions.iter().zip(values.chunks_exact_mut(DIMS)) {
                describer.describe(&lum.data, lum.width, r, c, out);
                let pixels = (0..PATCH_SIDE)
                    .flat_map(|y| {
                        let start = (r + y) * lum.width + c;
                        lum.data[start..start + PATCH_SIDE].iter().copied()
                    })
                    .map(|v| v.round().clamp(0.0, 255.0) as u8)
                    .collect();
                samples.push(Sample {
                    photo: i,
                    row: r,
                    col: c,
                    pixels,
                });
            }
            Some((samples, values))
        })
        .collect();
    let skipped = described.iter().filter(|d| d.is_none()).count();
    let (samples, values): (Vec<Vec<Sample>>, Vec<Vec<f32>>) =
        described.into_iter().flatten().unzip();
    let samples: Vec<Sample> = samples.into_iter().flatten().collect();
    let values: Vec<f32> = values.concat();
    if samples.is_empty() {
        return Err(MontageError::Empty(collection.root().display().to_string()));
    }
    let n = samples.len();
    let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
    assign(
        Matrix::new(&values, n, DIMS, DIMS),
        centroids,
        &mut AssignScratch::default(),
        &mut labels,
        &mut dist,
    );
    // Each word's patches, nearest first (ties by sample order).
    let mut by_word: Vec<Vec<usize>> = vec![Vec::new(); centroids.k()];
    for (i, &w) in labels.iter().enumerate() {
        by_word[w as usize].push(i);
    }
    let mut order: Vec<usize> = (0..centroids.k())
        .filter(|&w| !by_word[w].is_empty())
        .collect();
    order.sort_by(|&a, &b| by_word[b].len().cmp(&by_word[a].len()).then(a.cmp(&b)));
    order.truncate(params.words);
    let rows: Vec<(WordRow, Vec<usize>)> = order
        .iter()
        .map(|&w| {
            let mut members = by_word[w].clone();
            members.sort_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(a.cmp(&b)));
            members.truncate(params.patches);
            let tiles = members
                .iter()
                .map(|&i| {
                    let s = &samples[i];
                    let photo = &photos[s.photo];
                    Tile {
                        picture_id: photo.picture_id,
                        path: photo.rel_path.clone(),
                        row: s.row,
                        col: s.col,
                        distance: dist[i],
                    }
                })
                .collect();
            let row = WordRow {
                word: w,
                won: by_word[w].len(),
                tiles,
            };
            (row, members)
        })
        .collect();
    let image = picture(&rows, &samples, params);
    Ok(Montage {
        rows: rows.into_iter().map(|(row, _)| row).collect(),
        image,
        photos: chosen.len(),
        skipped,
        patches: n,
    })
}

/// `m` indices spread evenly over `0..n` (all of them when `m >= n`).
fn spread(n: usize, m: usize) -> Vec<usize> {
    if m >= n {
        return (0..n).collect();
    }
    (0..m).map(|i| i * n / m).collect()
}

/// The rows as tiles on a white ground, a word per row.
fn picture(
    rows: &[(WordRow, Vec<usize>)],
    samples: &[Sample],
    params: &MontageParams,
) -> GrayImage {
    let side = (PATCH_SIDE * params.zoom) as u32;
    let zoom = params.zoom as u32;
    let width = GAP + params.patches as u32 * (side + GAP);
    let height = GAP + rows.len() as u32 * (side + GAP);
    let mut image = GrayImage::from_pixel(width, height, Luma([255]));
    for (r, (_, members)) in rows.iter().enumerate() {
        for (c, &i) in members.iter().enumerate() {
            let (x0, y0) = (GAP + c as u32 * (side + GAP), GAP + r as u32 * (side + GAP));
            for y in 0..side {
                for x in 0..side {
                    let v =
                        samples[i].pixels[(y / zoom) as usize * PATCH_SIDE + (x / zoom) as usize];
                    image.put_pixel(x0 + x, y0 + y, Luma([v]));
                }
            }
        }
    }
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings' memory is counted together and refused with its figure before anything is
    /// allocated (1,024 words x 64 patches at zoom 8 asked 6.4 GB; 100 photos x 10,000 patches
    /// 6.65 GB).
    #[test]
    fn settings_that_would_take_too_much_memory_together_are_refused() {
        let base = MontageParams {
            words: 64,
            patches: 8,
            photos: 200,
            per_image: 50,
            seed: 1,
            zoom: 2,
            max_side: None,
            patch: None,
            max_pixels: 100_000_000,
        };
        base.check().expect("the defaults' scale");
        let picture = MontageParams {
            words: 1024,
            patches: 64,
            zoom: 8,
            ..base
        };
        let samples = MontageParams {
            photos: 100,
            per_image: 10_000,
            ..base
        };
        for (what, params) in [("picture", picture), ("samples", samples)] {
            let err = params.check().expect_err(what).to_string();
            assert!(err.contains(" GB, more than the 4.3 GB"), "{what}: {err}");
        }
    }

    #[test]
    fn photos_are_spread_evenly_and_all_when_few() {
        assert_eq!(spread(10, 4), vec![0, 2, 5, 7]);
        assert_eq!(spread(3, 8), vec![0, 1, 2]);
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let ok = MontageParams {
            words: 16,
            patches: 8,
            photos: 300,
            per_image: 50,
            seed: 1,
            zoom: 2,
            max_side: None,
            patch: None,
            max_pixels: 100_000_000,
        };
        assert!(ok.check().is_ok());
        for bad in [
            MontageParams { words: 0, ..ok },
            MontageParams { patches: 65, ..ok },
            MontageParams { zoom: 9, ..ok },
            MontageParams { per_image: 0, ..ok },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
