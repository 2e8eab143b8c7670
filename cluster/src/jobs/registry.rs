//! Every job a member serves, wired together.

use super::bench::Bench;
use super::born::Cuts;
use super::kmeans::Kmeans;
use super::photos::{Photos, Slot};
use crate::engine::{EngineError, Hooks, Job};
use crate::net::transport::Transport;

/// A member's jobs, fresh: k-means, the photo stages, the cut of partitions born on the nodes
/// (which shares the photo job's current work), the collectives benchmark.
pub fn members() -> Vec<Box<dyn Job>> {
    let current = Slot::default();
    vec![
        Box::new(Kmeans::default()),
        Box::new(Photos::new(current.clone())),
        Box::new(Cuts::new(current)),
        Box::new(Bench),
    ]
}

/// Serves the root's commands with every job until it says exit ([`crate::engine::serve`]
/// with fresh [`members`]): every rank but 0 of an MPI job calls this.
pub fn serve(transport: &dyn Transport, hooks: &dyn Hooks) -> Result<(), EngineError> {
    crate::engine::serve(transport, &mut members(), hooks)
}
