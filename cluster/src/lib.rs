//! The cluster runtime of vocab: cluster files, the wire format, worker daemons, the driver of
//! distributed k-means, the broadcasts and the aggregation stages.
//!
//! This crate owns networking and tokio; it calls into `vocab-pipeline` for the math and never
//! the other way round.

#![deny(missing_docs)]

pub mod born;
pub mod collective;
pub mod driver;
pub mod net;
pub mod photos;
pub mod share;
pub mod spmd;
pub mod worker;
