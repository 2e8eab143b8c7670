//! The assembled sums of a map step ([`Moments`]), what the PCA and the M-step read.

use crate::kmeans::Partial;
use crate::kmeans::engine::StepReport;

/// The assembled sums of one map step over every vector.
#[derive(Debug, Clone)]
pub struct Moments {
    /// Per row of the table: vectors counted (see [`Statistic`]).
    pub counts: Vec<u64>,
    /// `rows x width` fixed-point sums.
    pub sums: Vec<i64>,
    /// Values per row.
    pub width: usize,
    /// The fixed-point scale of each column.
    pub scales: Vec<i32>,
    /// Total log-likelihood (the mixture's; 0 for the covariance), added per unit in key order.
    pub log_likelihood: f64,
    /// Time and traffic (default on one process).
    pub report: StepReport,
}

impl Moments {
    /// The sums of a merged partial whose columns were rounded at `scales`.
    pub fn of(partial: &Partial, scales: Vec<i32>) -> Self {
        Self {
            counts: partial.counts().into_owned(),
            sums: partial.sums().into_owned(),
            width: partial.dims(),
            scales,
            log_likelihood: partial.inertia(),
            report: StepReport::default(),
        }
    }

    /// Value `col` of row `row`, unscaled.
    pub fn value(&self, row: usize, col: usize) -> f64 {
        self.sums[row * self.width + col] as f64 * 2f64.powi(-self.scales[col])
    }
}
