//! The engine's errors, and the JSON in which members and root exchange control words.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::collective::CollectiveError;

/// Errors of an engine and of the jobs it runs.
#[derive(Debug, Error)]
pub enum EngineError {
    /// A collective failed.
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    /// A member cannot take part (other build, unreadable or other partitions).
    #[error("rank {rank} on {host} refused: {reason}")]
    Refused {
        /// The rank.
        rank: usize,
        /// Its host.
        host: String,
        /// Why.
        reason: String,
    },
    /// A message that does not parse: the members run different builds or a bug.
    #[error("malformed message from rank {rank}: {reason}")]
    Malformed {
        /// The sender.
        rank: usize,
        /// What is wrong.
        reason: String,
    },
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
    Range(#[from] vocab_pipeline::kmeans::partial::RangeError),
    /// The k-means computation refused the data (first centroids from the members' rows).
    #[error(transparent)]
    KMeans(#[from] vocab_pipeline::kmeans::KMeansError),
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

/// `value` as JSON (control words and job commands).
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain data structs and strings always serialise.
    serde_json::to_vec(value).unwrap_or_default()
}

/// A control word or job command from `rank`; what does not parse is [`EngineError::Malformed`].
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(
    rank: usize,
    bytes: &[u8],
) -> Result<T, EngineError> {
    serde_json::from_slice(bytes).map_err(|e| EngineError::Malformed {
        rank,
        reason: vocab_pipeline::chain(&e),
    })
}
