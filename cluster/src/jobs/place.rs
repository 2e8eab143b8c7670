//! Where a member stands in a job: its team from a command's chain and trees, the broadcast
//! plan a command names, its own folder.

use std::sync::Mutex;

use crate::collective::topology::tree::Tree;
use crate::collective::{Algorithm, BroadcastPlan, Team};
use crate::engine::EngineError;
use crate::net::transport::Transport;

/// A tree's children lists for a command (none: empty).
pub(crate) fn lists(tree: Option<&Tree>) -> Vec<Vec<usize>> {
    tree.map(|t| t.children_lists().to_vec())
        .unwrap_or_default()
}

/// The team of ranks in `order` with the trees of a command (children by rank; empty lists:
/// the fixed trees), each checked to span the team from the root.
pub(crate) fn team_of<'t>(
    transport: &'t dyn Transport,
    order: &[usize],
    broadcast_tree: &[Vec<usize>],
    gather_tree: &[Vec<usize>],
) -> Result<Team<'t>, EngineError> {
    let parse = |lists: &[Vec<usize>]| -> Result<Option<Tree>, EngineError> {
        if lists.is_empty() {
            return Ok(None);
        }
        Tree::from_children(0, lists.to_vec())
            .map(Some)
            .map_err(|e| EngineError::Malformed {
                rank: 0,
                reason: vocab_pipeline::chain(&e),
            })
    };
    let team = if order.is_empty() {
        Team::ranks(transport)
    } else {
        Team::ordered(transport, order.to_vec())?
    };
    Ok(team.with_trees(
        parse(broadcast_tree)?.as_ref(),
        parse(gather_tree)?.as_ref(),
    )?)
}

/// The broadcast plan a command names.
pub(crate) fn plan_of(
    algorithm: &str,
    chunk: u64,
    chains: u64,
) -> Result<BroadcastPlan, EngineError> {
    Ok(BroadcastPlan {
        algorithm: Algorithm::from_name(algorithm).ok_or_else(|| EngineError::Malformed {
            rank: 0,
            reason: format!("unknown broadcast algorithm {algorithm}"),
        })?,
        chunk: usize::try_from(chunk).unwrap_or(usize::MAX),
        chains: usize::try_from(chains).unwrap_or(usize::MAX),
    })
}

/// A member's partition folder: `dir` with `{rank}` replaced by its rank and `{node}` by the
/// name of its node (its name in the cluster file, its host under MPI; a `/` in it becomes
/// `_`), so that members sharing a filesystem can still keep folders of their own.
pub fn member_dir(dir: &str, rank: usize, node: &str) -> String {
    dir.replace("{rank}", &rank.to_string())
        .replace("{node}", &node.replace('/', "_"))
}

/// This member's partition folder ([`member_dir`]).
pub(crate) fn my_dir(dir: &str, transport: &dyn Transport) -> String {
    member_dir(dir, transport.rank(), &transport.host())
}

/// `m` locked; a lock poisoned by a panic elsewhere is taken as it is.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
