//! The k-means job: every member of a team runs it; member 0 (rank 0 under MPI, the driver on
//! the daemons) drives, and maps its share when it is a compute rank.
//!
//! One iteration ([`Root::step`]), all members together:
//! 1. the root sends the step (a job command, binomial tree), then the centroids down the
//!    chain ([`crate::collective::broadcast`], by the job's algorithm);
//! 2. every member maps its cached partitions and merges its map tasks' partials (**stage 1**);
//! 3. **stage 2**: member `j` of the chain reduces centroid range `j` of everyone's sums
//!    ([`crate::collective::reduce_ranges`]);
//! 4. **stage 3**: the reduced ranges (counts and means) and the per-unit inertias are gathered
//!    at the root, which ends the iteration with `State::advance` like every other engine.
//!
//! The chain order puts racks together: a rack map (host -> rack) names them, or else each host
//! is its own rack; racks follow in order of first appearance in rank order, so the root's rack
//! comes first. Partitions are dealt out in contiguous, even blocks in chain order, centroid
//! ranges likewise. The sums are exact integers, so the result equals the single-process engine
//! bit for bit for any number of members and any order.
//!
//! Files: `wire` (the job's commands and answers), `layout` (options, deals, ranges, a
//! member's share opened), `share` (the partitions a member caches and maps), `member` and
//! `root` (the two halves; [`Root`] is the k-means [`vocab_pipeline::kmeans::engine::Engine`] of a
//! team), `driver` (the same on the worker daemons, with their recovery), `team` (either root
//! behind one type, started from [`crate::engine::Nodes`]).

mod driver;
mod layout;
mod member;
mod root;
mod share;
mod team;
mod wire;

#[cfg(test)]
pub(crate) mod tests;

pub use self::driver::{Driver, Options as DriverOptions};
pub use self::layout::{Deal, Options};
pub use self::member::Kmeans;
pub use self::root::Root;
pub use self::share::{Mapped, Share, ShareError};
pub use self::team::Team;
pub use self::wire::TAG;
