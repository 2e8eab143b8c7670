//! The encoding-method seam: how a photo's patches, once each has found its nearest words, become
//! the photo's vector. Everything that depends on the method (the words a patch needs, the
//! values per pyramid cell, the method's own rules, the pooling) is asked of [`Method`], so a new
//! method (VLAD, Fisher vectors) is a new file and one arm here; the encoder, the sharded photo
//! job, the settings and the memory plan follow from it.

use super::bow::{Shape, Soft, weighted_histogram};
use super::error::{EncodeParamsError, MAX_SOFT};

/// How patches and their words are pooled into a photo's vector.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Method {
    /// Bag of words: each patch counts toward its nearest word.
    Hard,
    /// Bag of words with soft assignment: each patch counts toward its few nearest words.
    Soft(Soft),
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

    /// The soft assignment, if the method is one.
    pub fn soft(&self) -> Option<Soft> {
        match self {
            Self::Hard => None,
            Self::Soft(soft) => Some(*soft),
        }
    }

    /// Nearest words each patch needs found.
    pub fn words(&self) -> usize {
        match self {
            Self::Hard => 1,
            Self::Soft(soft) => soft.words,
        }
    }

    /// Values per pyramid cell over a vocabulary of `k` words.
    pub fn cell_len(&self, k: usize) -> usize {
        match self {
            Self::Hard | Self::Soft(_) => k,
        }
    }

    /// The method's own rules, the vocabulary's size `k` where it is known: soft assignment
    /// over 2 to [`MAX_SOFT`] words, no more than the vocabulary's, with a positive sharpness.
    pub fn check(&self, k: Option<usize>) -> Result<(), EncodeParamsError> {
        let Self::Soft(soft) = self else {
            return Ok(());
        };
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

    /// The photo's vector from its patches' words, laid out over `shape`.
    pub fn pool(&self, found: Found<'_>, shape: Shape) -> Vec<f32> {
        match self {
            Self::Hard => weighted_histogram(found.ids, None, 1, found.positions, shape),
            Self::Soft(soft) => {
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
