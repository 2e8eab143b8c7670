//! Broadcasting one message from the root (the driver) to every node.
//!
//! * **Chain** (Twister's pipelined chain): the root streams fixed-size chunks to the first node of
//!   the chain; every node stores each chunk in a preallocated buffer and hands it to a writer task
//!   that forwards it to its successor while the next chunk arrives. The order is the cluster
//!   file's (racks together). Acknowledgements travel back up the chain only after each node has
//!   checked its copy's checksum, so the call returns when every node holds the whole message.
//! * **Simple**: the root sends the whole message to each node in turn.
//! * **MST**: binomial tree (MPI's minimum spanning tree): a node receives the whole message, then
//!   sends it to its children, largest subtree first.
//! * **Multi-chain**: the message is cut into `chains` slices, each sent down its own chain (the
//!   node order rotated per chain, so the chains start at different nodes), all at once.
//!
//! Faults: a node that cannot be reached, or that breaks off, is named in a [`Frame::Failed`]
//! travelling back to the root. The root waits (exponential back-off), probes the named node, drops
//! it if it does not answer (re-linking the chain around it), and restarts the broadcast; after
//! `retries` failed attempts the call fails with an error naming the node.

use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;
use tokio::task::JoinSet;

use crate::auth::Secret;
use crate::config::Cluster;
use crate::connection::{Connection, ConnectionError};
use crate::frame::{Begin, Frame, ROUTE_CHAIN, ROUTE_TREE};
use crate::peer::dial_name;

/// Broadcast algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// Pipelined chain.
    Chain,
    /// Root sends to each node in turn.
    Simple,
    /// Binomial tree.
    Mst,
    /// Several chains in parallel, each with a slice of the message.
    MultiChain,
}

impl Algorithm {
    /// Parses `chain`, `simple`, `mst` or `multichain`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "chain" => Some(Self::Chain),
            "simple" => Some(Self::Simple),
            "mst" => Some(Self::Mst),
            "multichain" => Some(Self::MultiChain),
            _ => None,
        }
    }

    /// The name [`Algorithm::from_name`] parses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chain => "chain",
            Self::Simple => "simple",
            Self::Mst => "mst",
            Self::MultiChain => "multichain",
        }
    }
}

/// A delivery that did not complete, and the node to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Node that was unreachable, broke off, or held a bad copy.
    pub node: String,
    /// What happened.
    pub reason: String,
}

/// Errors of a broadcast.
#[derive(Debug, Error)]
pub enum BroadcastError {
    /// Attempts exhausted.
    #[error("broadcast failed at node {node} after {attempts} attempts: {reason}")]
    Failed {
        /// The node blamed last.
        node: String,
        /// What happened.
        reason: String,
        /// Attempts made.
        attempts: u32,
    },
    /// Every node was dropped.
    #[error("no nodes left to broadcast to (dropped: {0:?})")]
    NoNodes(Vec<String>),
}

/// What a completed broadcast did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Wall time including retries.
    pub seconds: f64,
    /// Nodes dropped because they were dead.
    pub dropped: Vec<String>,
    /// Attempts made (1 when nothing failed).
    pub attempts: u32,
    /// Nodes that hold the message.
    pub nodes: usize,
}

/// A slice of a message on its way to a node.
#[derive(Debug, Clone)]
pub(crate) struct Slice {
    pub id: u64,
    pub offset: u64,
    pub total: u64,
    pub data: Bytes,
    pub checksum: u32,
}

/// Binomial-tree children of a node responsible for `hops`: `(child, the child's own hops)`,
/// largest subtree first.
pub(crate) fn tree_children(hops: &[String]) -> Vec<(String, Vec<String>)> {
    let mut rest = hops;
    let mut children = Vec::new();
    while !rest.is_empty() {
        let mid = rest.len() / 2;
        children.push((rest[mid].clone(), rest[mid + 1..].to_vec()));
        rest = &rest[..mid];
    }
    children
}

