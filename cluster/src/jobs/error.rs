//! The jobs' own errors: what their data and shapes can break. The engine carries them as
//! [`EngineError::Job`] without knowing them.

use thiserror::Error;
use vocab_pipeline::kmeans::KMeansError;
use vocab_pipeline::kmeans::partial::RangeError;

use crate::engine::EngineError;

/// Errors of the jobs themselves (k-means, the photo stages, the benchmarks).
#[derive(Debug, Error)]
pub enum JobError {
    /// The members' vectors do not add up to the manifest.
    #[error("the ranks hold {got} vectors, the partition manifest lists {want}")]
    Count {
        /// Vectors held.
        got: u64,
        /// Vectors listed.
        want: u64,
    },
    /// The data's values span too wide a range for exact fixed-point sums.
    #[error(transparent)]
    Range(#[from] RangeError),
    /// The k-means computation refused the data (first centroids from the members' rows).
    #[error(transparent)]
    KMeans(#[from] KMeansError),
    /// A step before any load.
    #[error("rank {0} was asked to step with no partitions loaded")]
    NotLoaded(usize),
    /// No member holds a partition (dealt by where partitions are).
    #[error(
        "no member holds {file}: none of the {hosts} members' folders at {dir} has it whole \
         (describe the photos again: remove the features step's folder)"
    )]
    Unplaced {
        /// The partition's file.
        file: String,
        /// The folder, as members see it.
        dir: String,
        /// Members asked.
        hosts: usize,
    },
    /// A centroid set that does not match the job.
    #[error("centroids of {got} values, {want} expected")]
    Shape {
        /// Values received.
        got: usize,
        /// Values expected.
        want: usize,
    },
}

impl From<JobError> for EngineError {
    fn from(e: JobError) -> Self {
        Self::Job(Box::new(e))
    }
}

impl From<RangeError> for EngineError {
    fn from(e: RangeError) -> Self {
        JobError::from(e).into()
    }
}

impl From<KMeansError> for EngineError {
    fn from(e: KMeansError) -> Self {
        JobError::from(e).into()
    }
}
