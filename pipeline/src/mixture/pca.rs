//! Principal components from the covariance sums: the mean, the covariance `Σxxᵀ/n - mean
//! meanᵀ` in `f64`, its eigenvectors by `linfa-linalg`'s symmetric eigendecomposition, the
//! largest first, each signed so its largest entry (the first on a tie) is positive.

use linfa_linalg::eigh::{EigSort, Eigh};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use super::error::MixtureError;
use super::sums::Moments;

/// A projection onto principal components: `y = components (x - mean)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pca {
    /// Mean of the vectors (`input` values).
    pub mean: Vec<f64>,
    /// The components, one per row (`output x input`), unit length.
    pub components: Vec<f64>,
    /// Variance of the vectors along each component (the eigenvalues, largest first).
    pub variances: Vec<f64>,
    /// The vectors' total variance (the covariance's trace), of which `variances` are kept.
    pub total_variance: f64,
}

impl Pca {
    /// A projection of `mean.len()` values onto `variances.len()` components (checked: shapes,
    /// finite values).
    pub fn new(
        mean: Vec<f64>,
        components: Vec<f64>,
        variances: Vec<f64>,
        total_variance: f64,
    ) -> Result<Self, MixtureError> {
        let pca = Self {
            mean,
            components,
            variances,
            total_variance,
        };
        pca.check()?;
        Ok(pca)
    }

    /// Checks the shapes and values (a projection read from a file or the wire).
    pub fn check(&self) -> Result<(), MixtureError> {
        let (dims, d) = (self.mean.len(), self.variances.len());
        if dims == 0 || d == 0 || d > dims || self.components.len() != d * dims {
            return Err(MixtureError::PcaShape {
                dims,
                projected: d,
                components: self.components.len(),
            });
        }
        let values = self
            .mean
            .iter()
            .chain(&self.components)
            .chain(&self.variances);
        if !values.clone().all(|v| v.is_finite())
            || self.variances.iter().any(|&v| v < 0.0)
            || !(self.total_variance.is_finite() && self.total_variance >= 0.0)
        {
            return Err(MixtureError::NonFinite);
        }
        Ok(())
    }

    /// The `output` leading components of the vectors whose covariance sums are `moments`
    /// (a [`super::Statistic::Covariance`] step).
    pub fn from_moments(moments: &Moments, output: usize) -> Result<Self, MixtureError> {
        let dims = moments.counts.len();
        let n = moments.counts.first().copied().unwrap_or(0);
        if dims == 0
            || moments.width != dims + 1
            || n == 0
            || moments.counts.iter().any(|&c| c != n)
        {
            return Err(MixtureError::Empty);
        }
        if output == 0 || output > dims {
            return Err(MixtureError::Projected { output, dims });
        }
        let n = n as f64;
        let mean: Vec<f64> = (0..dims).map(|i| moments.value(i, 0) / n).collect();
        let mut cov = Array2::<f64>::zeros((dims, dims));
        for i in 0..dims {
            for j in 0..dims {
                // Symmetric by construction: both halves from the upper triangle's sums.
                let (a, b) = (i.min(j), i.max(j));
                cov[(i, j)] = moments.value(a, 1 + b) / n - mean[a] * mean[b];
            }
        }
        let (values, vectors) = cov
            .eigh()
            .map_err(|e| MixtureError::Eigen(e.to_string()))?
            .sort_eig_desc();
        let mut components = Vec::with_capacity(output * dims);
        for c in 0..output {
            let column = vectors.column(c);
            // The sign: the largest entry positive (the first of equal magnitude).
            let mut at = 0;
            for (i, v) in column.iter().enumerate() {
                if v.abs() > column[at].abs() {
                    at = i;
                }
            }
            let sign = if column[at] < 0.0 { -1.0 } else { 1.0 };
            components.extend(column.iter().map(|v| v * sign));
        }
        let variances = values.iter().take(output).map(|&v| v.max(0.0)).collect();
        let total = (0..dims).map(|i| cov[(i, i)].max(0.0)).sum();
        Self::new(mean, components, variances, total)
    }

    /// Values per input vector.
    pub fn input_dims(&self) -> usize {
        self.mean.len()
    }

    /// Values per projected vector.
    pub fn output_dims(&self) -> usize {
        self.variances.len()
    }

    /// Projects `rows` vectors held in `x` (`rows x input`, overwritten: the mean is taken
    /// off in place) into `y` (`rows x output`).
    pub fn project_into(&self, x: &mut [f64], rows: usize, y: &mut Vec<f64>) {
        let (dims, d) = (self.input_dims(), self.output_dims());
        for row in x.chunks_exact_mut(dims).take(rows) {
            for (v, m) in row.iter_mut().zip(&self.mean) {
                *v -= m;
            }
        }
        y.clear();
        y.resize(rows * d, 0.0);
        super::linalg::mul(
            super::linalg::View::rows(x, rows, dims),
            super::linalg::View::rows(&self.components, d, dims).t(),
            y,
            false,
        );
    }
}
