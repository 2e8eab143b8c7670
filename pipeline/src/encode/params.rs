//! An encoding's parameters, checked: how photos are described (dense sampling), how patches
//! find their words, how they are pooled ([`Method`]) and normalised; and [`Encoding`], what is
//! recorded beside a histogram file (those parameters, checked) so that models encode new photos
//! alike.

use crate::features::{Descriptor, FeatureParams};
use crate::hog::PATCH_SIDE;
use crate::image_io::MAX_PIXELS;
use crate::kmeans::{Kernel, approx};
use crate::patch::Sampling;

use super::bow::{MAX_STRIPS, Norm, Pyramid, Soft};
use super::error::{
    EncodeParamsError, MAX_PARTS, MAX_PYRAMID, MAX_SCALE_SIDE, MAX_SCALES, MAX_VLAD_VALUES,
};
use super::method::{Method, Pooling};

/// How a histogram file was made: the vocabulary and the checked parameters, written beside the
/// file (`<out>.encoding.json`) and in models trained on it, so that new photos are encoded the
/// same way. Read back, a record is checked by [`EncodeParams::check`] before anything uses it.
///
/// A joined encoding ([`Encoding::joined`], `vocab join`) is several encodings of the same
/// photos in one vector a photo, each part's vector times `1 / sqrt(parts)`: its first part's
/// record with the others listed under `joined`. Each part's [`Encoding::vocabulary`],
/// [`Encoding::k`], [`Encoding::params`] and [`Encoding::digest`] are its own: whatever reads a
/// record goes over [`Encoding::parts`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "Record", into = "Record")]
pub struct Encoding {
    vocabulary: String,
    k: usize,
    params: EncodeParams,
    digest: Option<String>,
    /// The parts joined after this one (none: an encoding of its own).
    joined: Vec<Encoding>,
}

impl Encoding {
    /// The record of histograms encoded with `params` over `vocabulary`'s `k` words, its
    /// parameters checked.
    pub fn new(
        vocabulary: String,
        k: usize,
        params: EncodeParams,
    ) -> Result<Self, EncodeParamsError> {
        params.check(Some(k))?;
        Ok(Self {
            vocabulary,
            k,
            params,
            digest: None,
            joined: Vec::new(),
        })
    }

    /// `parts` joined in one vector a photo, in their order: 2 to [`MAX_PARTS`] encodings of
    /// their own (a joined one's vectors are weighed already: its parts are joined instead),
    /// of the photos all as they are or all mirrored, at most one of descriptors made
    /// elsewhere (`vocab classify` is given one folder).
    pub fn joined(parts: Vec<Encoding>) -> Result<Self, EncodeParamsError> {
        if parts.iter().any(Encoding::is_joined) {
            return Err(EncodeParamsError::PartsNested);
        }
        let mut flat = parts;
        if !(2..=MAX_PARTS).contains(&flat.len()) {
            return Err(EncodeParamsError::Parts(flat.len()));
        }
        if flat
            .iter()
            .any(|p| p.params.features.mirror != flat[0].params.features.mirror)
        {
            return Err(EncodeParamsError::PartsMirrored);
        }
        if flat.iter().filter(|p| p.params.foreign).count() > 1 {
            return Err(EncodeParamsError::PartsForeign);
        }
        let mut first = flat.remove(0);
        first.joined = flat;
        Ok(first)
    }

    /// Its parts in the vector's order: itself alone, or the joined encoding's (the first is
    /// this record, whose own fields are the first part's).
    pub fn parts(&self) -> impl Iterator<Item = &Encoding> {
        std::iter::once(self).chain(&self.joined)
    }

    /// This part alone: its own record without the parts joined after it.
    pub fn alone(&self) -> Self {
        Self {
            joined: Vec::new(),
            ..self.clone()
        }
    }

    /// Whether it joins several encodings.
    pub fn is_joined(&self) -> bool {
        !self.joined.is_empty()
    }

    /// Values a photo's vector holds: every part's (saturating: a record read back may name
    /// any number of words; [`Encoding::checked_len`] says when it would not fit).
    pub fn len(&self) -> usize {
        self.checked_len().unwrap_or(usize::MAX)
    }

    /// [`Encoding::len`], or `None` when it passes what a `usize` counts.
    pub fn checked_len(&self) -> Option<usize> {
        self.parts().try_fold(0usize, |sum, p| {
            let cell = p.params.method.cell_len(p.k, p.params.dims);
            cell.checked_mul(p.params.pyramid().cells())
                .and_then(|len| sum.checked_add(len))
        })
    }