/// Writes `Begin` and the chunks of `slice` to `conn`.
pub(crate) async fn push(
    conn: &mut Connection,
    slice: &Slice,
    route: u8,
    hops: &[String],
    chunk: usize,
) -> Result<(), ConnectionError> {
    conn.write_frame(&Frame::Begin(Begin {
        id: slice.id,
        route,
        offset: slice.offset,
        len: slice.data.len() as u64,
        total: slice.total,
        checksum: slice.checksum,
        hops: hops.to_vec(),
    }))
    .await?;
    let mut at = 0;
    while at < slice.data.len() {
        let end = (at + chunk).min(slice.data.len());
        conn.write_frame(&Frame::Chunk {
            id: slice.id,
            offset: slice.offset + at as u64,
            total: slice.total,
            data: slice.data.slice(at..end),
        })
        .await?;
        at = end;
    }
    Ok(())
}

/// Waits for the acknowledgement of a slice sent to `node` on `conn`.
pub(crate) async fn await_ack(
    conn: &mut Connection,
    node: &str,
    slice: &Slice,
    deadline: Duration,
) -> Result<(), Failure> {
    let fail = |reason: String| Failure {
        node: node.to_string(),
        reason,
    };
    match tokio::time::timeout(deadline, conn.read_frame()).await {
        Err(_) => Err(fail("no acknowledgement before the timeout".into())),
        Ok(Err(e)) => Err(fail(e.to_string())),
        Ok(Ok(None)) => Err(fail("closed the connection".into())),
        Ok(Ok(Some(Frame::Ack { id, checksum })))
            if id == slice.id && checksum == slice.checksum =>
        {
            Ok(())
        }
        Ok(Ok(Some(Frame::Ack { .. }))) => {
            Err(fail("acknowledged another message or checksum".into()))
        }
        Ok(Ok(Some(Frame::Failed { node, reason, .. }))) => Err(Failure { node, reason }),
        Ok(Ok(Some(other))) => Err(fail(format!("answered {}", other.describe()))),
    }
}

/// Dials `node`, streams `slice` to it with `route` and `hops`, and waits for its acknowledgement.
pub(crate) async fn deliver(
    cluster: &Cluster,
    secret: &Secret,
    me: &str,
    node: &str,
    route: u8,
    hops: &[String],
    slice: &Slice,
) -> Result<(), Failure> {
    let mut conn = dial_name(cluster, node, secret, me)
        .await
        .map_err(|e| Failure {
            node: node.to_string(),
            reason: e.to_string(),
        })?;
    push(&mut conn, slice, route, hops, cluster.settings.chunk_size)
        .await
        .map_err(|e| Failure {
            node: node.to_string(),
            reason: e.to_string(),
        })?;
    // The whole subtree must finish before the ack: allow one timeout per hop.
    let deadline = Duration::from_millis(cluster.settings.io_timeout_ms) * (hops.len() as u32 + 1);
    await_ack(&mut conn, node, slice, deadline).await
}

/// Whether `node` answers an authenticated ping.
async fn alive(cluster: &Cluster, secret: &Secret, me: &str, node: &str) -> bool {
    match cluster.nodes.iter().find(|n| n.name == node) {
        Some(n) => crate::peer::ping(cluster, n, secret, me).await.is_ok(),
        None => false,
    }
}

