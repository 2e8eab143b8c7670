//! What goes wrong learning or reading a mixture.

use thiserror::Error;

use super::params::ParamsError;

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
    #[error(
        "no statistic has {dims} values a vector, {projected} projected, {components} components"
    )]
    Shape {
        /// Values per vector.
        dims: u64,
        /// Projected values.
        projected: u64,
        /// Components.
        components: u64,
    },
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
    /// A mixture file cannot be read or written.
    #[error("{path}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A mixture file that is not one, or whose parts do not fit.
    #[error("{path} is not a usable mixture: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Another format or version.
    #[error("format {format:?} version {version}, not vocab-mixture version 1")]
    Format {
        /// Its format field.
        format: String,
        /// Its version.
        version: u32,
    },
    /// Parts of other shapes.
    #[error(
        "vectors of {dims} values, a projection of {} onto {}, a mixture of {} components of {}",
        pca.0, pca.1, gmm.0, gmm.1
    )]
    Parts {
        /// Values per vector.
        dims: usize,
        /// The projection's input and output dims.
        pca: (usize, usize),
        /// The mixture's components and dims.
        gmm: (usize, usize),
    },
}
