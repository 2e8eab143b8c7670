//! Encoding: each photo becomes a vector over the vocabulary, a histogram of its words (bag of
//! words, below) or, with `Method::Vlad`, the sums of its patches' residuals to their words
//! ([`vlad`]: normalised its own way; what follows of normalisation is bag of words').
//!
//! Every photo is described densely (same HOG, sampling and skip rules as the features stage),
//! each patch goes to its nearest visual word with the k-means engine's blocked-GEMM assignment,
//! and the counts become a histogram:
//!
//! * without a pyramid (`levels = 1`): `counts / patches`;
//! * with a spatial pyramid of `levels = L + 1` levels (Lazebnik, Schmid and Ponce 2006): level
//!   `l` cuts the photo into `2^l x 2^l` cells by patch centre, each cell's histogram is divided by
//!   the photo's patch count, and level `l` is weighted `1 / 2^L` for `l = 0`, `1 / 2^(L - l + 1)`
//!   otherwise; the levels are concatenated (level 0 first, cells in row-major order);
//! * with `strips` ([`Pyramid`]: Chatfield et al.'s 1x1 + 2x2 + 3x1 is 2 levels and 3 strips),
//!   the levels are followed by that many horizontal strips of the photo, top to bottom, by
//!   patch centre, weighted as the finest level (Fisher vectors and VLAD alike);
//! * with soft assignment ([`Soft`]), a patch counts toward its few nearest words instead of one,
//!   with weights that fall with distance and sum to 1;
//! * with several scales (`scales`, patch sides in pixels after the base 40), the photo is also
//!   downscaled by `40 / side` (area averaging) and described densely at the same stride, so its
//!   40-px patches cover `side`-px patches of the photo; every scale's patches count in the one
//!   histogram, placed in the pyramid by their centres in the photo;
//! * then normalised: `l1` divides by the sum (rows sum to 1), `hellinger` takes the square root of
//!   the L1-normalised vector (a common improvement for linear SVMs on histograms).
//!
//! Output: CSV (`picture_id,path,h0,...`) when the path ends in `.csv`, otherwise the binary
//! feature format (record `picture_id`, row and col 0, one value per histogram bin).

mod bow;
mod error;
pub mod fisher;
mod method;
mod params;
mod vlad;
mod words;

pub use self::bow::{
    MAX_STRIPS, Norm, Pyramid, Shape, Soft, encoded_len, histogram, weighted_histogram,
};
pub use self::error::{
    EncodeParamsError, MAX_PARTS, MAX_PYRAMID, MAX_SCALE_SIDE, MAX_SCALES, MAX_SOFT,
    MAX_VLAD_VALUES,
};
pub use self::method::{Accumulator, Found, Method, Pooling};
pub use self::params::{EncodeParams, Encoding, base_scale, is_base_scale};
pub use self::vlad::{VladShape, VladSums, vlad};
pub use self::words::Words;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use std::ops::Range;

use crate::descriptors::{Foreign, Keypoints, Origin};
use crate::features::{
    Describers, Descriptor, FeatureSummary, FeaturesError, Layout, Outcome, Progress, STRIP,
    Source, StageOutput, compute_range, here, lay_out, run_stage,
};
use crate::hog::PATCH_SIDE;
use crate::image_io::{Collection, Luminance, Photo};
use crate::kmeans::{Centroids, Kernel, approx, assign, nearest_few, quant};
use crate::partition::Matrix;
use crate::store::{FeatureWriter, Format, StoreError};

/// Where histograms go.
enum Sink {
    Bin(FeatureWriter),
    Csv {
        path: PathBuf,
        tmp: std::io::BufWriter<tempfile::NamedTempFile>,
        /// Values per histogram.
        len: usize,
    },
}