/// One attempt of `algorithm` to `members`.
async fn attempt(
    cluster: &Cluster,
    secret: &Secret,
    me: &str,
    members: &[String],
    algorithm: Algorithm,
    whole: &Slice,
) -> Result<(), Failure> {
    match algorithm {
        Algorithm::Chain => {
            deliver(
                cluster,
                secret,
                me,
                &members[0],
                ROUTE_CHAIN,
                &members[1..],
                whole,
            )
            .await
        }
        Algorithm::Simple => {
            for node in members {
                deliver(cluster, secret, me, node, ROUTE_CHAIN, &[], whole).await?;
            }
            Ok(())
        }
        Algorithm::Mst => {
            for (child, hops) in tree_children(members) {
                deliver(cluster, secret, me, &child, ROUTE_TREE, &hops, whole).await?;
            }
            Ok(())
        }
        Algorithm::MultiChain => {
            let chains = cluster.settings.chains.clamp(1, members.len());
            let len = whole.data.len();
            let mut set = JoinSet::new();
            for c in 0..chains {
                let (start, end) = (len * c / chains, len * (c + 1) / chains);
                let data = whole.data.slice(start..end);
                let slice = Slice {
                    id: whole.id,
                    offset: start as u64,
                    total: whole.total,
                    checksum: crc32fast::hash(&data),
                    data,
                };
                let mut order = members.to_vec();
                order.rotate_left(members.len() * c / chains);
                let (cluster, secret, me) = (cluster.clone(), secret.clone(), me.to_string());
                set.spawn(async move {
                    deliver(
                        &cluster,
                        &secret,
                        &me,
                        &order[0],
                        ROUTE_CHAIN,
                        &order[1..],
                        &slice,
                    )
                    .await
                });
            }
            let mut first_failure = None;
            while let Some(joined) = set.join_next().await {
                let result = joined.unwrap_or_else(|e| {
                    Err(Failure {
                        node: "root".into(),
                        reason: e.to_string(),
                    })
                });
                if let Err(f) = result {
                    first_failure.get_or_insert(f);
                }
            }
            first_failure.map_or(Ok(()), Err)
        }
    }
}

/// Broadcasts `data` as message `id` to every node of `cluster`, from the root named `me`.
pub async fn broadcast(
    cluster: &Cluster,
    secret: &Secret,
    me: &str,
    id: u64,
    data: Bytes,
    algorithm: Algorithm,
) -> Result<Report, BroadcastError> {
    let members: Vec<String> = cluster.chain_nodes().map(|n| n.name.clone()).collect();
    broadcast_to(cluster, secret, me, id, data, algorithm, members).await
}

/// Broadcasts `data` as message `id` to `members` (node names, in chain order).
pub async fn broadcast_to(
    cluster: &Cluster,
    secret: &Secret,
    me: &str,
    id: u64,
    data: Bytes,
    algorithm: Algorithm,
    mut members: Vec<String>,
) -> Result<Report, BroadcastError> {
    let started = Instant::now();
    let whole = Slice {
        id,
        offset: 0,
        total: data.len() as u64,
        checksum: crc32fast::hash(&data),
        data,
    };
    let mut dropped = Vec::new();
    let mut attempts = 0;
    loop {
        if members.is_empty() {
            return Err(BroadcastError::NoNodes(dropped));
        }
        attempts += 1;
        match attempt(cluster, secret, me, &members, algorithm, &whole).await {
            Ok(()) => {
                return Ok(Report {
                    seconds: started.elapsed().as_secs_f64(),
                    dropped,
                    attempts,
                    nodes: members.len(),
                });
            }
            Err(Failure { node, reason }) => {
                if attempts > cluster.settings.retries {
                    return Err(BroadcastError::Failed {
                        node,
                        reason,
                        attempts,
                    });
                }
                tokio::time::sleep(Duration::from_millis(50 << (attempts - 1).min(6))).await;
                if members.contains(&node) && !alive(cluster, secret, me, &node).await {
                    members.retain(|m| m != &node);
                    dropped.push(node);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_children_cover_every_node_once_with_log_depth() {
        fn depth(hops: &[String]) -> usize {
            tree_children(hops)
                .iter()
                .map(|(_, sub)| 1 + depth(sub))
                .max()
                .unwrap_or(0)
        }
        fn all(hops: &[String], out: &mut Vec<String>) {
            for (child, sub) in tree_children(hops) {
                out.push(child);
                all(&sub, out);
            }
        }
        for n in [0usize, 1, 2, 3, 7, 8, 100] {
            let nodes: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
            let mut seen = Vec::new();
            all(&nodes, &mut seen);
            seen.sort();
            let mut want = nodes.clone();
            want.sort();
            assert_eq!(seen, want, "n = {n}");
            assert!(
                depth(&nodes) <= (n as f64 + 1.0).log2().ceil() as usize,
                "n = {n}"
            );
        }
    }
}