    /// Whether a vector holds no value (never: a part holds at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What each part's vector is multiplied by in a joined encoding, `1 / sqrt(parts)` (1 for
    /// an encoding of its own): parts of unit length make a vector of unit length.
    pub fn part_weight(&self) -> f32 {
        (1.0 / (1 + self.joined.len()) as f64).sqrt() as f32
    }

    /// The record with the SHA-256 of the vocabulary's (or mixture's) bytes
    /// ([`crate::input::digest`]): what a model and its histograms are bound to.
    pub fn with_digest(mut self, digest: String) -> Self {
        self.digest = Some(digest);
        self
    }

    /// The SHA-256 of the vocabulary's bytes when the histograms were made (absent in records
    /// from before it was kept).
    pub fn digest(&self) -> Option<&str> {
        self.digest.as_deref()
    }

    /// The vocabulary file (as given to `vocab encode`, made absolute).
    pub fn vocabulary(&self) -> &str {
        &self.vocabulary
    }

    /// Words in the vocabulary.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The checked parameters the histograms were made with.
    pub fn params(&self) -> &EncodeParams {
        &self.params
    }

    /// The same encoding of the photos mirrored (or, of mirrored photos, as they are), every
    /// part.
    pub fn mirror_image(&self) -> Self {
        let mut mirrored = self.clone();
        mirrored.params.features.mirror = !self.params.features.mirror;
        mirrored.joined = self.joined.iter().map(Self::mirror_image).collect();
        mirrored
    }
}

/// [`Encoding`] as its file spells it (the fields of the first records, later ones optional).
#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    vocabulary: String,
    k: usize,
    stride: usize,
    /// `l1` or `hellinger`.
    norm: String,
    pyramid: usize,
    /// Absent: no strips.
    #[serde(default, skip_serializing_if = "is_zero")]
    strips: usize,
    max_side: Option<usize>,
    /// Absent: the default, [`MAX_PIXELS`].
    #[serde(
        default = "default_max_pixels",
        skip_serializing_if = "is_default_max_pixels"
    )]
    max_pixels: u64,
    /// Absent: each patch to its nearest word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    soft: Option<Soft>,
    /// Absent: bag of words.
    #[serde(default, skip_serializing_if = "Pooling::is_bow")]
    method: Pooling,
    /// Absent in older records: f32.
    #[serde(default, skip_serializing_if = "Kernel::is_f32")]
    kernel: Kernel,
    /// Absent in older records: the base 40 alone.
    #[serde(default = "base_scale", skip_serializing_if = "is_base_scale")]
    scales: Vec<usize>,
    /// Absent: exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approx: Option<approx::Search>,
    /// With `approx`, how its lists are made ([`approx::LISTS_VERSION`]; absent: 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lists_version: Option<u32>,
    /// The mixture's projected dims (Fisher vectors; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    projected: Option<usize>,
    /// The photos were described mirrored left to right (absent: as they are).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    mirror: bool,
    /// The side a patch covered in pixels of the photo (absent: 40, the photo as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    patch: Option<usize>,
    /// The SHA-256 of the vocabulary's bytes (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vocabulary_sha256: Option<String>,
    /// Values per descriptor; absent: HOG's (else descriptors made elsewhere, whose files a
    /// photo needs to be encoded alike).
    #[serde(default = "hog_dims", skip_serializing_if = "is_hog_dims")]
    dims: usize,
    /// Descriptors made elsewhere (absent: HOG).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    foreign: bool,
    /// vocab's own descriptor (absent: HOG).
    #[serde(default, skip_serializing_if = "Descriptor::is_hog")]
    descriptor: Descriptor,
    /// The parts joined after this one ([`Encoding::joined`]; absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    joined: Vec<Encoding>,
}

impl TryFrom<Record> for Encoding {
    type Error = EncodeParamsError;

    fn try_from(r: Record) -> Result<Self, Self::Error> {
        let norm = Norm::named(&r.norm).ok_or(EncodeParamsError::Norm(r.norm))?;
        // Other lists would give new photos other words than the training photos got.
        let lists = r.lists_version.unwrap_or(1);
        if r.approx.is_some() && lists != approx::LISTS_VERSION {
            return Err(EncodeParamsError::ListsVersion(lists));
        }
        let params = EncodeParams {
            features: FeatureParams {
                sampling: Sampling::Dense { stride: r.stride },
                max_side: r.max_side,
                max_pixels: r.max_pixels,
                mirror: r.mirror,
                patch: r.patch,
                descriptor: r.descriptor,
            },
            norm,
            levels: r.pyramid,
            strips: r.strips,
            method: Method::new(r.method, r.soft, r.projected)?,
            kernel: r.kernel,
            scales: r.scales,
            approx: r.approx,
            dims: r.dims,
            foreign: r.foreign,
        };
        if let Some(digest) = &r.vocabulary_sha256
            && (digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(EncodeParamsError::Digest(crate::input::prefix(digest, 70)));
        }
        let encoding = Self::new(r.vocabulary, r.k, params)?;
        let encoding = match r.vocabulary_sha256 {
            Some(digest) => encoding.with_digest(digest),
            None => encoding,
        };
        if r.joined.is_empty() {
            return Ok(encoding);
        }
        // A part read back is checked as a record; its own parts may not nest further.
        if r.joined.iter().any(Encoding::is_joined) {
            return Err(EncodeParamsError::PartsNested);
        }
        Self::joined([vec![encoding], r.joined].concat())
    }
}

