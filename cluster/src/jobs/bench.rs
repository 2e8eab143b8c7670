//! The collectives benchmark of the daemons (`vocab cluster bench`, `bench-gather`): a job whose
//! root broadcasts or gathers bytes with the collectives of k-means on the team's chain and
//! trees and checks every copy ([`broadcast_checked`], [`gather_checked`]; any engine), and
//! [`Broadcaster`], the same on the worker daemons with their recovery.

use crate::jobs::error::JobError;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::collective::calibration::{Auto, Calibration};
use crate::collective::topology::tree::Tree;
use crate::collective::{Algorithm, BroadcastPlan, MAX_DATA, broadcast, gather};
use crate::engine::crew::{self, Attempt, Crew, DriverError};
use crate::engine::{EngineError, Job, Member, calibrate_links, decode, exit, hello, send_json};
use crate::jobs::place::{lists, plan_of, team_of};
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::transport::Transport;
use crate::net::transport::tcp::TcpTransport;

/// The tag of the benchmark's commands.
pub const TAG: &str = "bench";

/// What the root tells the members.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
enum Command {
    /// Receive a broadcast of `bytes` from the root (in rank order) and answer its CRC-32:
    /// the broadcast benchmark of the daemons ([`broadcast_checked`]).
    Broadcast {
        bytes: u64,
        algorithm: String,
        chunk: u64,
        chains: u64,
        /// Ranks in chain order (empty: rank order).
        order: Vec<usize>,
        /// Children of each rank in the `mst` tree (empty: the binomial tree).
        #[serde(default)]
        tree: Vec<Vec<usize>>,
    },
    /// Send a piece of `bytes` to the root up `tree` (children by rank; empty: directly), in
    /// the team of `order`: the gather benchmark of the daemons ([`gather_checked`]).
    Gather {
        bytes: u64,
        order: Vec<usize>,
        tree: Vec<Vec<usize>>,
    },
}

/// The benchmark at a member.
#[derive(Debug, Default)]
pub struct Bench;

impl Job for Bench {
    fn tag(&self) -> &'static str {
        TAG
    }

    fn serve(&mut self, member: &Member<'_>, body: &[u8]) -> Result<(), EngineError> {
        let transport = member.transport();
        match decode(0, body)? {
            Command::Broadcast {
                bytes,
                ref algorithm,
                chunk,
                chains,
                ref order,
                ref tree,
            } => {
                let plan = plan_of(algorithm, chunk, chains)?;
                let bytes = checked_size(bytes)?;
                let team = team_of(transport, order, tree, &[])?;
                let mut data = vec![0u8; bytes];
                broadcast(&team, plan, &mut data)?;
                let crc = crc32fast::hash(&data);
                gather(&team, &crc.to_le_bytes(), 4)?;
            }
            Command::Gather {
                bytes,
                ref order,
                ref tree,
            } => {
                let bytes = checked_size(bytes)?;
                let team = team_of(transport, order, &[], tree)?;
                gather(&team, &bench_piece(transport.rank(), bytes), MAX_DATA)?;
            }
        }
        Ok(())
    }
}

/// A benchmark size from the root, refused above what any step would move.
fn checked_size(bytes: u64) -> Result<usize, EngineError> {
    if bytes > MAX_DATA {
        return Err(JobError::Shape {
            got: usize::try_from(bytes).unwrap_or(usize::MAX),
            want: MAX_DATA as usize,
        }
        .into());
    }
    Ok(bytes as usize)
}

