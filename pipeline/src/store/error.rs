//! The feature store's errors: each names the file at fault.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Errors of the feature store.
#[derive(Debug, Error)]
pub enum StoreError {
    /// An I/O error on a named file.
    #[error("{path}")]
    Io {
        /// File at fault.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
    /// The file is not in a format this build reads.
    #[error("{path}: {message}")]
    Format {
        /// File at fault.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The file is shorter than its header says.
    #[error("{path}: truncated: header promises {expected} bytes, file has {actual}")]
    Truncated {
        /// File at fault.
        path: PathBuf,
        /// Bytes the header implies.
        expected: u64,
        /// Bytes present.
        actual: u64,
    },
    /// The payload checksum does not match the header.
    #[error("{path}: payload checksum mismatch (header {expected:08x}, data {actual:08x})")]
    Checksum {
        /// File at fault.
        path: PathBuf,
        /// Checksum in the header.
        expected: u32,
        /// Checksum of the data read.
        actual: u32,
    },
    /// A text line or binary record is malformed.
    #[error("{path}: {location}: {message}")]
    Record {
        /// File at fault.
        path: PathBuf,
        /// `line N` (text) or `record N` (binary), 1-based.
        location: String,
        /// What is wrong.
        message: String,
    },
}
