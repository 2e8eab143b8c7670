//! A Gaussian mixture over PCA-reduced vectors, learned by EM on any engine: the vocabulary of
//! improved Fisher vectors.
//!
//! Both the PCA and every EM step are map steps over the cached partitions whose outputs add
//! up like k-means' partial sums ([`moments`]: per component the weight, first and second
//! moments; per input dimension the first and second moments for the covariance), so one
//! process ([`moments::Local`]), the MPI ranks and the TCP workers (the cluster crate's k-means
//! job, which runs them through the same broadcast, map and three-stage aggregation) give the
//! same mixture bit for bit. [`fit::fit_with`] is the one loop; [`pca`] and [`gmm`] the math
//! (scikit-learn's formulas, checked against it on `eval/mixture/`'s fixture); [`params`] the
//! rules; [`linalg`] the products.

pub mod fit;
pub mod gmm;
pub mod linalg;
pub mod moments;
pub mod params;
pub mod pca;

use thiserror::Error;

pub use self::fit::{Fitted, StepLog, fit_with};
pub use self::gmm::Gmm;
pub use self::moments::{Engine, Local, Moments, Statistic};
pub use self::params::{Params, ParamsError};
pub use self::pca::Pca;

/// What goes wrong learning or reading a mixture.
#[derive(Debug, Error)]
pub enum MixtureError {
    /// A rule of the parameters.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The vectors do not fit together.
    #[error(transparent)]
    Data(crate::kmeans::KMeansError),
    /// No vectors, or sums of another statistic.
    #[error("no vectors to learn from")]
    Empty,
    /// A value is NaN or infinite.
    #[error("a value is not finite")]
    NonFinite,
    /// A weight or variance is 0 or negative.
    #[error("a weight or variance is not positive")]
    NotPositive,
    /// A row index past the vectors.
    #[error("vector {k} asked of {n}")]
    TooFewVectors {
        /// One past the index asked for.
        k: usize,
        /// Vectors there are.
        n: usize,
    },
    /// More principal components asked for than values per vector.
    #[error("{output} principal components of {dims} values")]
    Projected {
        /// Components asked for.
        output: usize,
        /// Values per vector.
        dims: usize,
    },
    /// A projection's parts do not fit together.
    #[error(
        "a projection of {dims} values onto {projected} components has {components} component values"
    )]
    PcaShape {
        /// Values of its mean.
        dims: usize,
        /// Its variances.
        projected: usize,
        /// Its component values.
        components: usize,
    },
    /// A mixture's parts do not fit together.
    #[error("a mixture of {components} components has {means} means and {variances} variances")]
    GmmShape {
        /// Its weights.
        components: usize,
        /// Its mean values.
        means: usize,
        /// Its variance values.
        variances: usize,
    },
    /// A statistic of no shape.
    #[error("no statistic has the shape {0:?}")]
    Shape(moments::Head),
    /// A statistic's values of another length.
    #[error("{got} values for a statistic of {want}")]
    Values {
        /// Values given.
        got: usize,
        /// Values of the shape.
        want: usize,
    },
    /// The eigendecomposition failed.
    #[error("the covariance's eigendecomposition failed: {0}")]
    Eigen(String),
    /// A step counted other vectors than there are.
    #[error("a step counted {got} vectors of {want}")]
    Counted {
        /// Vectors counted.
        got: u64,
        /// Vectors there are.
        want: u64,
    },
}

#[cfg(test)]
mod tests;