/// Broadcasts `data` from the root to every member with `plan`, down the chain `order` (ranks,
/// the root first; empty: rank order) or, for `mst`, `tree` (ranks; `None`: the binomial tree),
/// and checks every member's copy by its CRC-32; returns the seconds from the command to the
/// last check. Members must be in [`crate::engine::serve`].
pub fn broadcast_checked(
    transport: &dyn Transport,
    plan: BroadcastPlan,
    data: &[u8],
    order: &[usize],
    tree: Option<&Tree>,
) -> Result<f64, EngineError> {
    let started = Instant::now();
    let tree = lists(tree);
    let team = team_of(transport, order, &tree, &[])?;
    let command = Command::Broadcast {
        bytes: data.len() as u64,
        algorithm: plan.algorithm.name().into(),
        chunk: plan.chunk as u64,
        chains: plan.chains as u64,
        order: order.to_vec(),
        tree,
    };
    send_json(transport, TAG, &command)?;
    let mut copy = data.to_vec();
    broadcast(&team, plan, &mut copy)?;
    let want = crc32fast::hash(data);
    let crcs = gather(&team, &want.to_le_bytes(), 4)?.unwrap_or_default();
    for (j, crc) in crcs.iter().enumerate() {
        if crc.as_slice() != want.to_le_bytes() {
            return Err(EngineError::Malformed {
                rank: order.get(j).copied().unwrap_or(j),
                reason: format!("its copy of the broadcast has CRC {crc:02x?}, not {want:08x}"),
            });
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The piece rank `rank` sends in [`gather_checked`].
fn bench_piece(rank: usize, bytes: usize) -> Vec<u8> {
    (0..bytes)
        .map(|i| (i.wrapping_mul(31).wrapping_add(rank.wrapping_mul(7)) % 251) as u8)
        .collect()
}

/// Gathers a piece of `bytes` from every member at the root, in the team of `order` (ranks,
/// the root first; empty: rank order), up `tree` (ranks; `None`: directly), and checks every
/// piece; returns the seconds from the command to the last piece. Members must be in [`crate::engine::serve`].
pub fn gather_checked(
    transport: &dyn Transport,
    bytes: u64,
    order: &[usize],
    tree: Option<&Tree>,
) -> Result<f64, EngineError> {
    let started = Instant::now();
    let tree = lists(tree);
    let team = team_of(transport, order, &[], &tree)?;
    let command = Command::Gather {
        bytes,
        order: order.to_vec(),
        tree,
    };
    send_json(transport, TAG, &command)?;
    let pieces = gather(&team, &[], MAX_DATA)?.unwrap_or_default();
    for (j, piece) in pieces.iter().enumerate().skip(1) {
        let rank = team.order()[j];
        if *piece != bench_piece(rank, bytes as usize) {
            return Err(EngineError::Malformed {
                rank,
                reason: format!(
                    "its gathered piece of {} bytes is not what it sent",
                    piece.len()
                ),
            });
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// What a broadcast of [`Broadcaster`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct BroadcastReport {
    /// Seconds of the attempt that succeeded, from the command to the last checked copy.
    pub seconds: f64,
    /// Nodes dropped because they were dead.
    pub dropped: Vec<String>,
    /// Attempts made (1 when nothing failed).
    pub attempts: u32,
    /// Workers that hold the message.
    pub nodes: usize,
}

/// The daemons' broadcast benchmark: a team of the driver and the workers on which the
/// driver broadcasts messages with the collectives of k-means, every copy checked by its
/// CRC-32, with the same recovery as [`crate::jobs::kmeans::Driver`].
pub struct Broadcaster {
    crew: Crew,
    transport: Option<TcpTransport>,
    /// What [`Broadcaster::calibrate`] chose.
    calibrated: Option<Calibrated>,
}

/// A chain and trees chosen on a team, by the names of its members then.
#[derive(Debug, Clone)]
struct Calibrated {
    names: Vec<String>,
    order: Vec<usize>,
    broadcast_tree: Tree,
    gather_tree: Tree,
}

/// The chain and the trees in ranks of a team.
type Placed = (Vec<usize>, Option<Tree>, Option<Tree>);

impl Calibrated {
    /// The chain and trees on the team of `now` (names by rank), while it has exactly the
    /// members calibrated; else rank order, the binomial tree and the direct gather.
    fn on(this: Option<&Self>, now: &[String]) -> Placed {
        let placed = this.and_then(|c| {
            // Where each current rank stood in the calibration.
            let at: Vec<usize> = now
                .iter()
                .map(|n| c.names.iter().position(|m| m == n))
                .collect::<Option<_>>()?;
            if at.len() != c.names.len() {
                return None;
            }
            let mut rank_now = vec![0; at.len()];
            for (r, &was) in at.iter().enumerate() {
                rank_now[was] = r;
            }
            let order = c.order.iter().map(|&was| rank_now[was]).collect();
            let broadcast = c.broadcast_tree.relabel(&at).ok()?;
            let gather = c.gather_tree.relabel(&at).ok()?;
            Some((order, Some(broadcast), Some(gather)))
        });
        placed.unwrap_or((Vec::new(), None, None))
    }
}

impl std::fmt::Debug for Broadcaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broadcaster")
            .field("members", &self.crew.members)
            .finish()
    }
}

/// Starts a team for broadcasts: every member's hello.
fn start_plain(transport: TcpTransport) -> Result<TcpTransport, Attempt> {
    let names = transport.names().to_vec();
    match hello(&transport) {
        Ok(_) => Ok(transport),
        Err(e) => Err(crew::classify(e, &names)),
    }
}

impl Broadcaster {
    /// Forms a team of every node of `cluster` (unreachable nodes are dropped).
    pub fn connect(cluster: Cluster, secret: Secret) -> Result<Self, DriverError> {
        let mut b = Self {
            crew: Crew::new(cluster, secret)?,
            transport: None,
            calibrated: None,
        };
        b.crew.recover(
            "forming the team",
            &mut b.transport,
            start_plain,
            |_| Ok(()),
        )?;
        Ok(b)
    }

    /// Members dropped so far.
    pub fn dropped(&self) -> &[String] {
        &self.crew.dropped
    }

    /// Measures every link of the team and chooses the chain for `auto`; returns the
    /// calibration with the members' names by rank (the driver first).
    pub fn calibrate(&mut self, auto: Auto) -> Result<(Calibration, Vec<String>), DriverError> {
        let chunk = self.crew.cluster.settings.chunk_size;
        let done = self
            .crew
            .recover("calibration", &mut self.transport, start_plain, |t| {
                calibrate_links(t, auto.probe)
            })?;
        let (links, seconds) = done.value;
        let names = self.crew.names();
        let calibration = Calibration::choose(links, seconds, auto, chunk);
        self.calibrated = Some(Calibrated {
            names: names.clone(),
            order: calibration.order.clone(),
            broadcast_tree: calibration.broadcast_tree.clone(),
            gather_tree: calibration.gather_tree.clone(),
        });
        Ok((calibration, names))
    }

    /// Broadcasts `data` to every worker by `algorithm` (chunks and chains from the cluster
    /// file), down the chain (or, for `mst`, the tree) of the last
    /// [`Broadcaster::calibrate`] while its members are all in the team, else in the cluster
    /// file's order; a member lost on the way is dropped and the broadcast redone.
    pub fn broadcast(
        &mut self,
        data: &[u8],
        algorithm: Algorithm,
    ) -> Result<BroadcastReport, DriverError> {
        let plan = BroadcastPlan {
            algorithm,
            chunk: self.crew.cluster.settings.chunk_size,
            chains: self.crew.cluster.settings.chains,
        };
        self.timed("broadcast", |t, (order, tree, _)| {
            broadcast_checked(t, plan, data, &order, tree.as_ref())
        })
    }

    /// Gathers a piece of `bytes` from every worker at the driver, up the gather tree of the
    /// last [`Broadcaster::calibrate`] while its members are all in the team, else directly;
    /// every piece checked. A member lost on the way is dropped and the gather redone.
    pub fn gather(&mut self, bytes: u64) -> Result<BroadcastReport, DriverError> {
        self.timed("gather", |t, (order, _, tree)| {
            gather_checked(t, bytes, &order, tree.as_ref())
        })
    }

    /// Runs the collective `what` (seconds) with recovery, on the calibrated layout of the
    /// current team.
    fn timed(
        &mut self,
        what: &str,
        run: impl Fn(&TcpTransport, Placed) -> Result<f64, EngineError>,
    ) -> Result<BroadcastReport, DriverError> {
        let calibrated = self.calibrated.as_ref();
        let done = self
            .crew
            .recover(what, &mut self.transport, start_plain, |t| {
                run(t, Calibrated::on(calibrated, t.names()))
            })?;
        Ok(BroadcastReport {
            seconds: done.value,
            dropped: done.dropped,
            attempts: done.attempts,
            nodes: self.crew.members.len(),
        })
    }
}

impl Drop for Broadcaster {
    fn drop(&mut self) {
        if let Some(t) = self.transport.take() {
            let _ = exit(&t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::Worker;

    const SECRET: &[u8] = b"driver-test-secret-0123";

    /// `n` in-process workers on loopback, served by `rt`.
    fn workers(rt: &tokio::runtime::Runtime, n: usize) -> (Cluster, Vec<std::sync::Arc<Worker>>) {
        let settings = "chunk_size = 4096\nretries = 2\nconnect_timeout_ms = 500\n";
        rt.block_on(crate::worker::start_workers(n, 2, settings, SECRET))
    }

    use crate::net::transport::tcp::test_runtime as runtime;

    fn message(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn every_algorithm_delivers_the_whole_message_to_every_worker() {
        let rt = runtime();
        let settings = "chunk_size = 65536\nchains = 3\nretries = 2\n";
        let (cluster, _workers) = rt.block_on(crate::worker::start_workers(5, 2, settings, SECRET));
        let mut b = Broadcaster::connect(cluster, Secret::from_bytes(SECRET)).expect("connect");
        for (i, algorithm) in [
            Algorithm::Chain,
            Algorithm::Simple,
            Algorithm::Mst,
            Algorithm::MultiChain,
        ]
        .into_iter()
        .enumerate()
        {
            // Every copy is checked by its CRC at the root: a report means all arrived whole.
            let report = b
                .broadcast(&message(1_000_003 + i), algorithm)
                .expect("broadcast");
            assert_eq!(
                (report.nodes, report.attempts, report.dropped.len()),
                (5, 1, 0),
                "{algorithm:?}"
            );
        }
        // An empty message is a message too.
        b.broadcast(&[], Algorithm::Chain).expect("empty");
    }

    #[test]
    fn a_dead_worker_is_dropped_or_without_retries_named() {
        let rt = runtime();
        // The ghost's port stays bound while the workers take theirs, so none of them gets it;
        // closed after, nothing listens there.
        let ghost = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let dead = ghost.local_addr().expect("addr");
        let settings = format!(
            "chunk_size = 65536\nretries = 2\nconnect_timeout_ms = 500\n\
             [[nodes]]\nname = \"ghost\"\naddress = \"{dead}\"\nrack = \"r0\"\n"
        );
        let (cluster, _workers) =
            rt.block_on(crate::worker::start_workers(3, 1, &settings, SECRET));
        drop(ghost);
        let mut b =
            Broadcaster::connect(cluster.clone(), Secret::from_bytes(SECRET)).expect("connect");
        assert_eq!(b.dropped(), ["ghost".to_string()]);
        let report = b
            .broadcast(&message(300_000), Algorithm::Chain)
            .expect("broadcast");
        assert_eq!(report.nodes, 3);
        // Without retries the same fault is an error naming the node.
        let mut strict = cluster.clone();
        strict.settings.retries = 0;
        let err = Broadcaster::connect(strict, Secret::from_bytes(SECRET)).expect_err("strict");
        assert!(err.to_string().contains("ghost"), "{err}");
    }

    #[test]
    fn a_driver_with_the_wrong_secret_cannot_form_a_team() {
        let rt = runtime();
        let (cluster, _workers) = workers(&rt, 2);
        let outsider = Secret::from_bytes(b"not-the-cluster-secret!!".to_vec());
        let err = Broadcaster::connect(cluster, outsider).expect_err("refused");
        assert!(err.to_string().contains("w0"), "{err}");
    }
}
