//! The encoding-method seam: how a photo's patches, once each has found its nearest words, become
//! the photo's vector. Everything that depends on the method (the words a patch needs, the
//! values per pyramid cell, the method's own rules, the pooling) is asked of [`Method`], so a new
//! method (VLAD, Fisher vectors) is a new file and one arm here; the encoder, the sharded photo
//! job, the settings and the memory plan follow from it.

use super::bow::{Shape, Soft, weighted_histogram};
use super::error::{EncodeParamsError, MAX_SOFT};
use super::fisher::{FisherShape, FisherSums};
use super::vlad::{VladShape, VladSums};
use super::words::Words;

/// How patches and their words are pooled into a photo's vector.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Method {
    /// Bag of words: each patch counts toward its nearest word.
    Hard,
    /// Bag of words with soft assignment: each patch counts toward its few nearest words.
    Soft(Soft),
    /// VLAD ([`super::vlad`]): each patch's residuals to its nearest word, or to its few nearest
    /// weighted as soft assignment weighs them.
    Vlad(Option<Soft>),
    /// Improved Fisher vectors ([`super::fisher`]) over a mixture of Gaussians in `dims`
    /// principal components: no word is searched, each patch weighs every component by its
    /// posterior.
    Fisher {
        /// The mixture's projected dims.
        dims: usize,
    },
}

/// The pooling of a [`Method`], as the command line, configs and encoding records name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Pooling {
    /// Bag of words: word counts per pyramid cell.
    #[default]
    Bow,
    /// VLAD: residual sums per word and pyramid cell, `k x 512` values a cell.
    Vlad,
    /// Improved Fisher vectors over a mixture (`vocab mixture`): `2 k d` values a cell.
    Fisher,
}

impl Pooling {
    /// The name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Bow => "bow",
            Self::Vlad => "vlad",
            Self::Fisher => "fisher",
        }
    }

    /// Whether the vectors are dense residuals or gradients (VLAD, Fisher vectors): large, and
    /// normalised their own way.
    pub fn is_dense(&self) -> bool {
        !self.is_bow()
    }

    /// Whether this is bag of words (records leave it out).
    pub fn is_bow(&self) -> bool {
        *self == Self::Bow
    }
}

/// Where the patches of a photo go as they are described, for methods that need their
/// descriptors (VLAD, Fisher vectors): the sums so far.
#[derive(Debug)]
pub enum Accumulator {
    /// VLAD's residual sums.
    Vlad(VladSums),
    /// The Fisher vector's sums per finest cell.
    Fisher(FisherSums),
}

/// One photo's patches after the word search: `words` nearest words per patch (nearest first,
/// `u32::MAX` past the vocabulary), their squared distances, and where each patch lies.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// Nearest words per patch.
    pub words: usize,
    /// `words` word indices per patch.
    pub ids: &'a [u32],
    /// Their squared distances.
    pub dists: &'a [f32],
    /// The patches' top-left corners in the photo.
    pub positions: &'a [(usize, usize)],
}

impl Method {
    /// The method for an optional soft assignment (none: hard).
    pub fn of_soft(soft: Option<Soft>) -> Self {
        soft.map_or(Self::Hard, Self::Soft)
    }

    /// The method of `pooling` with an optional soft assignment and, for Fisher vectors, the
    /// mixture's projected dims (`projected`; none for the other methods).
    pub fn new(
        pooling: Pooling,
        soft: Option<Soft>,
        projected: Option<usize>,
    ) -> Result<Self, EncodeParamsError> {
        match (pooling, projected) {
            (Pooling::Bow, None) => Ok(Self::of_soft(soft)),
            (Pooling::Vlad, None) => Ok(Self::Vlad(soft)),
            (Pooling::Fisher, Some(dims)) if soft.is_none() && dims > 0 => {
                Ok(Self::Fisher { dims })
            }
            (Pooling::Fisher, Some(_)) if soft.is_some() => Err(EncodeParamsError::FisherSoft),
            (Pooling::Fisher, projected) => Err(EncodeParamsError::FisherDims(projected)),
            (pooling, Some(projected)) => Err(EncodeParamsError::Projected {
                pooling: pooling.name(),
                projected,
            }),
        }
    }

    /// The mixture's projected dims (Fisher vectors).
    pub fn projected(&self) -> Option<usize> {
        match self {
            Self::Fisher { dims } => Some(*dims),
            _ => None,
        }
    }

    /// The soft assignment, if the method uses one.
    pub fn soft(&self) -> Option<Soft> {
        match self {
            Self::Hard | Self::Fisher { .. } => None,
            Self::Soft(soft) => Some(*soft),
            Self::Vlad(soft) => *soft,
        }
    }

    /// Its pooling.
    pub fn pooling(&self) -> Pooling {
        match self {
            Self::Hard | Self::Soft(_) => Pooling::Bow,
            Self::Vlad(_) => Pooling::Vlad,
            Self::Fisher { .. } => Pooling::Fisher,
        }
    }

    /// Nearest words each patch needs found (none for Fisher vectors).
    pub fn words(&self) -> usize {
        match self {
            Self::Fisher { .. } => 0,
            _ => self.soft().map_or(1, |soft| soft.words),
        }
    }

