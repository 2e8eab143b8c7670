//! The cluster runtime of vocab, in layers, each importing only the ones below it:
//!
//! * [`net`]: the wire format, connections, authentication, the cluster file and the transports
//!   (TCP, MPI, in memory);
//! * [`collective`]: broadcasts, the three aggregation stages, topology, calibration and the
//!   layout choice, written once against a transport;
//! * [`engine`]: a team driven by its root, the members' command loop (job tag + job bytes),
//!   the daemons' membership and recovery;
//! * [`jobs`]: k-means, the photo stages, partitions born on the nodes, the collectives
//!   benchmark, each with its root and member halves;
//! * [`worker`]: the worker daemon, which serves every job, admitting unauthenticated
//!   connections to the handshake through [`admission`].
//!
//! This crate owns networking and tokio; it calls into `vocab-pipeline` for the math and never
//! the other way round.

#![deny(missing_docs)]

pub mod admission;
pub mod collective;
pub mod engine;
pub mod jobs;
pub mod net;
pub mod worker;
