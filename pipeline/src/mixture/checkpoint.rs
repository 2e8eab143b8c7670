//! A mixture run's checkpoint (`<out>.ckpt`, JSON): after every EM step, the projection, the
//! mixture and the steps so far, with what the run learns from. Values are kept as their f64
//! bits, so a run taken up from it continues from the very mixture the interrupted run had and
//! ends where an uninterrupted run ends, bit for bit. A checkpoint of another run (other
//! vectors, Gaussians, projection, seed or `reg`) is refused.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::MixtureError;
use super::fit::{Resumed, StepLog};
use super::gmm::Gmm;
use super::params::Params;
use super::pca::Pca;

/// What the checkpoint's `format` field says.
pub const FORMAT: &str = "vocab-mixture-checkpoint";

/// The checkpoint of a run writing `out`.
pub fn checkpoint_path(out: &Path) -> PathBuf {
    crate::output::side(out, "ckpt")
}

/// What makes two runs the same run up to where they stop: the vectors and every parameter
/// but `max_iter` (a run may be taken up to go further; `tol` is kept, since a run that would
/// have stopped earlier cannot be taken up where it did).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// Vectors.
    pub vectors: u64,
    /// Values per vector.
    pub dims: usize,
    /// Checksum of their source.
    pub input_checksum: u32,
    /// Gaussians.
    pub components: usize,
    /// Principal components.
    pub pca_dims: usize,
    /// Seed of the first means.
    pub seed: u64,
    /// `reg`'s bits.
    pub reg: u64,
    /// `tol`'s bits.
    pub tol: u64,
}

impl Identity {
    /// The run of `params` over `vectors` of `dims` values from a source of `checksum`.
    pub fn of(params: &Params, (vectors, dims, input_checksum): (u64, usize, u32)) -> Self {
        Self {
            vectors,
            dims,
            input_checksum,
            components: params.components,
            pca_dims: params.pca_dims,
            seed: params.seed,
            reg: params.reg.to_bits(),
            tol: params.tol.to_bits(),
        }
    }
}

/// A step as the checkpoint keeps it (times on other nodes are not kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    iteration: usize,
    log_likelihood: u64,
    seconds: u64,
}

/// The checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    format: String,
    version: u32,
    identity: Identity,
    steps: Vec<Step>,
    pca_mean: Vec<u64>,
    pca_components: Vec<u64>,
    pca_variances: Vec<u64>,
    pca_total_variance: u64,
    weights: Vec<u64>,
    means: Vec<u64>,
    variances: Vec<u64>,
}

fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn values(bits: &[u64]) -> Vec<f64> {
    bits.iter().map(|&b| f64::from_bits(b)).collect()
}

impl Checkpoint {
    /// The state of run `identity` after `steps`: `pca` and `gmm`.
    pub fn new(identity: Identity, steps: &[StepLog], pca: &Pca, gmm: &Gmm) -> Self {
        Self {
            format: FORMAT.into(),
            version: 1,
            identity,
            steps: (steps.iter())
                .map(|s| Step {
                    iteration: s.iteration,
                    log_likelihood: s.log_likelihood.to_bits(),
                    seconds: s.seconds.to_bits(),
                })
                .collect(),
            pca_mean: bits(&pca.mean),
            pca_components: bits(&pca.components),
            pca_variances: bits(&pca.variances),
            pca_total_variance: pca.total_variance.to_bits(),
            weights: bits(&gmm.weights),
            means: bits(&gmm.means),
            variances: bits(&gmm.variances),
        }
    }

    /// EM steps done.
    pub fn ems(&self) -> usize {
        self.steps.iter().filter(|s| s.iteration > 0).count()
    }

    /// Writes it at `path` (beside, then renamed: a killed run leaves the last whole one).
    pub fn save(&self, path: &Path) -> Result<(), MixtureError> {
        let at = || path.display().to_string();
        let text = serde_json::to_string(self).map_err(|e| MixtureError::Invalid {
            path: at(),
            reason: e.to_string(),
        })?;
        crate::atomic::write(path, text.as_bytes())
            .map_err(|source| MixtureError::Io { path: at(), source })
    }

    /// Reads the checkpoint at `path`, checked whole.
    pub fn load(path: &Path) -> Result<Self, MixtureError> {
        let at = || path.display().to_string();
        let text = crate::input::read_text(path, crate::input::MAX_MIXTURE_BYTES.saturating_mul(4))
            .map_err(|source| MixtureError::Io { path: at(), source })?;
        let invalid = |reason: String| MixtureError::Invalid { path: at(), reason };
        let file: Self = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if file.format != FORMAT || file.version != 1 {
            return Err(invalid(format!(
                "format {:?} version {}, not {FORMAT} version 1",
                file.format, file.version
            )));
        }
        let iterations: Vec<usize> = file.steps.iter().map(|s| s.iteration).collect();
        if iterations.first() != Some(&0) || iterations.windows(2).any(|w| w[1] != w[0] + 1) {
            return Err(invalid(format!("steps {iterations:?}, not 0, 1, 2, ...")));
        }
        Ok(file)
    }

    /// The run to take up, when this checkpoint is of run `identity` and not past its
    /// `max_iter` EM steps (else an error saying what differs); the projection and mixture
    /// checked as a mixture file's are.
    pub fn resumed(
        self,
        (identity, max_iter): (&Identity, usize),
        path: &Path,
    ) -> Result<Resumed, MixtureError> {
        let invalid = |reason: String| MixtureError::Invalid {
            path: path.display().to_string(),
            reason,
        };
        if self.ems() > max_iter {
            return Err(invalid(format!(
                "says {} EM steps are done, more than the {max_iter} this run makes; remove it \
                 (or run without --resume) to start over",
                self.ems()
            )));
        }
        if &self.identity != identity {
            return Err(invalid(format!(
                "a checkpoint of another run ({:?}; this run: {identity:?}): remove it to start \
                 over",
                self.identity
            )));
        }
        let pca = Pca::new(
            values(&self.pca_mean),
            values(&self.pca_components),
            values(&self.pca_variances),
            f64::from_bits(self.pca_total_variance),
        )
        .map_err(|e| invalid(crate::chain(&e)))?;
        let gmm = Gmm::new(
            values(&self.weights),
            values(&self.means),
            values(&self.variances),
        )
        .map_err(|e| invalid(crate::chain(&e)))?;
        if pca.input_dims() != identity.dims
            || pca.output_dims() != identity.pca_dims
            || gmm.components() != identity.components
            || gmm.dims() != identity.pca_dims
        {
            return Err(invalid(format!(
                "a projection of {} onto {}, a mixture of {} components of {}",
                pca.input_dims(),
                pca.output_dims(),
                gmm.components(),
                gmm.dims()
            )));
        }
        let steps = (self.steps.iter())
            .map(|s| StepLog {
                iteration: s.iteration,
                log_likelihood: f64::from_bits(s.log_likelihood),
                seconds: f64::from_bits(s.seconds),
                report: Default::default(),
            })
            .collect();
        Ok(Resumed { pca, gmm, steps })
    }
}