    /// Values per pyramid cell over a vocabulary of `k` words of `dims` values (a mixture of
    /// `k` components).
    pub fn cell_len(&self, k: usize, dims: usize) -> usize {
        match self {
            Self::Hard | Self::Soft(_) => k,
            Self::Vlad(_) => k.saturating_mul(dims),
            Self::Fisher { dims } => k.saturating_mul(*dims).saturating_mul(2),
        }
    }

    /// The accumulator of a photo's patches (descriptors of `dims` values) for a method that
    /// needs their descriptors (none for bag of words, which pools the words found).
    pub fn accumulator(&self, shape: Shape, dims: usize) -> Option<Accumulator> {
        match self {
            Self::Hard | Self::Soft(_) => None,
            Self::Fisher { dims } => Some(Accumulator::Fisher(FisherSums::new(FisherShape {
                k: shape.k,
                d: *dims,
                width: shape.width,
                height: shape.height,
                pyramid: shape.pyramid,
            }))),
            Self::Vlad(_) => Some(Accumulator::Vlad(VladSums::new(VladShape {
                k: shape.k,
                dims,
                width: shape.width,
                height: shape.height,
                pyramid: shape.pyramid,
            }))),
        }
    }

    /// Adds a strip of patches to `acc`: their descriptors, `words()` words each with their
    /// squared distances, their places in the photo; `words` what they are encoded against.
    pub fn accumulate(
        &self,
        acc: &mut Accumulator,
        descriptors: &[f32],
        (ids, dists): (&[u32], &[f32]),
        positions: &[(usize, usize)],
        words: &Words,
    ) {
        let (sums, centroids) = match (acc, words) {
            (Accumulator::Fisher(sums), Words::Mixture(model)) => {
                sums.add(model, descriptors, positions);
                return;
            }
            (Accumulator::Vlad(sums), Words::Vocabulary(centroids)) => (sums, centroids.as_slice()),
            // (The encoder pairs a method with its words: nothing else reaches here.)
            _ => return,
        };
        let r = self.words();
        match self.soft() {
            Some(soft) => {
                let mut weights = vec![0f32; ids.len()];
                for (w, d) in weights.chunks_exact_mut(r).zip(dists.chunks_exact(r)) {
                    soft.weights(d, w);
                }
                sums.add(descriptors, (ids, Some(&weights), r), positions, centroids);
            }
            None => sums.add(descriptors, (ids, None, 1), positions, centroids),
        }
    }

    /// The method's own rules, the vocabulary's size `k` where it is known: soft assignment
    /// over 2 to [`MAX_SOFT`] words, no more than the vocabulary's, with a positive sharpness;
    /// Fisher vectors over at least one projected dim.
    pub fn check(&self, k: Option<usize>) -> Result<(), EncodeParamsError> {
        if let Self::Fisher { dims: 0 } = self {
            return Err(EncodeParamsError::FisherDims(Some(0)));
        }
        let Some(soft) = self.soft() else {
            return Ok(());
        };
        let soft = &soft;
        if !(2..=MAX_SOFT).contains(&soft.words) {
            return Err(EncodeParamsError::SoftWords(soft.words));
        }
        if let Some(k) = k.filter(|&k| soft.words > k) {
            return Err(EncodeParamsError::SoftOverVocabulary {
                words: soft.words,
                k,
            });
        }
        if !(soft.sharpness.is_finite() && soft.sharpness > 0.0) {
            return Err(EncodeParamsError::Sharpness(soft.sharpness));
        }
        Ok(())
    }

    /// The photo's vector from its patches' words, laid out over `shape` (or from what
    /// `acc` gathered of them, for a method with an accumulator; `words` what they were encoded
    /// against).
    pub fn pool(
        &self,
        found: Found<'_>,
        shape: Shape,
        acc: Option<Accumulator>,
        words: &Words,
    ) -> Vec<f32> {
        match (self, acc) {
            (_, Some(Accumulator::Vlad(sums))) => sums.finish(),
            (_, Some(Accumulator::Fisher(sums))) => match words {
                Words::Mixture(model) => sums.finish(model),
                Words::Vocabulary(_) => Vec::new(),
            },
            // No strip reached an accumulator: a photo without patches, all zeros.
            (Self::Fisher { .. }, None) => match (self.accumulator(shape, words.dims()), words) {
                (Some(Accumulator::Fisher(sums)), Words::Mixture(model)) => sums.finish(model),
                _ => Vec::new(),
            },
            (Self::Vlad(_), None) => match self.accumulator(shape, words.dims()) {
                Some(Accumulator::Vlad(sums)) => sums.finish(),
                _ => Vec::new(),
            },
            (Self::Hard, None) => weighted_histogram(found.ids, None, 1, found.positions, shape),
            (Self::Soft(soft), None) => {
                let r = found.words;
                let mut weights = vec![0f32; found.ids.len()];
                for (w, d) in weights.chunks_exact_mut(r).zip(found.dists.chunks_exact(r)) {
                    soft.weights(d, w);
                }
                weighted_histogram(found.ids, Some(&weights), r, found.positions, shape)
            }
        }
    }
}
