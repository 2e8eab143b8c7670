//! `[mixture]` and `vocab mixture`: how the Gaussian mixture of Fisher vectors is learned.

use serde::{Deserialize, Serialize};
use vocab_pipeline::mixture::Params;

/// How a mixture is learned: `vocab mixture`'s options and a config's `[mixture]`, the same
/// type, its defaults the library's ([`Params::default`]). A config lists its sizes
/// (`components`, one mixture and one encoding each; `vocab mixture` takes one
/// `--components`). Where it runs is `[kmeans]`'s (`nodes`, `cluster`, `broadcast`, `order`).
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MixtureOptions {
    /// Gaussians of each mixture (a config's list).
    #[arg(skip = MixtureOptions::default().components)]
    pub components: Vec<usize>,
    /// Principal components the vectors are projected onto first.
    #[arg(long, value_name = "D", default_value_t = MixtureOptions::default().pca_dims)]
    pub pca_dims: usize,
    /// EM steps at most.
    #[arg(long, value_name = "N", default_value_t = MixtureOptions::default().iterations)]
    pub iterations: usize,
    /// Stop when the mean log-likelihood per vector moves less than this.
    #[arg(long, value_name = "TOL", default_value_t = MixtureOptions::default().tol)]
    pub tol: f64,
    /// Seed of the first means (random vectors).
    #[arg(long, value_name = "S", default_value_t = MixtureOptions::default().seed,
          value_parser = super::parse_seed)]
    pub seed: u64,
    /// Added to every variance (scikit-learn's reg_covar).
    #[arg(long, value_name = "R", default_value_t = MixtureOptions::default().reg)]
    pub reg: f64,
}

impl Default for MixtureOptions {
    fn default() -> Self {
        let params = Params::default();
        Self {
            components: vec![params.components],
            pca_dims: params.pca_dims,
            iterations: params.max_iter,
            tol: params.tol,
            seed: params.seed,
            reg: params.reg,
        }
    }
}

impl MixtureOptions {
    /// How the mixture of `components` Gaussians is learned.
    pub fn params(&self, components: usize) -> Params {
        Params {
            components,
            pca_dims: self.pca_dims,
            max_iter: self.iterations,
            tol: self.tol,
            seed: self.seed,
            reg: self.reg,
        }
    }
}
