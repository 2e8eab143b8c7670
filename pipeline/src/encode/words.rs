//! What a photo's patches are encoded against: a k-means vocabulary's words (bag of words,
//! VLAD) or a mixture's components (Fisher vectors), and how either travels to the members of a
//! sharded encode (`f32`s of the words, `f64`s of the mixture, little-endian).

use super::fisher::FisherModel;
use crate::kmeans::Centroids;
use crate::mixture::moments::{Head, values_len};

/// What patches are encoded against.
#[derive(Debug, Clone)]
pub enum Words {
    /// A vocabulary of words (bag of words, VLAD).
    Vocabulary(Centroids),
    /// A mixture over principal components (Fisher vectors).
    Mixture(Box<FisherModel>),
}

impl Words {
    /// Words, or components.
    pub fn k(&self) -> usize {
        match self {
            Self::Vocabulary(c) => c.k(),
            Self::Mixture(m) => m.components(),
        }
    }

    /// Values per descriptor the words are of (a mixture's: before its projection).
    pub fn dims(&self) -> usize {
        match self {
            Self::Vocabulary(c) => c.dims(),
            Self::Mixture(m) => m.input_dims(),
        }
    }

    /// The vocabulary's words, if that is what it is.
    pub fn centroids(&self) -> Option<&Centroids> {
        match self {
            Self::Vocabulary(c) => Some(c),
            Self::Mixture(_) => None,
        }
    }

    /// Bytes that carry `k` words of `dims` values, or a mixture of `k` components over
    /// `projected` dims of `dims` (the method's, `Method::projected`); `None` past what can be
    /// counted.
    pub fn wire_len(dims: usize, projected: Option<usize>, k: usize) -> Option<u64> {
        match projected {
            None => (k as u64).checked_mul(dims as u64)?.checked_mul(4),
            Some(d) => {
                let head = Head {
                    dims: dims as u64,
                    projected: d as u64,
                    components: k as u64,
                };
                (values_len(&head)? as u64).checked_mul(8)
            }
        }
    }

    /// The bytes that carry it.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Vocabulary(c) => c.as_slice().iter().flat_map(|v| v.to_le_bytes()).collect(),
            Self::Mixture(m) => m.values().iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// What `bytes` carry for `k` words of `dims` values, or a mixture of `k` components over
    /// `projected` dims of `dims` (checked: length, finite values, a mixture's own rules), or
    /// why they cannot be used.
    pub fn from_bytes(
        dims: usize,
        projected: Option<usize>,
        k: usize,
        bytes: &[u8],
    ) -> Result<Self, String> {
        let want = Self::wire_len(dims, projected, k).ok_or_else(|| format!("{k} words"))?;
        if bytes.len() as u64 != want {
            return Err(format!(
                "{} bytes of words where {want} were due",
                bytes.len()
            ));
        }
        match projected {
            None => {
                let values: Vec<f32> = bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                if values.iter().any(|v| !v.is_finite()) {
                    return Err("the vocabulary holds values that are not finite".into());
                }
                Ok(Self::Vocabulary(Centroids::new(values, dims)))
            }
            Some(d) => {
                let values: Vec<f64> = bytes
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                    .collect();
                FisherModel::from_values((dims, d, k), &values)
                    .map(|m| Self::Mixture(Box::new(m)))
                    .map_err(|e| crate::chain(&e))
            }
        }
    }
}
