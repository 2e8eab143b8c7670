//! The engine's errors (a job's own are the job's, carried as [`EngineError::Job`]), and the JSON in which members and root exchange control words.

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
    /// A job's own error (its data, its shapes: the jobs' `JobError`), carried through the
    /// engine without the engine reading it.
    #[error(transparent)]
    Job(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl EngineError {
    /// The job's error of type `E` this is, if it is one.
    pub fn job<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Self::Job(e) => e.downcast_ref(),
            _ => None,
        }
    }
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
