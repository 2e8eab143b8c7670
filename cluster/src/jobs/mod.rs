//! The jobs a team runs, each owning its commands, its payloads and both its halves: the root's
//! (driving, over any engine: an MPI rank 0, the TCP driver, an in-memory team) and the
//! members' (a [`crate::engine::Job`] registered under the job's tag).
//!
//! * [`kmeans`]: cached partitions, one iteration per step (broadcast, map, three-stage
//!   aggregation);
//! * [`photos`]: the features and encode stages sharded over the members;
//! * [`born`]: the patches a kept features job holds cut into partitions where they are, and
//!   partitions made again from their photos;
//! * [`mod@bench`]: the collectives benchmark of the daemons.
//!
//! [`members`] gives a member every job; `place` holds what the jobs share (a member's team
//! from a command, its folder).

pub mod bench;
pub mod born;
pub mod error;
pub mod kmeans;
pub mod photos;
pub(crate) mod place;
mod registry;

pub use error::JobError;

pub use self::place::member_dir;
pub use self::registry::{members, serve};