impl From<Encoding> for Record {
    fn from(e: Encoding) -> Self {
        let p = e.params;
        Self {
            vocabulary: e.vocabulary,
            k: e.k,
            // Checked when the record was made: the sampling is dense.
            stride: match p.features.sampling {
                Sampling::Dense { stride } => stride,
                Sampling::Random { .. } => 0,
            },
            norm: p.norm.name().to_string(),
            pyramid: p.levels,
            strips: p.strips,
            max_side: p.features.max_side,
            max_pixels: p.features.max_pixels,
            soft: p.method.soft(),
            method: p.method.pooling(),
            kernel: p.kernel,
            projected: p.method.projected(),
            scales: p.scales,
            approx: p.approx,
            lists_version: p.approx.map(|_| approx::LISTS_VERSION),
            mirror: p.features.mirror,
            patch: p.features.patch,
            vocabulary_sha256: e.digest,
            dims: p.dims,
            foreign: p.foreign,
            descriptor: p.features.descriptor,
            joined: e.joined,
        }
    }
}

/// The base scale alone: 40-px patches of the photo as it is.
pub fn base_scale() -> Vec<usize> {
    vec![PATCH_SIDE]
}

/// Whether `scales` is the base scale alone.
pub fn is_base_scale(scales: &Vec<usize>) -> bool {
    scales.as_slice() == [PATCH_SIDE]
}

/// Settings of the encoding stage.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EncodeParams {
    /// Dense sampling and decoding (the sampling must be dense).
    pub features: FeatureParams,
    /// Normalisation.
    pub norm: Norm,
    /// Pyramid levels (1 = plain bag of words).
    pub levels: usize,
    /// Horizontal strips pooled after the pyramid's levels ([`Pyramid`]; 0: none). Absent from
    /// records when 0, so their files and keys stay what they were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub strips: usize,
    /// How patches and their words become the vector (hard or soft bag of words, or VLAD).
    pub method: Method,
    /// How patches find their words: the f32 GEMM ([`crate::kmeans::assign()`], [`crate::kmeans::nearest_few`]) or integer
    /// products with exact re-ranking ([`crate::kmeans::quant::assign_quantized`],
    /// [`crate::kmeans::quant::nearest_few_quantized`]: the arg-min of direct distances).
    pub kernel: Kernel,
    /// Patch sides, the base [`PATCH_SIDE`] first, then larger ones ascending (see the module
    /// docs).
    pub scales: Vec<usize>,
    /// Each patch to the word the approximate search finds ([`approx`], for very large
    /// vocabularies; hard assignment with the f32 kernel only: ignored with `soft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approx: Option<approx::Search>,
    /// Values per descriptor: the HOG descriptor's [`crate::hog::DIMS`], or those of descriptors made
    /// elsewhere ([`crate::descriptors`]; then sampling and scales do not apply). Absent from
    /// records when HOG's, so their files and keys stay what they were.
    #[serde(default = "hog_dims", skip_serializing_if = "is_hog_dims")]
    pub dims: usize,
    /// The descriptors were made elsewhere ([`crate::descriptors`]), whatever their dimension
    /// (a CNN's may have HOG's 512): a photo is encoded alike only from its own file. Absent
    /// from records when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub foreign: bool,
}

