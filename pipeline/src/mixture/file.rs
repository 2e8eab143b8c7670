//! The mixture file (`vocab mixture --out`, JSON): how it was learned, from what, the PCA and
//! the mixture, checked whole when read back (shapes, finite values, the mixture over the
//! projection's outputs). It holds nothing that depends on where or how fast it was learned,
//! so every engine writes the same bytes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::MixtureError;
use super::fit::Fitted;
use super::gmm::Gmm;
use super::params::Params;
use super::pca::Pca;

/// What the file's `format` field says.
pub const FORMAT: &str = "vocab-mixture";

/// A learned mixture with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixtureFile {
    /// [`FORMAT`].
    pub format: String,
    /// 1.
    pub version: u32,
    /// How it was learned.
    pub params: Params,
    /// Vectors it was learned from.
    pub vectors: u64,
    /// Values per vector.
    pub dims: usize,
    /// Checksum of the vectors' source (a partition set's, or the feature file's records).
    pub input_checksum: u32,
    /// Whether EM stopped on `tol`.
    pub converged: bool,
    /// Mean log-likelihood per vector before each EM step's M-step.
    pub log_likelihood: Vec<f64>,
    /// The projection.
    pub pca: Pca,
    /// The mixture over projected vectors.
    pub gmm: Gmm,
}

impl MixtureFile {
    /// The file of a run of `params` over `vectors` of `dims` values.
    pub fn new(
        params: &Params,
        (vectors, dims, input_checksum): (u64, usize, u32),
        fitted: &Fitted,
    ) -> Self {
        Self {
            format: FORMAT.into(),
            version: 1,
            params: params.clone(),
            vectors,
            dims,
            input_checksum,
            converged: fitted.converged,
            log_likelihood: (fitted.steps.iter())
                .filter(|s| s.iteration > 0)
                .map(|s| s.log_likelihood)
                .collect(),
            pca: fitted.pca.clone(),
            gmm: fitted.gmm.clone(),
        }
    }

    /// Checks the parts against each other.
    pub fn check(&self) -> Result<(), MixtureError> {
        if self.format != FORMAT || self.version != 1 {
            return Err(MixtureError::Format {
                format: self.format.clone(),
                version: self.version,
            });
        }
        self.params.check()?;
        self.pca.check()?;
        self.gmm.check()?;
        if self.pca.input_dims() != self.dims
            || self.gmm.dims() != self.pca.output_dims()
            || self.gmm.components() != self.params.components
        {
            return Err(MixtureError::Parts {
                dims: self.dims,
                pca: (self.pca.input_dims(), self.pca.output_dims()),
                gmm: (self.gmm.components(), self.gmm.dims()),
            });
        }
        Ok(())
    }

    /// Reads and checks the file at `path`.
    pub fn read(path: &Path) -> Result<Self, MixtureError> {
        Self::read_digested(path).map(|(file, _)| file)
    }

    /// Reads and checks the file at `path`, with the SHA-256 of the very bytes it was read from
    /// ([`crate::input::digest_bytes`]): what a record of the mixture's use binds to, with no
    /// second read that a file changed meanwhile could slip between.
    pub fn read_digested(path: &Path) -> Result<(Self, String), MixtureError> {
        let at = || path.display().to_string();
        let text = crate::input::read_text(path, crate::input::MAX_MIXTURE_BYTES)
            .map_err(|source| MixtureError::Io { path: at(), source })?;
        let digest = crate::input::digest_bytes(text.as_bytes());
        let file: Self = serde_json::from_str(&text).map_err(|e| MixtureError::Invalid {
            path: at(),
            reason: e.to_string(),
        })?;
        file.check().map_err(|e| MixtureError::Invalid {
            path: at(),
            reason: crate::chain(&e),
        })?;
        Ok((file, digest))
    }

    /// Writes the file at `path` (beside, then renamed), checked as a read checks it: a mixture
    /// no reader would take (a value not finite) is never written.
    pub fn write(&self, path: &Path) -> Result<(), MixtureError> {
        self.check().map_err(|e| MixtureError::Invalid {
            path: path.display().to_string(),
            reason: crate::chain(&e),
        })?;
        let mut text = serde_json::to_string(self).map_err(|e| MixtureError::Invalid {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        text.push('\n');
        crate::atomic::write(path, text.as_bytes()).map_err(|source| MixtureError::Io {
            path: path.display().to_string(),
            source,
        })
    }
}