impl StageOutput<Vec<f32>> for Sink {
    fn write(&mut self, photo: &Photo, hist: Vec<f32>) -> Result<(), FeaturesError> {
        match self {
            Self::Bin(w) => w.write(photo.picture_id, 0, 0, &hist)?,
            Self::Csv { path, tmp, len } => {
                if hist.len() != *len {
                    return Err(StoreError::Record {
                        path: path.clone(),
                        location: format!("picture {}", photo.picture_id),
                        message: format!("has {} values, histograms hold {len}", hist.len()),
                    }
                    .into());
                }
                let mut line = format!("{},{}", photo.picture_id, csv_field(&photo.rel_path));
                let mut buf = ryu::Buffer::new();
                for v in hist {
                    line.push(',');
                    line.push_str(buf.format(v));
                }
                line.push('\n');
                tmp.write_all(line.as_bytes())
                    .map_err(|source| StoreError::Io {
                        path: path.clone(),
                        source,
                    })?;
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<(), FeaturesError> {
        match self {
            Self::Bin(w) => {
                w.finish()?;
            }
            Self::Csv { path, tmp, .. } => {
                let io = |source| StoreError::Io {
                    path: path.clone(),
                    source,
                };
                let tmp = tmp.into_inner().map_err(|e| io(e.into_error()))?;
                crate::atomic::persist(tmp, &path).map_err(io)?;
            }
        }
        Ok(())
    }
}

/// A coarser scale of a photo: the downscaled photo, its patches laid out, and where their
/// centres fall in the photo.
type Coarse = (Luminance, Layout, Vec<(usize, usize)>);

/// The photo at patch side `side`: downscaled by `PATCH_SIDE / side` and its patches laid out
/// densely, with where their centres fall in the photo; `None` when the downscaled photo cannot
/// hold a patch.
fn coarser(
    lum: &Luminance,
    side: usize,
    picture_id: u32,
    params: &EncodeParams,
    describers: &mut crate::features::Describers,
) -> Option<Coarse> {
    let longest = lum.width.max(lum.height);
    let target = (longest * PATCH_SIDE).div_ceil(side).max(1);
    let small = lum.scaled_within(target);
    let layout = lay_out(&small, picture_id, &params.features.sampling, describers).ok()?;
    let (fy, fx) = (
        lum.height as f64 / small.height as f64,
        lum.width as f64 / small.width as f64,
    );
    let half = (PATCH_SIDE / 2) as f64;
    let placed = (layout.positions.iter())
        .map(|&(r, c)| {
            // Same centre: (r' + 20) = (r + 20) f; f >= 1, so r' >= 0.
            (
                ((r as f64 + half) * fy - half).round() as usize,
                ((c as f64 + half) * fx - half).round() as usize,
            )
        })
        .collect();
    Some((small, layout, placed))
}

/// Quotes a CSV field when it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A vocabulary ready to encode photos with: checked, and quantised once for the integer kernel.
#[derive(Debug)]
pub struct Encoder {
    words: Words,
    params: EncodeParams,
    quantized: Option<quant::QuantCentroids>,
    /// The approximate search's index over the vocabulary, and its probes.
    index: Option<(approx::Index, usize)>,
}

impl Encoder {
    /// Encodes against `words` as `params` say: a vocabulary's words must have the descriptor's
    /// dims, a mixture must project them and match the method's projected dims (`out` names
    /// the histograms in the error).
    pub fn new(words: Words, params: EncodeParams, out: &Path) -> Result<Self, FeaturesError> {
        let mismatch = |message: String| -> FeaturesError {
            StoreError::Format {
                path: out.to_path_buf(),
                message,
            }
            .into()
        };
        let (mut quantized, mut index) = (None, None);
        match (&words, params.method.projected()) {
            (Words::Vocabulary(vocabulary), None) => {
                if vocabulary.dims() != params.dims {
                    return Err(mismatch(format!(
                        "vocabulary has {} dims, the {} {}",
                        vocabulary.dims(),
                        descriptor_name(&params),
                        params.dims
                    )));
                }
                // Centroids are quantised once; each scale's patches when they are described.
                quantized =
                    (params.kernel == Kernel::Int8).then(|| quant::QuantCentroids::new(vocabulary));
                // The vocabulary is indexed once for the whole run.
                index = match params.approx {
                    Some(search) if params.method.words() == 1 => Some(search.index(vocabulary)),
                    _ => None,
                };
            }
            (Words::Mixture(model), Some(d)) => {
                if model.input_dims() != params.dims || model.dims() != d {
                    return Err(mismatch(format!(
                        "the mixture projects {} dims onto {}, the encoding wants the {}'s {} \
                         onto {d}",
                        model.input_dims(),
                        model.dims(),
                        descriptor_name(&params),
                        params.dims
                    )));
                }
            }
            (Words::Vocabulary(_), Some(_)) => {
                return Err(mismatch(
                    "Fisher vectors encode over a mixture (vocab mixture), not a vocabulary".into(),
                ));
            }
            (Words::Mixture(_), None) => {
                return Err(mismatch(format!(
                    "a mixture encodes Fisher vectors, not {}",
                    params.method.pooling().name()
                )));
            }
        }
        Ok(Self {
            words,
            params,
            quantized,
            index,
        })
    }

    /// Values per histogram.
    pub fn len(&self) -> usize {
        self.params.len(self.words.k())
    }

    /// Whether histograms are empty (never: a vocabulary has words).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The settings.
    pub fn params(&self) -> &EncodeParams {
        &self.params
    }

    /// Words (r per patch, as the method needs) and their squared distances for one scale's
    /// patches, appended to `words` and `dists`: described and searched a strip of [`STRIP`]
    /// patches at a time, so a photo's working memory does not grow with its patches. A method
    /// that needs the descriptors gets each strip in `acc`, with the patches' places in the
    /// photo (`placed`, one per patch of the layout).
    fn find_words(
        &self,
        describers: &mut Describers,
        (lum, layout, placed): (&Luminance, &Layout, &[(usize, usize)]),
        (words, dists): (&mut Vec<u32>, &mut Vec<f32>),
        mut acc: Option<&mut method::Accumulator>,
    ) {
        let n = layout.positions.len();
        let mut values = Vec::new();
        for start in (0..n).step_by(STRIP) {
            let end = n.min(start + STRIP);
            layout.describe(lum, describers, start..end, &mut values);
            let (w, d) = match &self.words {
                Words::Vocabulary(vocabulary) if self.params.method.words() > 0 => {
                    self.strip_words(vocabulary, describers, &values)
                }
                // A mixture: no word to find.
                _ => (Vec::new(), Vec::new()),
            };
            match acc.as_deref_mut() {
                // The accumulator has what the method needs: the words are not kept.
                Some(acc) => self.params.method.accumulate(
                    acc,
                    &values,
                    (&w, &d),
                    &placed[start..end],
                    &self.words,
                ),
                None => {
                    words.extend(w);
                    dists.extend(d);
                }
            }
        }
    }

    /// [`Encoder::find_words`] for one strip of descriptors.
    fn strip_words(
        &self,
        vocabulary: &Centroids,
        describers: &mut Describers,
        values: &[f32],
    ) -> (Vec<u32>, Vec<f32>) {
        let r = self.params.method.words();
        let x = Matrix::dense(values, vocabulary.dims());
        let n = x.rows();
        let (mut words, mut dists) = (vec![0u32; n * r], vec![0f32; n * r]);
        if let Some((index, probes)) = &self.index {
            index.search(x, *probes, &mut describers.approx, &mut words, &mut dists);
            return (words, dists);
        }
        let scratch = &mut describers.assign;
        // The integer kernel quantises the patches once.
        match self
            .quantized
            .as_ref()
            .map(|cq| (cq, quant::QuantRows::new(x.into())))
        {
            None if r == 1 => assign(x, vocabulary, scratch, &mut words, &mut dists),
            None => nearest_few(x, vocabulary, scratch, r, &mut words, &mut dists),
            Some((cq, xq)) if r == 1 => {
                let (xq, scratch) = (xq.slice(0, n), &mut describers.quant);
                quant::assign_quantized(x, xq, cq, vocabulary, scratch, &mut words, &mut dists);
            }
            Some((cq, xq)) => {
                let (xq, scratch) = (xq.slice(0, n), &mut describers.few);
                quant::nearest_few_quantized(
                    x, xq, cq, vocabulary, scratch, r, &mut words, &mut dists,
                );
            }
        }
        (words, dists)
    }

    /// One photo's histogram and the number of patches it counts.
    fn compute(
        &self,
        describers: &mut Describers,
        photo: &Photo,
        lum: &Luminance,
        layout: Layout,
    ) -> (Vec<f32>, usize) {
        let params = &self.params;
        let shape = Shape {
            k: self.words.k(),
            width: layout.width,
            height: layout.height,
            pyramid: params.pyramid(),
            norm: params.norm,
        };
        let (mut words, mut dists) = (Vec::new(), Vec::new());
        let mut acc = params.method.accumulator(shape, params.dims);
        let base = (lum, &layout, layout.positions.as_slice());
        self.find_words(describers, base, (&mut words, &mut dists), acc.as_mut());
        let mut positions = layout.positions;
        // (Checked by the caller: larger sides, ascending; anything else adds nothing.)
        for &side in params.scales.iter().skip(1).filter(|&&s| s > PATCH_SIDE) {
            let Some((small, coarse, placed)) =
                coarser(lum, side, photo.picture_id, params, describers)
            else {
                continue; // too small at this scale: no patches from it
            };
            let scale = (&small, &coarse, placed.as_slice());
            self.find_words(describers, scale, (&mut words, &mut dists), acc.as_mut());
            positions.extend(placed);
        }
        let found = Found {
            words: params.method.words(),
            ids: &words,
            dists: &dists,
            positions: &positions,
        };
        (
            params.method.pool(found, shape, acc, &self.words),
            positions.len(),
        )
    }

    /// One photo's vector from descriptors made elsewhere (`keypoints` of a `width x height`
    /// photo), searched a strip at a time as patches are, each placed in the pyramid by its
    /// centre (one within [`PATCH_SIDE`]` / 2` px of the top or left edge as if that far in:
    /// the same cell whenever a cell of the finest level is that wide), and the keypoints used.
    fn keypoints(
        &self,
        describers: &mut Describers,
        (width, height): (usize, usize),
        keypoints: &Keypoints,
    ) -> (Vec<f32>, usize) {
        let params = &self.params;
        let shape = Shape {
            k: self.words.k(),
            width,
            height,
            pyramid: params.pyramid(),
            norm: params.norm,
        };
        let half = PATCH_SIDE / 2;
        // Top-left corners of patches of the base side centred on the keypoints.
        let positions: Vec<(usize, usize)> = (keypoints.places.iter())
            .map(|&(x, y, _)| {
                (
                    (y as usize).saturating_sub(half),
                    (x as usize).saturating_sub(half),
                )
            })
            .collect();
        let (mut words, mut dists) = (Vec::new(), Vec::new());
        let mut acc = params.method.accumulator(shape, params.dims);
        let dims = keypoints.dims;
        let n = positions.len();
        for start in (0..n).step_by(STRIP) {
            let end = n.min(start + STRIP);
            let values = &keypoints.values[start * dims..end * dims];
            let (w, d) = match &self.words {
                Words::Vocabulary(vocabulary) if params.method.words() > 0 => {
                    self.strip_words(vocabulary, describers, values)
                }
                _ => (Vec::new(), Vec::new()),
            };
            match acc.as_mut() {
                Some(acc) => params.method.accumulate(
                    acc,
                    values,
                    (&w, &d),
                    &positions[start..end],
                    &self.words,
                ),
                None => {
                    words.extend(w);
                    dists.extend(d);
                }
            }
        }
        let found = Found {
            words: params.method.words(),
            ids: &words,
            dists: &dists,
            positions: &positions,
        };
        (params.method.pool(found, shape, acc, &self.words), n)
    }

    /// Encodes the photos `range` of `collection` (what one node does of a sharded encode;
    /// [`encode_from`] writes the results).
    pub fn encode_range(
        &self,
        collection: &Collection,
        range: Range<usize>,
    ) -> Vec<Outcome<Vec<f32>>> {
        if self.params.features.descriptor == Descriptor::Sift {
            let compute =
                |ds: &mut Describers, _: &Photo, size, k: &Keypoints| self.keypoints(ds, size, k);
            let features = &self.params.features;
            return crate::descriptors::sift_range(collection, features, range, &compute);
        }
        let compute = |ds: &mut Describers, p: &Photo, l: &Luminance, d| self.compute(ds, p, l, d);
        compute_range(collection, &self.params.features, range, &compute)
    }

    /// [`Encoder::encode_range`] from descriptors made elsewhere (`foreign`, of the params'
    /// dims): what one node does of a sharded encode of such.
    pub fn encode_foreign_range(
        &self,
        collection: &Collection,
        foreign: &Foreign,
        range: Range<usize>,
    ) -> Vec<Outcome<Vec<f32>>> {
        let compute =
            |ds: &mut Describers, _: &Photo, size, k: &Keypoints| self.keypoints(ds, size, k);
        let origin = Origin::Files(foreign, self.params.dims);
        crate::descriptors::compute_range(collection, origin, range, &compute)
    }
}

/// The descriptor's name in messages: HOG's, SIFT's, or one made elsewhere.
fn descriptor_name(params: &EncodeParams) -> &'static str {
    match (params.foreign, params.features.descriptor) {
        (true, _) => "descriptors made elsewhere",
        (false, Descriptor::Hog) => "HOG descriptor",
        (false, Descriptor::Sift) => "SIFT descriptor",
    }
}

/// Encodes every photo of `collection` against `words` into `out` (CSV or binary, see the module
/// docs). Nothing appears at `out` or its manifests unless the whole run succeeds.
pub fn encode(
    collection: &Collection,
    words: &Words,
    params: &EncodeParams,
    out: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    let encoder = Encoder::new(words.clone(), params.clone(), out)?;
    if params.features.descriptor == Descriptor::Sift {
        let sift = params
            .features
            .sift()
            .map_err(|e| crate::descriptors::boxed(e.into()))?;
        let origin = Origin::Sift(&params.features, &sift);
        return encode_origin(collection, &encoder, origin, out, progress);
    }
    let compute = |ds: &mut Describers, p: &Photo, l: &Luminance, d| encoder.compute(ds, p, l, d);
    // A VLAD or Fisher vector can be megabytes (up to MAX_VLAD_VALUES values): a photo a
    // thread per batch, as for a stage holding a dense grid's descriptors; histograms are small.
    let large = params.method.pooling().is_dense();
    let mut source = here(collection, &params.features, &compute, large);
    encode_from(collection, encoder.len(), out, &mut source, progress)
}

/// [`encode`] from descriptors made elsewhere (`foreign`, of `params.dims` values): the same
/// file and manifests, each photo's vector pooled from its file's descriptors.
pub fn encode_foreign(
    collection: &Collection,
    words: &Words,
    params: &EncodeParams,
    foreign: &Foreign,
    out: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    let encoder = Encoder::new(words.clone(), params.clone(), out)?;
    let origin = Origin::Files(foreign, params.dims);
    encode_origin(collection, &encoder, origin, out, progress)
}

/// [`encode`] of keypoints from `origin`.
fn encode_origin(
    collection: &Collection,
    encoder: &Encoder,
    origin: Origin<'_>,
    out: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    let compute = |ds: &mut Describers, _: &Photo, size: (usize, usize), k: &Keypoints| {
        encoder.keypoints(ds, size, k)
    };
    let mut source = crate::descriptors::Here::new(collection, origin, &compute);
    encode_from(collection, encoder.len(), out, &mut source, progress)
}

/// [`encode`] with the photos' histograms of `len` values from `source` (computed elsewhere, by
/// [`Encoder::encode_range`]): the same file and manifests, byte for byte.
pub fn encode_from(
    collection: &Collection,
    len: usize,
    out: &Path,
    source: &mut dyn Source<Vec<f32>>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<FeatureSummary, FeaturesError> {
    let sink = if out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    {
        let io = |source| StoreError::Io {
            path: out.to_path_buf(),
            source,
        };
        let mut tmp = std::io::BufWriter::new(crate::atomic::temp_beside(out).map_err(io)?);
        let mut header = String::from("picture_id,path");
        for i in 0..len {
            header.push_str(&format!(",h{i}"));
        }
        header.push('\n');
        tmp.write_all(header.as_bytes()).map_err(io)?;
        Sink::Csv {
            path: out.to_path_buf(),
            tmp,
            len,
        }
    } else {
        Sink::Bin(FeatureWriter::create(out, Format::for_path(out), len)?)
    };
    run_stage(collection, out, sink, source, progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureParams;
    use crate::hog::DIMS;

    #[test]
    fn plain_histograms_sum_to_one_and_hellinger_is_the_root() {
        let labels = [0, 2, 2, 1];
        let positions = [(0, 0); 4];
        let h = histogram(&labels, &positions, 3, 100, 100, 1, Norm::L1);
        assert_eq!(h, vec![0.25, 0.25, 0.5]);
        let g = histogram(&labels, &positions, 3, 100, 100, 1, Norm::Hellinger);
        for (a, b) in g.iter().zip(&h) {
            assert!((a - b.sqrt()).abs() < 1e-7);
        }
    }

    fn params_with(scales: Vec<usize>) -> EncodeParams {
        EncodeParams {
            features: FeatureParams {
                sampling: crate::patch::Sampling::Dense { stride: 8 },
                max_side: None,
                max_pixels: crate::image_io::MAX_PIXELS,
                mirror: false,
                patch: None,
                descriptor: crate::features::Descriptor::Hog,
            },
            norm: Norm::L1,
            levels: 2,
            strips: 0,
            method: Method::Hard,
            kernel: Kernel::F32,
            scales,
            approx: None,
            dims: crate::hog::DIMS,
            foreign: false,
        }
    }

    #[test]
    fn a_coarser_scale_describes_the_downscaled_photo_with_centres_in_the_photo() {
        let (width, height) = (200, 120);
        let lum = Luminance {
            width,
            height,
            data: (0..width * height).map(|i| (i * 7 % 251) as f32).collect(),
        };
        let params = params_with(vec![40, 64]);
        let mut describers = crate::features::Describers::default();
        let (small, layout, placed) =
            coarser(&lum, 64, 3, &params, &mut describers).expect("holds patches");
        // 200 x 120 by 40/64 is 125 x 75: a dense grid of 11 x 5 patches at stride 8.
        assert_eq!((small.width, small.height), (125, 75));
        assert_eq!(layout.positions.len(), 11 * 5);
        assert_eq!(placed.len(), 11 * 5);
        let half = PATCH_SIDE / 2;
        for &(r, c) in &placed {
            // Centres inside the photo, at least a coarse patch's half from the edges.
            assert!(r + half >= 32 && r + half <= height - 32, "row {r}");
            assert!(c + half >= 32 && c + half <= width - 32, "col {c}");
        }
        assert_eq!(placed[0], (12, 12)); // centre 20 in the small photo is 32 in the photo
        // A photo that cannot hold a patch once downscaled gives nothing at that scale.
        let small = Luminance {
            width: 60,
            height: 45,
            data: vec![1.0; 60 * 45],
        };
        assert!(coarser(&small, 80, 0, &params, &mut describers).is_none());
    }

    /// A photo of more patches than a strip: its words found strip by strip equal those of all
    /// its descriptors at once, bit for bit, on every kernel and search.
    #[test]
    fn strips_find_the_words_of_the_whole_photo() {
        let (width, height) = (608, 584); // 72 x 69 = 4,968 patches at stride 8
        let lum = Luminance {
            width,
            height,
            data: (0..width * height)
                .map(|i| ((i * 7919 + (i / width) * 31) % 256) as f32)
                .collect(),
        };
        let vocabulary = {
            let data: Vec<f32> = (0..64 * DIMS)
                .map(|i| ((i * 2654435761usize) % 1000) as f32 / 4000.0)
                .collect();
            Centroids::new(data, DIMS)
        };
        let mut describers = crate::features::Describers::default();
        let sampling = crate::patch::Sampling::Dense { stride: 8 };
        let layout = lay_out(&lum, 0, &sampling, &mut describers).expect("layout");
        let n = layout.positions.len();
        assert!(n > STRIP, "{n}");
        let mut all = Vec::new();
        layout.describe(&lum, &mut describers, 0..n, &mut all);
        let soft = Some(Soft {
            words: 3,
            sharpness: 1.0,
        });
        let search = approx::Search {
            lists: 8,
            probes: 2,
        };
        for (kernel, method, approx) in [
            (Kernel::F32, Method::Hard, None),
            (Kernel::Int8, Method::Hard, None),
            (Kernel::F32, Method::of_soft(soft), None),
            (Kernel::Int8, Method::of_soft(soft), None),
            (Kernel::F32, Method::Hard, Some(search)),
        ] {
            let params = EncodeParams {
                kernel,
                method,
                approx,
                ..params_with(vec![40])
            };
            let words = Words::Vocabulary(vocabulary.clone());
            let encoder = Encoder::new(words, params, Path::new("h.bin")).expect("encoder");
            let (mut words, mut dists) = (Vec::new(), Vec::new());
            let scale = (&lum, &layout, layout.positions.as_slice());
            encoder.find_words(&mut describers, scale, (&mut words, &mut dists), None);
            let whole = encoder.strip_words(&vocabulary, &mut describers, &all);
            assert_eq!((words, dists), whole, "{kernel:?} {approx:?}");
        }
    }

    #[test]
    fn soft_weights_fall_with_distance_and_sum_to_one() {
        let soft = Soft {
            words: 3,
            sharpness: 2.0,
        };
        let mut w = [0f32; 3];
        soft.weights(&[1.0, 1.5, f32::INFINITY], &mut w);
        assert!((w.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(w[0] > w[1] && w[2] == 0.0);
        assert!((w[1] / w[0] - (-1.0f32).exp()).abs() < 1e-6);
        // On its word: that word alone.
        soft.weights(&[0.0, 0.2, 0.3], &mut w);
        assert_eq!(w, [1.0, 0.0, 0.0]);
        // Two patches, each spread over two words; cells as for hard assignment.
        let shape = Shape {
            k: 3,
            width: 100,
            height: 100,
            pyramid: Pyramid::plain(1),
            norm: Norm::L1,
        };
        let h = weighted_histogram(
            &[0, 1, 2, u32::MAX],
            Some(&[0.75, 0.25, 1.0, 0.0]),
            2,
            &[(0, 0); 2],
            shape,
        );
        assert_eq!(h, vec![0.375, 0.125, 0.5]);
        // Weight 1 each reproduces the hard histogram exactly.
        let hard = histogram(&[0, 2, 2, 1], &[(0, 0); 4], 3, 100, 100, 1, Norm::L1);
        let ones = weighted_histogram(&[0, 2, 2, 1], Some(&[1.0; 4]), 1, &[(0, 0); 4], shape);
        assert_eq!(hard, ones);
    }

    #[test]
    fn strips_follow_the_pyramid_at_its_finest_levels_weight() {
        // 1x1 + 2x2 + 3x1 on a 100x90 photo: weights 1/2, 1/2 and 1/2; word 0 at the top
        // left (centre y 20, x 20: strip 0), word 1 in the middle (centre 45,80: strip 1 as
        // 45 * 3 / 90 = 1; cell 3 as 45 * 2 / 90 = 1), word 1 lower left (centre 70,20: strip 2,
        // cell 2).
        let shape = Shape {
            k: 2,
            width: 100,
            height: 90,
            pyramid: Pyramid {
                levels: 2,
                strips: 3,
            },
            norm: Norm::L1,
        };
        assert_eq!(shape.pyramid.cells(), 1 + 4 + 3);
        let places = [(0, 0), (25, 60), (50, 0)];
        let h = weighted_histogram(&[0, 1, 1], None, 1, &places, shape);
        assert_eq!(h.len(), 2 * 8);
        // Raw, in sixths (a third of a patch at weight 1/2): level 0 [1, 2]; level 1 cell 0
        // [1, 0], cell 2 [0, 1], cell 3 [0, 1]; the strips [1, 0], [0, 1], [0, 1]; the sum 9
        // sixths, so ninths after L1.
        let want = [
            [1.0, 2.0],
            [1.0, 0.0],
            [0.0, 0.0],
            [0.0, 1.0],
            [0.0, 1.0],
            [1.0, 0.0],
            [0.0, 1.0],
            [0.0, 1.0],
        ];
        for (got, want) in h.iter().zip(want.iter().flatten()) {
            assert!((got - want / 9.0).abs() < 1e-7, "{h:?}");
        }
        // Without strips: the plain pyramid's values, as before.
        let plain = Shape {
            pyramid: Pyramid::plain(2),
            ..shape
        };
        let p = weighted_histogram(&[0, 1, 1], None, 1, &places, plain);
        assert_eq!(p, histogram(&[0, 1, 1], &places, 2, 100, 90, 2, Norm::L1));
        assert_eq!(p.len(), 2 * 5);
    }

    #[test]
    fn pyramid_cells_and_weights_follow_lazebnik() {
        // Two levels on a 100x100 photo: level 0 weight 1/2, level 1 weight 1/2; two patches,
        // word 0 top-left (centre 20,20), word 1 bottom-right (centre 80,80).
        let h = histogram(&[0, 1], &[(0, 0), (60, 60)], 2, 100, 100, 2, Norm::L1);
        assert_eq!(h.len(), encoded_len(2, 2));
        assert_eq!(h.len(), 2 * 5);
        // Raw: level 0 [0.25, 0.25]; level 1 cell 0 [0.25, 0], cell 3 [0, 0.25]; sum 1.
        assert_eq!(
            h,
            vec![0.25, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25]
        );
        // Three levels: weights 1/4, 1/4, 1/2 before normalisation.
        let h3 = histogram(&[0], &[(0, 0)], 1, 100, 100, 3, Norm::L1);
        assert_eq!(h3.len(), 1 + 4 + 16);
        assert!(
            (h3[0] - 0.25).abs() < 1e-7
                && (h3[1] - 0.25).abs() < 1e-7
                && (h3[5] - 0.5).abs() < 1e-7
        );
    }
}