fn hog_dims() -> usize {
    crate::hog::DIMS
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_hog_dims(dims: &usize) -> bool {
    *dims == crate::hog::DIMS
}

fn default_max_pixels() -> u64 {
    MAX_PIXELS
}

fn is_default_max_pixels(pixels: &u64) -> bool {
    *pixels == MAX_PIXELS
}

impl EncodeParams {
    /// Checks the rules of the parameters, the vocabulary's size `k` where it is known: dense
    /// sampling by [`FeatureParams::check`], 1 to [`MAX_PYRAMID`] pyramid levels, no strips or
    /// 2 to [`MAX_STRIPS`], soft
    /// assignment over 2 to [`super::error::MAX_SOFT`] words (no more than the vocabulary's) with a positive
    /// sharpness, the base scale then up to [`MAX_SCALES`] larger sides ascending, at most
    /// [`MAX_SCALE_SIDE`], and an approximate search for the nearest word alone on the f32
    /// kernel with at least one probe.
    pub fn check(&self, k: Option<usize>) -> Result<(), EncodeParamsError> {
        self.features.check().map_err(EncodeParamsError::Features)?;
        let descriptor = self.features.descriptor;
        if !(1..=crate::descriptors::MAX_DIMS).contains(&self.dims)
            || (!self.foreign && self.dims != descriptor.dims())
        {
            return Err(EncodeParamsError::Dims(self.dims));
        }
        // Made elsewhere: nothing of vocab's own description applies.
        if self.foreign
            && (self.features.mirror
                || descriptor != Descriptor::Hog
                || self.features.max_side.is_some()
                || self.features.patch.is_some()
                || !is_base_scale(&self.scales))
        {
            return Err(EncodeParamsError::Foreign);
        }
        if let Sampling::Random { .. } = self.features.sampling {
            return Err(EncodeParamsError::NotDense);
        }
        // SIFT's own windows are its scales.
        if descriptor == Descriptor::Sift && !is_base_scale(&self.scales) {
            return Err(EncodeParamsError::SiftScales(self.scales.clone()));
        }
        if !(1..=MAX_PYRAMID).contains(&self.levels) {
            return Err(EncodeParamsError::Pyramid(self.levels));
        }
        if self.strips == 1 || self.strips > MAX_STRIPS {
            return Err(EncodeParamsError::Strips(self.strips));
        }
        self.method.check(k)?;
        let pooling = self.method.pooling();
        if pooling.is_dense() && self.norm != Norm::L1 {
            return Err(EncodeParamsError::VladNorm(self.norm));
        }
        if pooling == Pooling::Fisher && (self.kernel != Kernel::F32 || self.approx.is_some()) {
            return Err(EncodeParamsError::FisherSearch);
        }
        if let Some(k) = k.filter(|_| pooling.is_dense()) {
            // Checked: `k` may come from a file.
            let values =
                (self.method.cell_len(k, self.dims)).saturating_mul(self.pyramid().cells());
            if values > MAX_VLAD_VALUES {
                return Err(EncodeParamsError::VladTooLong {
                    fisher: pooling == Pooling::Fisher,
                    k,
                    levels: self.levels,
                    values,
                });
            }
        }
        let ascending = self.scales.windows(2).all(|w| w[0] < w[1]);
        if self.scales.first() != Some(&PATCH_SIDE)
            || !ascending
            || self.scales.len() > MAX_SCALES
            || self.scales.iter().any(|&s| s > MAX_SCALE_SIDE)
        {
            return Err(EncodeParamsError::Scales(self.scales.clone()));
        }
        if let Some(search) = self.approx {
            if self.method.words() != 1 {
                return Err(EncodeParamsError::ApproxSoft);
            }
            if self.kernel != Kernel::F32 {
                return Err(EncodeParamsError::ApproxKernel);
            }
            if search.probes == 0 {
                return Err(EncodeParamsError::Probes);
            }
        }
        Ok(())
    }
}

impl EncodeParams {
    /// Values of an encoding of a vocabulary of `k` words with these parameters: the method's
    /// values per cell, over the pyramid's cells.
    pub fn len(&self, k: usize) -> usize {
        self.pyramid().len(self.method.cell_len(k, self.dims))
    }

    /// Where patches are pooled: the pyramid's levels, then the strips.
    pub fn pyramid(&self) -> Pyramid {
        Pyramid {
            levels: self.levels.max(1),
            strips: self.strips,
        }
    }

    /// The most memory encoding holds for one photo of at most the pixel limit: its working
    /// memory ([`crate::image_io::BYTES_PER_PIXEL`]), each coarser scale's downscaled photo and
    /// grid (7 bytes a pixel of it), a strip of descriptors, and the patches' places and words
    /// found (16 bytes a patch, 8 a patch and word). A histogram itself is small; VLAD's vector
    /// is not ([`EncodeParams::photo_memory_at`]).
    pub fn photo_memory(&self) -> u64 {
        if self.features.descriptor == Descriptor::Sift {
            // Every keypoint described at once, its words found a strip at a time.
            let found = (self.features.sift_memory() / (crate::sift::SIFT_DIMS * 4) as u64)
                .saturating_mul(16 + 8 * self.method.words() as u64);
            return self.features.sift_memory().saturating_add(found);
        }
        // (The pixel limit bounds a photo as described, enlarged or not.)
        let pixels = self.features.max_pixels;
        let stride = match self.features.sampling {
            Sampling::Dense { stride } => stride.max(1) as u64,
            Sampling::Random { .. } => 1,
        };
        let coarse: u64 = (self.scales.iter().skip(1))
            .map(|&side| {
                let shrink = (side as u64 * side as u64) / (PATCH_SIDE * PATCH_SIDE) as u64;
                pixels.saturating_mul(7) / shrink.max(1)
            })
            .sum();
        let strip = (crate::features::STRIP * crate::hog::DIMS * 4) as u64;
        let found = (pixels / (stride * stride) + 1)
            .saturating_mul(16 + 8 * self.method.words() as u64)
            .saturating_mul(self.scales.len().max(1) as u64);
        pixels
            .saturating_mul(crate::image_io::BYTES_PER_PIXEL)
            .saturating_add(coarse)
            .saturating_add(strip)
            .saturating_add(found)
    }

    /// [`EncodeParams::photo_memory`] with a vocabulary of `k` words (a mixture of `k`
    /// components): VLAD's and the Fisher vector's sums and vector (8 + 4 bytes a value, both
    /// held while it is finished; the Fisher vector's sums per finest cell besides) come on top.
    pub fn photo_memory_at(&self, k: usize) -> u64 {
        let vector = (self.method.cell_len(k, self.dims) as u64)
            .saturating_mul(self.pyramid().cells() as u64)
            .saturating_mul(12);
        let sums = match self.method {
            Method::Hard | Method::Soft(_) => 0,
            Method::Vlad(_) => vector,
            Method::Fisher { dims } => vector.saturating_add(super::fisher::FisherSums::bytes(
                super::fisher::FisherShape {
                    k,
                    d: dims,
                    width: 0,
                    height: 0,
                    pyramid: self.pyramid(),
                },
            )),
        };
        self.photo_memory().saturating_add(sums)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters of `vocab encode` with no flag.
    fn plain() -> EncodeParams {
        EncodeParams {
            features: FeatureParams {
                sampling: Sampling::Dense { stride: 8 },
                max_side: None,
                max_pixels: MAX_PIXELS,
                mirror: false,
                patch: None,
                descriptor: crate::features::Descriptor::Hog,
            },
            norm: Norm::L1,
            levels: 1,
            strips: 0,
            method: Method::Hard,
            kernel: Kernel::F32,
            scales: base_scale(),
            approx: None,
            dims: crate::hog::DIMS,
            foreign: false,
        }
    }

    /// `change` applied to the plain parameters breaks the rule `want` names (`key = value:
    /// rule`), or none.
    fn check(change: impl FnOnce(&mut EncodeParams), k: Option<usize>, want: Option<&str>) {
        let mut p = plain();
        change(&mut p);
        let got = p.check(k).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), want, "{p:?}");
    }

    #[test]
    fn every_rule_is_its_own_error_naming_key_value_and_rule() {
        check(|_| {}, Some(4), None);
        let soft = |words| {
            Some(Soft {
                words,
                sharpness: 10.0,
            })
        };
        check(
            |p| p.levels = 0,
            None,
            Some("pyramid = 0: must be 1 to 5 levels"),
        );
        let strips = "must be 0 (none) or 2 to 8 horizontal strips (one is the whole photo, \
                      which the pyramid's first level pools already)";
        check(
            |p| p.strips = 1,
            None,
            Some(&format!("strips = 1: {strips}")),
        );
        check(
            |p| p.strips = 9,
            None,
            Some(&format!("strips = 9: {strips}")),
        );
        check(|p| p.strips = 3, None, None);
        check(
            |p| p.levels = 6,
            None,
            Some("pyramid = 6: must be 1 to 5 levels"),
        );
        check(|p| p.levels = 5, None, None);
        for words in [0, 1, 65] {
            let want =
                format!("soft = {words}: must be 0 (the nearest word alone) or 2 to 64 words");
            check(
                |p| p.method = Method::of_soft(soft(words)),
                None,
                Some(&want),
            );
        }
        check(
            |p| p.method = Method::of_soft(soft(8)),
            Some(4),
            Some("soft = 8: more words than the vocabulary's 4"),
        );
        check(|p| p.method = Method::of_soft(soft(4)), Some(4), None);
        check(
            |p| {
                p.method = Method::Soft(Soft {
                    words: 2,
                    sharpness: f32::NAN,
                })
            },
            None,
            Some("sharpness = NaN: must be a positive number"),
        );
        for sides in [
            vec![],
            vec![64, 40],
            vec![40, 40],
            vec![40, 400],
            vec![40, 48, 56, 64, 72],
        ] {
            let shown: Vec<String> = sides.iter().map(usize::to_string).collect();
            let want = format!(
                "scales = {}: must be 40 followed by up to 3 larger patch sides, ascending, at \
                 most 320 (e.g. 40,64)",
                shown.join(",")
            );
            check(|p| p.scales = sides.clone(), None, Some(&want));
        }
        check(|p| p.scales = vec![40, 64, 128, 320], None, None);
        let search = approx::Search {
            lists: 0,
            probes: 8,
        };
        check(|p| p.approx = Some(search), None, None);
        check(
            |p| (p.approx, p.method) = (Some(search), Method::of_soft(soft(2))),
            None,
            Some("assign = approx: finds each patch's nearest word only: drop soft"),
        );
        check(
            |p| (p.approx, p.kernel) = (Some(search), Kernel::Int8),
            None,
            Some(
                "kernel = int8: is a kernel of the exact search in an encoding; its approximate \
                 search uses f32",
            ),
        );
        check(
            |p| {
                p.approx = Some(approx::Search {
                    lists: 0,
                    probes: 0,
                })
            },
            None,
            Some("probes = 0: must be at least 1 list"),
        );
        check(
            |p| p.features.sampling = Sampling::Dense { stride: 0 },
            None,
            Some("stride = 0: must be at least 1 pixel"),
        );
        check(
            |p| {
                p.features.sampling = Sampling::Random {
                    per_image: 5,
                    seed: 1,
                }
            },
            None,
            Some("sampling = random: an encoding describes every patch on a grid (dense)"),
        );
        check(
            |p| p.features.max_side = Some(39),
            None,
            Some("max_side = 39: smaller than a 40x40 patch"),
        );
        check(
            |p| p.features.max_pixels = 0,
            None,
            Some("max_pixels = 0: 1 or more megapixels"),
        );
    }

    #[test]
    fn an_encoding_read_back_gives_its_parameters_checked_or_the_broken_rule() {
        let read = |text: &str| serde_json::from_str::<Encoding>(text).map_err(|e| e.to_string());
        let plain_text = r#"{"vocabulary": "v.bin", "k": 16, "stride": 8, "norm": "l1",
            "pyramid": 1, "max_side": null}"#;
        assert_eq!(read(plain_text).map(|e| e.params), Ok(plain()));
        let hostile = [
            (
                r#""soft": {"words": 0, "sharpness": 10.0}"#,
                "soft = 0: must be 0",
            ),
            (
                r#""soft": {"words": 40, "sharpness": 10.0}"#,
                "vocabulary's 16",
            ),
            (r#""max_pixels": 0"#, "max_pixels = 0"),
            (r#""strips": 1"#, "strips = 1"),
            (r#""scales": [40, 1000000]"#, "scales = 40,1000000"),
        ];
        for (field, want) in hostile {
            let text = plain_text.replacen('{', &format!("{{{field}, "), 1);
            let err = read(&text).expect_err(field);
            assert!(err.contains(want), "{field}: {err}");
        }
        // Strips travel in the record, which names them only when there are some.
        let striped = read(&plain_text.replacen('{', "{\"strips\": 3, ", 1)).expect("strips");
        assert_eq!(striped.params.strips, 3);
        let written = serde_json::to_string(&striped).expect("json");
        assert!(written.contains("\"strips\":3"), "{written}");
        let plain_written = serde_json::to_string(&read(plain_text).expect("plain")).expect("json");
        assert!(!plain_written.contains("strips"), "{plain_written}");
        let huge = plain_text.replace("\"k\": 16", "\"k\": 18014398509481984");
        let err = read(&huge.replacen('{', "{\"method\": \"vlad\", ", 1)).expect_err("huge k");
        assert!(err.contains("past the 4194304 allowed"), "{err}");
        // VLAD: its own normalisation; a length past the limit.
        let vlad = |text: String| text.replacen('{', "{\"method\": \"vlad\", ", 1);
        for (text, want) in [
            (
                vlad(plain_text.replace("\"l1\"", "\"hellinger\"")),
                "norm = hellinger: does not apply to VLAD",
            ),
            (
                vlad(
                    plain_text
                        .replace("\"k\": 16", "\"k\": 2048")
                        .replace("\"pyramid\": 1", "\"pyramid\": 2"),
                ),
                "method = vlad: over 2048 words and 2 pyramid levels (and any strips) gives 5242880 values",
            ),
            (
                plain_text.replace("\"l1\"", "\"l2\""),
                "norm = l2: must be l1 or hellinger",
            ),
            (
                plain_text.replace("\"pyramid\": 1", "\"pyramid\": 40"),
                "pyramid = 40",
            ),
            (
                plain_text.replace("\"stride\": 8", "\"stride\": 0"),
                "stride = 0",
            ),
        ] {
            let err = read(&text).expect_err(&text);
            assert!(err.starts_with(want), "{text}: {err}");
        }
        // Written and read back, a record is the same; the default pixel limit stays out of
        // the file, another is kept.
        let e = read(plain_text).expect("plain");
        let text = serde_json::to_string(&e).expect("json");
        assert!(!text.contains("max_pixels"));
        assert_eq!(read(&text), Ok(e.clone()));
        let mut params = e.params().clone();
        params.features.max_pixels = 5_000_000;
        params.method = Method::Soft(Soft {
            words: 4,
            sharpness: 10.0,
        });
        let e = Encoding::new("v.bin".into(), 16, params).expect("checked");
        let text = serde_json::to_string(&e).expect("json");
        assert_eq!(read(&text), Ok(e));
        // A record is made of checked parameters only.
        let mut broken = plain();
        broken.levels = 9;
        assert_eq!(
            Encoding::new("v.bin".into(), 16, broken),
            Err(EncodeParamsError::Pyramid(9))
        );
    }

    #[test]
    fn a_sift_encoding_is_recorded_as_such_and_takes_none_of_hogs_settings() {
        let sift = |p: &mut EncodeParams| {
            p.features.descriptor = Descriptor::Sift;
            p.dims = crate::sift::SIFT_DIMS;
        };
        check(sift, Some(4), None);
        check(
            |p| {
                sift(p);
                p.dims = crate::hog::DIMS;
            },
            None,
            Some(
                "dims = 512: must be 1 to 4096 values a descriptor made elsewhere, HOG's 512, SIFT's 128",
            ),
        );
        check(
            |p| p.features.descriptor = Descriptor::Sift,
            None,
            Some(
                "dims = 512: must be 1 to 4096 values a descriptor made elsewhere, HOG's 512, SIFT's 128",
            ),
        );
        let scales = "scales = 40,64: are HOG's patch sides: dense SIFT describes windows of \
                      [24.0, 42.0, 60.0] px at every keypoint (drop scales)";
        check(
            |p| {
                sift(p);
                p.scales = vec![40, 64];
            },
            None,
            Some(scales),
        );
        check(
            |p| {
                sift(p);
                p.features.patch = Some(24);
            },
            None,
            Some(
                "patch = 24: is HOG's: dense SIFT describes the photo as it is, at windows of \
                 [24.0, 42.0, 60.0] px of it (drop patch, or describe with hog)",
            ),
        );
        let foreign = "from = a folder: descriptors made elsewhere are taken as they are: no \
                       mirror images, max_side, patch, scales or descriptor of vocab's own";
        check(
            |p| {
                sift(p);
                p.foreign = true;
            },
            None,
            Some(foreign),
        );
        // Mirror images and a downscale are SIFT's as they are HOG's.
        check(
            |p| {
                sift(p);
                p.features.mirror = true;
                p.features.max_side = Some(400);
            },
            None,
            None,
        );
        // The record names the descriptor, HOG's leaves it out.
        let mut params = plain();
        sift(&mut params);
        let e = Encoding::new("g.json".into(), 4, params).expect("checked");
        let text = serde_json::to_string(&e).expect("json");
        assert!(text.contains("\"descriptor\":\"sift\"") && text.contains("\"dims\":128"));
        let read = serde_json::from_str::<Encoding>(&text).expect("read back");
        assert_eq!(read, e);
        let hog = Encoding::new("g.json".into(), 4, plain()).expect("checked");
        let text = serde_json::to_string(&hog).expect("json");
        assert!(!text.contains("descriptor"), "{text}");
    }

    #[test]
    fn a_joined_record_lists_its_parts_each_checked_and_reads_back_the_same() {
        let hog = Encoding::new("h.json".into(), 4, plain()).expect("hog");
        let mut sift = plain();
        sift.features.descriptor = Descriptor::Sift;
        sift.dims = crate::sift::SIFT_DIMS;
        let sift = Encoding::new("s.json".into(), 8, sift).expect("sift");
        let joined = Encoding::joined(vec![hog.clone(), sift.clone()]).expect("joined");
        assert_eq!(joined.parts().count(), 2);
        assert_eq!(joined.len(), 4 + 8);
        assert!((joined.part_weight() - 0.5f32.sqrt()).abs() < 1e-7);
        assert_eq!(hog.part_weight(), 1.0);
        assert_eq!(joined.alone(), hog);
        // A joined encoding is not a part: its vectors are weighed already.
        assert_eq!(
            Encoding::joined(vec![joined.clone(), hog.clone()]),
            Err(EncodeParamsError::PartsNested)
        );
        let vocabularies: Vec<&str> = joined.parts().map(Encoding::vocabulary).collect();
        assert_eq!(vocabularies, ["h.json", "s.json"]);
        let text = serde_json::to_string(&joined).expect("json");
        let read: Encoding = serde_json::from_str(&text).expect("read back");
        assert_eq!(read, joined);
        assert_eq!(
            read.mirror_image()
                .parts()
                .filter(|p| p.params().features.mirror)
                .count(),
            2
        );
        // The rules: 2 to 8 parts, all mirrored or none, one part made elsewhere at most, and
        // a part read back that is joined itself.
        assert_eq!(
            Encoding::joined(vec![hog.clone()]),
            Err(EncodeParamsError::Parts(1))
        );
        assert_eq!(
            Encoding::joined(vec![hog.clone(); 9]),
            Err(EncodeParamsError::Parts(9))
        );
        assert_eq!(
            Encoding::joined(vec![hog.clone(), sift.mirror_image()]),
            Err(EncodeParamsError::PartsMirrored)
        );
        let mut made = plain();
        made.foreign = true;
        made.dims = 12;
        let made = Encoding::new("f.bin".into(), 4, made).expect("made elsewhere");
        assert_eq!(
            Encoding::joined(vec![made.clone(), made]),
            Err(EncodeParamsError::PartsForeign)
        );
        let nested = text.replacen("\"joined\":[", &format!("\"joined\":[{text},"), 1);
        let err = serde_json::from_str::<Encoding>(&nested).expect_err("nested");
        assert!(
            err.to_string()
                .contains("joined = a part joined: must be encodings of their own"),
            "{err}"
        );
        // A part read back is checked by the rules of its own.
        let broken = text.replace("\"k\":8", "\"k\":8,\"strips\":1");
        let err = serde_json::from_str::<Encoding>(&broken).expect_err("strips");
        assert!(err.to_string().contains("strips = 1"), "{err}");
    }

    #[test]
    fn an_approximate_encoding_names_its_lists_version_and_other_versions_are_refused() {
        let read = |text: &str| serde_json::from_str::<Encoding>(text).map_err(|e| e.to_string());
        let mut params = plain();
        params.approx = Some(approx::Search {
            lists: 0,
            probes: 10,
        });
        let e = Encoding::new("v.bin".into(), 16, params).expect("checked");
        let text = serde_json::to_string(&e).expect("json");
        let version = format!("\"lists_version\":{}", approx::LISTS_VERSION);
        assert!(text.contains(&version), "{text}");
        assert_eq!(read(&text), Ok(e));
        // Written before lists had a version (1), or by another build: refused, by name.
        for other in [String::new(), "\"lists_version\":1,".to_string()] {
            let old =
                text.replace(&format!(",{version}"), "")
                    .replacen('{', &format!("{{{other}"), 1);
            assert!(!old.contains(&version), "{old}");
            let err = read(&old).expect_err(&old);
            assert!(
                err.starts_with("lists_version = 1: is another build's approximate word search"),
                "{err}"
            );
        }
        // Exact encodings name no version.
        let plain_text = serde_json::to_string(
            &read(
                r#"{"vocabulary": "v.bin", "k": 16, "stride": 8, "norm": "l1", "pyramid": 1,
                "max_side": null}"#,
            )
            .expect("plain"),
        )
        .expect("json");
        assert!(!plain_text.contains("lists_version"), "{plain_text}");
    }

    /// A Fisher vector too long is refused as a Fisher vector (it was named VLAD).
    #[test]
    fn a_fisher_vector_too_long_is_named_a_fisher_vector() {
        use crate::params::Broken as _;
        let mut fisher = plain();
        fisher.method = Method::Fisher { dims: 512 };
        fisher.levels = 3;
        let err = fisher.check(Some(4096)).expect_err("too long");
        assert_eq!(err.value(), "fisher");
        assert!(
            err.rule().contains("Gaussians") && err.rule().contains("Fisher vector"),
            "{}",
            err.rule()
        );
        let mut vlad = plain();
        vlad.method = Method::Vlad(None);
        vlad.levels = 3;
        let err = vlad.check(Some(4096)).expect_err("too long");
        assert_eq!(err.value(), "vlad");
        assert!(err.rule().contains("words"), "{}", err.rule());
    }
}
