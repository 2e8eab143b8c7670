//! The diagonal-covariance Gaussian mixture: its log densities and responsibilities (shared by
//! the map step and the Fisher encoding), the M-step from a map step's sums (scikit-learn's
//! `GaussianMixture(covariance_type="diag")` formulas: `n_k = Σγ + 10ε`, weights `n_k / Σn`,
//! means `Σγy / n_k`, variances `Σγy² / n_k - mean² + reg`, a variance never below `reg`).

use serde::{Deserialize, Serialize};

use super::error::MixtureError;
use super::linalg::{View, mul};
use super::sums::Moments;

/// A mixture of Gaussians with diagonal covariances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gmm {
    /// Mixing weights (`k`, summing to 1).
    pub weights: Vec<f64>,
    /// Means (`k x d`).
    pub means: Vec<f64>,
    /// Variances (`k x d`, positive).
    pub variances: Vec<f64>,
}

impl Gmm {
    /// A mixture of `weights.len()` components (checked: shapes, finite values, positive
    /// weights and variances).
    pub fn new(
        weights: Vec<f64>,
        means: Vec<f64>,
        variances: Vec<f64>,
    ) -> Result<Self, MixtureError> {
        let gmm = Self {
            weights,
            means,
            variances,
        };
        gmm.check()?;
        Ok(gmm)
    }

    /// Checks the shapes and values (a mixture read from a file or the wire).
    pub fn check(&self) -> Result<(), MixtureError> {
        let k = self.weights.len();
        if k == 0
            || self.means.is_empty()
            || !self.means.len().is_multiple_of(k)
            || self.variances.len() != self.means.len()
        {
            return Err(MixtureError::GmmShape {
                components: k,
                means: self.means.len(),
                variances: self.variances.len(),
            });
        }
        let values = self
            .weights
            .iter()
            .chain(&self.means)
            .chain(&self.variances);
        if !values.clone().all(|v| v.is_finite()) {
            return Err(MixtureError::NonFinite);
        }
        if self
            .weights
            .iter()
            .chain(&self.variances)
            .any(|&v| v <= 0.0)
        {
            return Err(MixtureError::NotPositive);
        }
        Ok(())
    }

    /// Components.
    pub fn components(&self) -> usize {
        self.weights.len()
    }

    /// Values per vector.
    pub fn dims(&self) -> usize {
        self.means.len() / self.weights.len().max(1)
    }

    /// What the log densities are computed from.
    pub fn prepared(&self) -> Prepared {
        let (k, d) = (self.components(), self.dims());
        let mut a = vec![0f64; d * k];
        let mut b = vec![0f64; d * k];
        let mut c = vec![0f64; k];
        for j in 0..k {
            let (m, v) = (&self.means[j * d..][..d], &self.variances[j * d..][..d]);
            let mut constant = self.weights[j].ln();
            for i in 0..d {
                a[i * k + j] = -0.5 / v[i];
                b[i * k + j] = m[i] / v[i];
                constant -= 0.5 * ((2.0 * std::f64::consts::PI * v[i]).ln() + m[i] * m[i] / v[i]);
            }
            c[j] = constant;
        }
        Prepared { a, b, c, k, d }
    }

    /// The mixture of an EM step's sums (`moments` of a [`Statistic::Mixture`] step), with
    /// `reg` added to every variance.
    pub fn m_step(moments: &Moments, reg: f64) -> Result<Self, MixtureError> {
        let k = moments.counts.len();
        let d = moments.width.saturating_sub(1) / 2;
        if k == 0 || d == 0 || moments.width != 1 + 2 * d {
            return Err(MixtureError::Empty);
        }
        let n: Vec<f64> = (0..k)
            .map(|j| moments.value(j, 0) + 10.0 * f64::EPSILON)
            .collect();
        let total: f64 = n.iter().sum();
        let mut means = Vec::with_capacity(k * d);
        let mut variances = Vec::with_capacity(k * d);
        for (j, &nj) in n.iter().enumerate() {
            for i in 0..d {
                let m = moments.value(j, 1 + i) / nj;
                let second = moments.value(j, 1 + d + i) / nj;
                means.push(m);
                variances.push((second - m * m).max(0.0) + reg);
            }
        }
        Self::new(n.iter().map(|v| v / total).collect(), means, variances)
    }
}

/// A mixture ready for log densities: `log w_k + log N(y; m_k, v_k) = Σ_i a_ik y_i² +
/// Σ_i b_ik y_i + c_k`.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `-1 / (2 v)`, `d x k`.
    a: Vec<f64>,
    /// `m / v`, `d x k`.
    b: Vec<f64>,
    /// `log w - (log(2π v) + m² / v) / 2` summed over the dims, `k`.
    c: Vec<f64>,
    k: usize,
    d: usize,
}

/// Per vector of a block: the log-likelihood and the most likely component.
#[derive(Debug, Default)]
pub struct RowsOut {
    /// `log p(y)` of each vector.
    pub log_likelihood: Vec<f64>,
    /// The component of the largest responsibility (the first on a tie).
    pub best: Vec<usize>,
}

impl Prepared {
    /// Components.
    pub fn components(&self) -> usize {
        self.k
    }

    /// The responsibilities of `u` vectors `y` (`u x d`, with their squares `y2`) into
    /// `gamma` (`u x k`); each vector's log-likelihood and most likely component.
    pub fn posteriors(&self, y: &[f64], y2: &[f64], u: usize, gamma: &mut Vec<f64>) -> RowsOut {
        let (k, d) = (self.k, self.d);
        gamma.clear();
        gamma.resize(u * k, 0.0);
        mul(
            View::rows(y2, u, d),
            View::rows(&self.a, d, k),
            gamma,
            false,
        );
        mul(View::rows(y, u, d), View::rows(&self.b, d, k), gamma, true);
        let mut out = RowsOut {
            log_likelihood: Vec::with_capacity(u),
            best: Vec::with_capacity(u),
        };
        for row in gamma.chunks_exact_mut(k.max(1)).take(u) {
            for (g, c) in row.iter_mut().zip(&self.c) {
                *g += c;
            }
            let mut best = 0;
            for (j, &g) in row.iter().enumerate() {
                if g > row[best] {
                    best = j;
                }
            }
            let top = row[best];
            let sum: f64 = row.iter().map(|g| (g - top).exp()).sum();
            let lse = top + sum.ln();
            for g in row.iter_mut() {
                *g = (*g - lse).exp();
            }
            out.log_likelihood.push(lse);
            out.best.push(best);
        }
        out
    }
}
