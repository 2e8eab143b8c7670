//! The cluster runtime of vocab: cluster files today; the wire format, worker daemons, driver,
//! chain broadcast and aggregation stages follow (issues 4 and 5).
//!
//! This crate owns networking and (later) tokio; it calls into `vocab-pipeline` for the math and
//! never the other way round.

#![deny(missing_docs)]

pub mod auth;
pub mod broadcast;
pub mod config;
pub mod connection;
pub mod frame;
pub mod peer;
pub mod worker;
