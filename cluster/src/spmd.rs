//! The SPMD k-means engine: every member of a [`Transport`] runs this code; member 0 (rank 0
//! under MPI) drives and maps its share, the others [`serve`].
//!
//! One iteration ([`Root::step`]), all members together:
//! 1. the root broadcasts a [`Command::Step`] (binomial tree), then the centroids down the
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

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use vocab_pipeline::kmeans::partial::inertia_of;
use vocab_pipeline::kmeans::{
    Assignment, Centroids, Engine, Kernel, StepReport, StepResult, fixed_scale,
};
use vocab_pipeline::partition::{Manifest, read_manifest};

use crate::collective::aggregate::{place_result, range_of};
pub use crate::collective::calibration::{Auto, Calibration, chain_order, labels};
use crate::collective::topology::tree::Tree;
use crate::collective::topology::{self, Links};
use crate::collective::{Algorithm, Probe, calibrate};
use crate::collective::{
    BroadcastPlan, CollectiveError, MAX_CONTROL, Team, broadcast, broadcast_message, gather,
    reduce_ranges,
};
use crate::net::messages::BUILD;
use crate::net::transport::Transport;
use crate::share::{Mapped, Share, ShareError};

/// Errors of the SPMD engine.
#[derive(Debug, Error)]
pub enum EngineError {
    /// A collective failed.
    #[error(transparent)]
    Collective(#[from] CollectiveError),
    /// A member cannot take part (other build, unreadable or other partitions).
    #[error("rank {rank} on {host} refused: {reason}")]
    Refused {
        /// The rank.
        rank: usize,
        /// Its host.
        host: String,
        /// Why.
        reason: String,
    },
    /// A message that does not parse: the members run different builds or a bug.
    #[error("malformed message from rank {rank}: {reason}")]
    Malformed {
        /// The sender.
        rank: usize,
        /// What is wrong.
        reason: String,
    },
    /// The members' vectors do not add up to the manifest.
    #[error("the ranks hold {got} vectors, the partition manifest lists {want}")]
    Count {
        /// Vectors held.
        got: u64,
        /// Vectors listed.
        want: u64,
    },
    /// The data's values span too wide a range for exact fixed-point sums.
    #[error(transparent)]
    Range(#[from] vocab_pipeline::kmeans::partial::RangeError),
    /// The k-means computation refused the data (first centroids from the members' rows).
    #[error(transparent)]
    KMeans(#[from] vocab_pipeline::kmeans::KMeansError),
    /// A step before any load.
    #[error("rank {0} was asked to step with no partitions loaded")]
    NotLoaded(usize),
    /// No member holds a partition (dealt by where partitions are).
    #[error(
        "no member holds {file}: none of the {hosts} members' folders at {dir} has it whole \
         (describe the photos again: remove the features step's folder)"
    )]
    Unplaced {
        /// The partition's file.
        file: String,
        /// The folder, as members see it.
        dir: String,
        /// Members asked.
        hosts: usize,
    },
    /// A centroid set that does not match the job.
    #[error("centroids of {got} values, {want} expected")]
    Shape {
        /// Values received.
        got: usize,
        /// Values expected.
        want: usize,
    },
}

/// What the root tells the members.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) enum Command {
    /// Cache a share of these partitions.
    Load {
        job: u64,
        dir: String,
        manifest: u32,
        /// Ranks in chain order.
        order: Vec<usize>,
        /// Children of each rank in the `mst` broadcast tree (empty: the binomial tree).
        #[serde(default)]
        broadcast_tree: Vec<Vec<usize>>,
        /// Children of each rank in the stage-3 gather tree (empty: straight to the root).
        #[serde(default)]
        gather_tree: Vec<Vec<usize>>,
        /// Whether the root maps a share (else partitions and ranges go to the others).
        root_maps: bool,
        build: String,
        /// The partitions of each rank, where they lie (empty: even blocks in chain order).
        #[serde(default)]
        deal: Vec<Vec<u32>>,
    },
    /// Run one iteration; the centroids follow as a broadcast.
    Step {
        iteration: u64,
        k: u64,
        dims: u64,
        scale: i32,
        stage1: bool,
        int8: bool,
        /// Pruned assignment (bounds kept at each member across iterations).
        #[serde(default)]
        prune: bool,
        /// Approximate assignment: lists searched per vector (0: exact).
        #[serde(default)]
        approx_probes: u32,
        /// Approximate assignment: lists of the index (0: `sqrt(k)`).
        #[serde(default)]
        approx_lists: u32,
        algorithm: String,
        chunk: u64,
        chains: u64,
    },
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
    /// Measure every link ([`calibrate`]).
    Calibrate { small: u64, pings: u64, large: u64 },
    /// Start a photo job: its settings and listing follow as a broadcast of `job_bytes`, then
    /// the vocabulary's `vocabulary_bytes` ([`crate::photos`]).
    Photos {
        job_bytes: u64,
        vocabulary_bytes: u64,
        build: String,
    },
    /// Do the photos `ranges[rank]` of the photo job and gather the results at the root.
    Shard {
        ranges: Vec<(u64, u64)>,
        /// Ranges of the round after, by rank, to start on early (empty: none).
        #[serde(default)]
        next: Vec<(u64, u64)>,
    },
    /// Cut the patches kept by a features job into partitions ([`crate::born`]).
    Cut(crate::born::Cut),
    /// Say which partitions of the manifest with this digest the member's folder holds.
    Holdings { dir: String, manifest: u32 },
    /// Send the rows of these global indices that the member's share holds (after `Load`).
    Rows { indices: Vec<u64> },
    /// Make partitions born on the nodes again from their photos ([`crate::born::Remake`]).
    Remake(crate::born::Remake),
    /// Leave [`serve`].
    Exit,
}

/// A member's first words: where it runs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hello {
    host: String,
    build: String,
}

/// A member's answer to [`Command::Load`].
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadReply {
    rows: u64,
    max_abs_bits: u32,
    magnitudes: Vec<u64>,
    error: Option<String>,
}

/// A member's stage-3 statistics (its reduced range follows in the same gathered piece).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StepStats {
    broadcast_seconds: f64,
    map_seconds: f64,
    stage1_seconds: f64,
    mapped_at: f64,
    reduced_at: f64,
    stage2_bytes: u64,
    tasks: u64,
    kept: u64,
    /// Inertia per map unit: (key, f64 bits).
    units: Vec<(u64, u64)>,
}

/// Largest centroid set or stage-3 piece a member accepts (bytes): far above any real job (the
/// paper's 1M x 512 centroids are 2 GiB), it only stops a corrupt size from allocating.
const MAX_STEP_BYTES: u64 = 1 << 38;

/// How the root runs a job.
#[derive(Debug, Clone)]
pub struct Options {
    /// The partition folder, as every rank sees it.
    pub dir: String,
    /// The centroid broadcast.
    pub plan: BroadcastPlan,
    /// Stage-1 aggregation.
    pub stage1: bool,
    /// How the members assign their vectors.
    pub assignment: Assignment,
    /// Host name -> rack; hosts not listed are racks of their own.
    pub racks: BTreeMap<String, String>,
    /// The root maps a share of the partitions and reduces a centroid range like every member
    /// (an MPI rank 0); else it only drives (the TCP driver) and needs no partitions.
    pub root_maps: bool,
    /// Measure the links and build the chain from them (`--order auto`) instead of from racks.
    pub auto: Option<Auto>,
    /// Links measured before (a saved calibration): with `auto`, used instead of measuring
    /// when they cover every member (labelled by [`labels`]); measured again once a broadcast
    /// runs more than 20% slower than the first one on them.
    pub known: Option<topology::Saved>,
    /// How partitions are dealt to the members.
    pub deal: Deal,
    /// With [`Deal::Found`]: how partitions born on the nodes are made again from their photos
    /// when no member holds them (a node lost, its folder gone); `None`: such a partition is
    /// an error.
    pub remake: Option<std::sync::Arc<crate::born::Recipes>>,
}

/// How a job's partitions are dealt to the members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Deal {
    /// Even blocks in chain order: every member reads the same folder (a shared filesystem).
    #[default]
    Blocks,
    /// The partitions of each rank, by rank (born there: [`crate::born::Born::by_rank`]).
    ByRank(Vec<Vec<u32>>),
    /// Where they are: every member says which partitions its folder holds (`dir` as it sees
    /// it, `{rank}` its rank), and each partition goes to a holder with the fewest so far.
    Found,
}

/// Measures every link of the team from the root (members must be in [`serve`]).
pub fn calibrate_links(
    transport: &dyn Transport,
    probe: Probe,
) -> Result<(Links, f64), EngineError> {
    let started = Instant::now();
    let control = Team::ranks(transport);
    let command = Command::Calibrate {
        small: probe.small as u64,
        pings: probe.pings as u64,
        large: probe.large as u64,
    };
    broadcast_message(&control, Some(&encode(&command)))?;
    let links = calibrate(&control, probe)?.unwrap_or(Links {
        latency: Vec::new(),
        bandwidth: Vec::new(),
    });
    links.check().map_err(|e| EngineError::Malformed {
        rank: 0,
        reason: vocab_pipeline::chain(&e),
    })?;
    Ok((links, started.elapsed().as_secs_f64()))
}

/// Fault injection for tests: exit the process in the middle of an iteration.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Exit (status 3) after the map tasks of this iteration, before stage 2.
    pub exit_at_step: Option<u64>,
    /// Exit (status 3) when told to do the photos of this round (counted from 1) of a photo job.
    pub exit_at_round: Option<u64>,
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Plain data structs and strings always serialise.
    serde_json::to_vec(value).unwrap_or_default()
}

pub(crate) fn decode<T: for<'de> Deserialize<'de>>(
    rank: usize,
    bytes: &[u8],
) -> Result<T, EngineError> {
    serde_json::from_slice(bytes).map_err(|e| EngineError::Malformed {
        rank,
        reason: vocab_pipeline::chain(&e),
    })
}

/// Partitions of the member at chain position `j` of `w` out of `p`: a contiguous, even block
/// of the mapping members (all, or all but the root).
fn share_of(p: usize, j: usize, w: usize, root_maps: bool) -> Vec<u32> {
    let Some((j, w)) = mapper(j, w, root_maps) else {
        return Vec::new();
    };
    (p * j / w..p * (j + 1) / w).map(|i| i as u32).collect()
}

/// Centroid range the member at chain position `j` of `w` reduces.
fn range_at(k: usize, j: usize, w: usize, root_maps: bool) -> std::ops::Range<usize> {
    mapper(j, w, root_maps).map_or(0..0, |(j, w)| range_of(k, w, j))
}

/// Position among the mapping members, and their number.
fn mapper(j: usize, w: usize, root_maps: bool) -> Option<(usize, usize)> {
    match (root_maps, j) {
        (true, _) => Some((j, w)),
        (false, 0) => None,
        (false, _) => Some((j - 1, w - 1)),
    }
}

/// What a member knows of a loaded job.
#[derive(Debug, Clone)]
struct Loaded {
    order: Vec<usize>,
    broadcast_tree: Vec<Vec<usize>>,
    gather_tree: Vec<Vec<usize>>,
    root_maps: bool,
}

/// Where the members stand: the chain (ranks, root first) and the measured trees (ranks; `None`:
/// the binomial tree, the direct gather).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Layout {
    order: Vec<usize>,
    broadcast_tree: Option<Tree>,
    gather_tree: Option<Tree>,
}

impl Layout {
    /// The chain and trees a calibration chose.
    fn chosen(c: &Calibration) -> Self {
        Self {
            order: c.order.clone(),
            broadcast_tree: Some(c.broadcast_tree.clone()),
            gather_tree: Some(c.gather_tree.clone()),
        }
    }

    /// The team of the transport's members so placed.
    fn team<'t>(&self, transport: &'t dyn Transport) -> Result<Team<'t>, EngineError> {
        Ok(Team::ordered(transport, self.order.clone())?
            .with_trees(self.broadcast_tree.as_ref(), self.gather_tree.as_ref())?)
    }
}

/// A tree's children lists for a command (none: empty).
fn lists(tree: Option<&Tree>) -> Vec<Vec<usize>> {
    tree.map(|t| t.children_lists().to_vec())
        .unwrap_or_default()
}

/// The team of ranks in `order` with the trees of a command (children by rank; empty lists:
/// the fixed trees), each checked to span the team from the root.
fn team_of<'t>(
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
fn plan_of(algorithm: &str, chunk: u64, chains: u64) -> Result<BroadcastPlan, EngineError> {
    Ok(BroadcastPlan {
        algorithm: Algorithm::from_name(algorithm).ok_or_else(|| EngineError::Malformed {
            rank: 0,
            reason: format!("unknown broadcast algorithm {algorithm}"),
        })?,
        chunk: usize::try_from(chunk).unwrap_or(usize::MAX),
        chains: usize::try_from(chains).unwrap_or(usize::MAX),
    })
}

/// A member's part of one iteration: the centroid broadcast, map, stage 1 and stage 2; returns
/// the stage-3 piece (statistics, then the reduced range's counts and means).
fn member_step(
    team: &Team<'_>,
    share: Option<&Share>,
    root_maps: bool,
    command: &Command,
    centroids: Option<&Centroids>,
    received: Instant,
    faults: Faults,
) -> Result<Vec<u8>, EngineError> {
    let Command::Step {
        iteration,
        k,
        dims,
        scale,
        stage1,
        int8,
        prune,
        approx_probes,
        approx_lists,
        ref algorithm,
        chunk,
        chains,
    } = *command
    else {
        return Err(EngineError::Malformed {
            rank: 0,
            reason: "not a step".into(),
        });
    };
    let (k, dims) = (k as usize, dims as usize);
    let values = k
        .checked_mul(dims)
        .filter(|&v| v > 0 && v as u64 <= MAX_STEP_BYTES / 4);
    let Some(values) = values else {
        return Err(EngineError::Shape {
            got: 0,
            want: k.saturating_mul(dims),
        });
    };
    let plan = plan_of(algorithm, chunk, chains)?;
    let mut bytes = match centroids {
        Some(c) => c.as_slice().iter().flat_map(|v| v.to_le_bytes()).collect(),
        None => vec![0u8; values * 4],
    };
    broadcast(team, plan, &mut bytes)?;
    let broadcast_seconds = received.elapsed().as_secs_f64();
    let owned;
    let centroids = match centroids {
        Some(c) => c,
        None => {
            owned = Centroids::new(
                bytes
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
                dims,
            );
            &owned
        }
    };
    drop(bytes);
    let (w, me) = (team.size(), team.me());
    let Some(share) = share.filter(|_| mapper(me, w, root_maps).is_some()) else {
        // A root that only drives: no map, no range; its piece is empty statistics.
        let stats = encode(&StepStats {
            broadcast_seconds,
            ..StepStats::default()
        });
        let mut piece = (stats.len() as u64).to_le_bytes().to_vec();
        piece.extend_from_slice(&stats);
        return Ok(piece);
    };
    let Mapped {
        partials,
        kept,
        tasks,
        map_seconds,
        stage1_seconds,
    } = share.map(
        centroids,
        scale,
        if approx_probes > 0 {
            Assignment::Approx {
                lists: approx_lists,
                probes: approx_probes,
            }
        } else {
            Assignment::new(prune, if int8 { Kernel::Int8 } else { Kernel::F32 })
        },
        stage1,
        iteration,
    );
    if faults.exit_at_step == Some(iteration) {
        eprintln!(
            "rank {}: exiting in iteration {iteration} (fault injection)",
            team.transport().rank()
        );
        std::process::exit(3);
    }
    let mapped_at = received.elapsed().as_secs_f64();
    let mappers = if root_maps {
        Team::subset(team.transport(), team.order().to_vec())?
    } else {
        Team::subset(team.transport(), team.order()[1..].to_vec())?
    };
    let (sum, stage2_bytes) = reduce_ranges(&mappers, &partials, k, dims, plan.chunk)?;
    let reduced_at = received.elapsed().as_secs_f64();
    let stats = StepStats {
        broadcast_seconds,
        map_seconds,
        stage1_seconds,
        mapped_at,
        reduced_at,
        stage2_bytes,
        tasks: tasks as u64,
        kept: kept as u64,
        units: partials
            .iter()
            .flat_map(|p| p.units.iter().map(|&(key, v)| (key, v.to_bits())))
            .collect(),
    };
    let stats = encode(&stats);
    let mut piece = (stats.len() as u64).to_le_bytes().to_vec();
    piece.extend_from_slice(&stats);
    piece.extend_from_slice(&sum.encode_result(scale));
    Ok(piece)
}

/// Serves the root's commands until it says [`Command::Exit`] (every rank but 0 calls this).
pub fn serve(transport: &dyn Transport, faults: Faults) -> Result<(), EngineError> {
    serve_cached(transport, faults, &mut None)
}

/// [`serve`] with the share of an earlier team of the same job in `cache` (its partitions are
/// not reopened); the share in use stays there when the team ends, even by an error.
pub fn serve_cached(
    transport: &dyn Transport,
    faults: Faults,
    cache: &mut Option<Share>,
) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    let me = transport.rank();
    let hello = Hello {
        host: transport.host(),
        build: BUILD.into(),
    };
    gather(&control, &encode(&hello), MAX_CONTROL)?;
    let share = cache;
    let mut loaded: Option<Loaded> = None;
    let mut photos: Option<std::sync::Arc<crate::photos::Work>> = None;
    let mut ahead: Option<crate::photos::Ahead> = None;
    let mut rounds = 0u64;
    loop {
        let bytes = broadcast_message(&control, None)?;
        let received = Instant::now();
        let command: Command = decode(0, &bytes)?;
        match command {
            Command::Load {
                job,
                ref dir,
                manifest,
                order: ref chain,
                ref broadcast_tree,
                ref gather_tree,
                root_maps,
                ref build,
                ref deal,
            } => {
                let opened = if *build != BUILD {
                    Err(format!("it runs {BUILD}, the root runs {build}"))
                } else {
                    Team::ordered(transport, chain.clone())
                        .map_err(|e| vocab_pipeline::chain(&e))
                        .and_then(|team| {
                            let at = Placement {
                                dir,
                                digest: manifest,
                                root_maps,
                                deal,
                            };
                            open_share(&team, job, &at, share.as_ref())
                                .map_err(|e| vocab_pipeline::chain(&e))
                        })
                };
                let reply = match opened {
                    Ok(s) => {
                        let reply = LoadReply {
                            rows: s.rows(),
                            max_abs_bits: s.max_abs().to_bits(),
                            magnitudes: s.magnitudes(),
                            error: None,
                        };
                        *share = Some(s);
                        loaded = Some(Loaded {
                            order: chain.clone(),
                            broadcast_tree: broadcast_tree.clone(),
                            gather_tree: gather_tree.clone(),
                            root_maps,
                        });
                        reply
                    }
                    Err(e) => {
                        *share = None;
                        loaded = None;
                        LoadReply {
                            rows: 0,
                            max_abs_bits: 0,
                            magnitudes: Vec::new(),
                            error: Some(e),
                        }
                    }
                };
                gather(&control, &encode(&reply), MAX_CONTROL)?;
            }
            Command::Step { .. } => {
                let (Some(s), Some(job)) = (share.as_ref(), loaded.as_ref()) else {
                    return Err(EngineError::NotLoaded(me));
                };
                let team = team_of(transport, &job.order, &job.broadcast_tree, &job.gather_tree)?;
                let piece = member_step(
                    &team,
                    Some(s),
                    job.root_maps,
                    &command,
                    None,
                    received,
                    faults,
                )?;
                gather(&team, &piece, MAX_STEP_BYTES)?;
            }
            Command::Broadcast {
                bytes,
                ref algorithm,
                chunk,
                chains,
                ref order,
                ref tree,
            } => {
                let plan = plan_of(algorithm, chunk, chains)?;
                if bytes > MAX_STEP_BYTES {
                    return Err(EngineError::Shape {
                        got: usize::try_from(bytes).unwrap_or(usize::MAX),
                        want: MAX_STEP_BYTES as usize,
                    });
                }
                let team = team_of(transport, order, tree, &[])?;
                let mut data = vec![0u8; bytes as usize];
                broadcast(&team, plan, &mut data)?;
                let crc = crc32fast::hash(&data);
                gather(&team, &crc.to_le_bytes(), 4)?;
            }
            Command::Gather {
                bytes,
                ref order,
                ref tree,
            } => {
                if bytes > MAX_STEP_BYTES {
                    return Err(EngineError::Shape {
                        got: usize::try_from(bytes).unwrap_or(usize::MAX),
                        want: MAX_STEP_BYTES as usize,
                    });
                }
                let team = team_of(transport, order, &[], tree)?;
                gather(&team, &bench_piece(me, bytes as usize), MAX_STEP_BYTES)?;
            }
            Command::Calibrate {
                small,
                pings,
                large,
            } => {
                let size = |v: u64| {
                    usize::try_from(v)
                        .unwrap_or(usize::MAX)
                        .min(MAX_CONTROL as usize)
                };
                let probe = Probe {
                    small: size(small),
                    pings: size(pings).min(1000),
                    large: size(large),
                };
                calibrate(&control, probe)?;
            }
            Command::Photos {
                job_bytes,
                vocabulary_bytes,
                ref build,
            } => {
                ahead = None;
                photos = crate::photos::serve_job(transport, job_bytes, vocabulary_bytes, build)?;
            }
            Command::Shard {
                ref ranges,
                ref next,
            } => {
                rounds += 1;
                if faults.exit_at_round == Some(rounds) {
                    eprintln!("rank {me}: exiting in photo round {rounds} (fault injection)");
                    std::process::exit(3);
                }
                crate::photos::serve_shard(transport, photos.as_ref(), &mut ahead, ranges, next)?;
            }
            Command::Holdings { ref dir, manifest } => {
                let held = holdings(dir, transport, manifest);
                gather(&control, &encode(&held), MAX_CONTROL)?;
            }
            Command::Rows { ref indices } => {
                let piece = share.as_ref().map_or_else(Vec::new, |s| s.rows_at(indices));
                gather(&control, &piece, MAX_STEP_BYTES)?;
            }
            Command::Remake(ref remake) => {
                let error = crate::born::remake_here(transport, remake).err();
                gather(&control, &encode(&error), MAX_CONTROL)?;
            }
            Command::Cut(ref cut) => {
                // A round computed ahead must be in before the kept records are counted.
                if let Some(a) = ahead.take() {
                    let _ = a.wait();
                }
                crate::born::serve(transport, photos.as_ref(), cut)?;
            }
            Command::Exit => return Ok(()),
        }
    }
}

/// Opens this member's share of the partitions in `dir` (its block in chain order).
/// Where a member finds its share of a job's partitions.
struct Placement<'a> {
    /// The folder as every member sees it (`{rank}`: the member's rank).
    dir: &'a str,
    /// The manifest's digest at the root.
    digest: u32,
    root_maps: bool,
    /// Partitions by rank (empty: even blocks in chain order).
    deal: &'a [Vec<u32>],
}

fn open_share(
    team: &Team<'_>,
    job: u64,
    at: &Placement<'_>,
    previous: Option<&Share>,
) -> Result<Share, ShareError> {
    let dir = crate::born::my_dir(at.dir, team.transport());
    let manifest = read_manifest(std::path::Path::new(&dir)).map_err(ShareError::Manifest)?;
    if manifest.digest() != at.digest {
        return Err(ShareError::Digest {
            dir,
            theirs: manifest.digest(),
            root: at.digest,
        });
    }
    let indices = if at.deal.is_empty() {
        share_of(
            manifest.partitions.len(),
            team.me(),
            team.size(),
            at.root_maps,
        )
    } else {
        let rank = team.transport().rank();
        at.deal.get(rank).cloned().unwrap_or_default()
    };
    Share::open(job, &dir, &manifest, &indices, previous)
}

/// Checks a deal by location: one list per rank, every partition once, none at a root that
/// does not map.
fn check_deal(deal: &[Vec<u32>], parts: usize, size: usize, root_maps: bool) -> Result<(), String> {
    if deal.len() != size {
        return Err(format!(
            "a deal for {} ranks in a team of {size}",
            deal.len()
        ));
    }
    if !root_maps && deal.first().is_some_and(|d| !d.is_empty()) {
        return Err("a deal that gives partitions to a root that does not map".into());
    }
    let mut seen = vec![false; parts];
    for &p in deal.iter().flatten() {
        match seen.get_mut(p as usize) {
            Some(s) if !*s => *s = true,
            _ => {
                return Err(format!(
                    "a deal that gives partition {p} twice or of {parts}"
                ));
            }
        }
    }
    match seen.iter().position(|s| !s) {
        Some(p) => Err(format!("a deal that leaves partition {p} out")),
        None => Ok(()),
    }
}

/// What a broadcast of `seconds` means against `expected`: the new expectation, and whether
/// the links are to be measured again (more than 20% and 20 ms slower than expected).
fn slowed(expected: Option<f64>, seconds: f64) -> (Option<f64>, bool) {
    match expected {
        None => (Some(seconds), false),
        Some(e) => (Some(e), seconds > e * 1.2 + 0.02),
    }
}

/// Measures the links and chooses the chain (`--order auto`).
fn measure(
    transport: &dyn Transport,
    auto: Auto,
    chunk: usize,
) -> Result<Calibration, EngineError> {
    let (links, seconds) = calibrate_links(transport, auto.probe)?;
    Ok(Calibration::choose(links, seconds, auto, chunk))
}

/// The partitions of the manifest with `digest` that this member's folder `dir` (see
/// [`crate::born::member_dir`]) holds: its manifest has that digest and each file's header and
/// length are its entry's (the payload is verified when the partition is loaded).
fn holdings(dir: &str, transport: &dyn Transport, digest: u32) -> Vec<u32> {
    let dir = crate::born::my_dir(dir, transport);
    let dir = std::path::Path::new(&dir);
    let Ok(manifest) = read_manifest(dir) else {
        return Vec::new();
    };
    if manifest.digest() != digest {
        return Vec::new();
    }
    let element = manifest.element_type();
    (manifest.partitions.iter().enumerate())
        .filter(|(_, entry)| {
            vocab_pipeline::partition::looks_whole(
                &dir.join(&entry.file),
                entry,
                manifest.dims,
                element,
            )
        })
        .map(|(i, _)| i as u32)
        .collect()
}

/// Asks every member which partitions it holds ([`Deal::Found`]) and deals each partition to a
/// mapping member holding it with the fewest so far (the lowest rank on a tie). A partition no
/// member holds is made again from its photos by a mapping member with the fewest (with
/// `options.remake`; else an error naming it); those are returned with the member's host.
fn find(
    transport: &dyn Transport,
    hosts: &[String],
    options: &Options,
    manifest: &Manifest,
) -> Result<Found, EngineError> {
    let control = Team::ranks(transport);
    let digest = manifest.digest();
    let command = Command::Holdings {
        dir: options.dir.clone(),
        manifest: digest,
    };
    broadcast_message(&control, Some(&encode(&command)))?;
    let mine = holdings(&options.dir, transport, digest);
    let answers = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
    let parts = manifest.partitions.len();
    let mut holders: Vec<Vec<usize>> = vec![Vec::new(); parts];
    for (rank, bytes) in answers.iter().enumerate() {
        if rank == 0 && !options.root_maps {
            continue;
        }
        let held: Vec<u32> = decode(rank, bytes)?;
        for p in held {
            holders
                .get_mut(p as usize)
                .ok_or_else(|| EngineError::Malformed {
                    rank,
                    reason: format!("it holds partition {p} of {parts}"),
                })?
                .push(rank);
        }
    }
    let mut deal = vec![Vec::new(); transport.size()];
    let mut lost = Vec::new();
    for (p, at) in holders.iter().enumerate() {
        match at.iter().min_by_key(|&&r| (deal[r].len(), r)) {
            Some(&rank) => deal[rank].push(p as u32),
            None => lost.push(p),
        }
    }
    let Some(&first) = lost.first() else {
        return Ok(Found {
            deal,
            remade: Vec::new(),
        });
    };
    let Some(recipes) = options.remake.as_deref() else {
        return Err(EngineError::Unplaced {
            file: manifest.partitions[first].file.clone(),
            dir: options.dir.clone(),
            hosts: hosts.len(),
        });
    };
    // Each lost partition is made again by a mapping member with the fewest so far.
    let mappers: Vec<usize> = (usize::from(!options.root_maps)..transport.size()).collect();
    let mut which = Vec::with_capacity(lost.len());
    for &p in &lost {
        let Some(&rank) = mappers.iter().min_by_key(|&&r| (deal[r].len(), r)) else {
            return Err(EngineError::Unplaced {
                file: manifest.partitions[p].file.clone(),
                dir: options.dir.clone(),
                hosts: hosts.len(),
            });
        };
        deal[rank].push(p as u32);
        which.push((rank, p));
    }
    let remake = recipes
        .remake(&options.dir, manifest, &which)
        .map_err(|reason| EngineError::Malformed { rank: 0, reason })?;
    broadcast_message(&control, Some(&encode(&Command::Remake(remake.clone()))))?;
    let mine = crate::born::remake_here(transport, &remake).err();
    let answers = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
    for (rank, bytes) in answers.iter().enumerate() {
        let error: Option<String> = decode(rank, bytes)?;
        if let Some(reason) = error {
            return Err(EngineError::Refused {
                rank,
                host: hosts.get(rank).cloned().unwrap_or_default(),
                reason,
            });
        }
    }
    for d in &mut deal {
        d.sort_unstable();
    }
    let remade = (which.iter())
        .map(|&(rank, p)| (p as u32, hosts.get(rank).cloned().unwrap_or_default()))
        .collect();
    Ok(Found { deal, remade })
}

/// Where [`find`] placed a job's partitions.
struct Found {
    /// Partitions by rank.
    deal: Vec<Vec<u32>>,
    /// Partitions made again from their photos, with the host of the member that made each.
    remade: Vec<(u32, String)>,
}

/// What [`load`] opened: the root's share, the fixed-point scale, partitions made again.
struct Opened {
    share: Option<Share>,
    scale: i32,
    remade: Vec<(u32, String)>,
}

/// Has every member cache its share of the partitions for the chain `order` (reusing what
/// `previous`, the root's share, holds); returns the root's share and the fixed-point scale.
fn load(
    transport: &dyn Transport,
    hosts: &[String],
    options: &Options,
    manifest: &Manifest,
    job: u64,
    layout: &Layout,
    previous: Option<&Share>,
) -> Result<Opened, EngineError> {
    let control = Team::ranks(transport);
    let order = &layout.order;
    let mut remade = Vec::new();
    let found;
    let deal: &[Vec<u32>] = match &options.deal {
        Deal::Blocks => &[],
        Deal::ByRank(d) => d,
        Deal::Found => {
            let placed = find(transport, hosts, options, manifest)?;
            remade = placed.remade;
            found = placed.deal;
            &found
        }
    };
    if !deal.is_empty() {
        check_deal(
            deal,
            manifest.partitions.len(),
            transport.size(),
            options.root_maps,
        )
        .map_err(|reason| EngineError::Malformed { rank: 0, reason })?;
    }
    let load = Command::Load {
        job,
        dir: options.dir.clone(),
        manifest: manifest.digest(),
        order: order.to_vec(),
        broadcast_tree: lists(layout.broadcast_tree.as_ref()),
        gather_tree: lists(layout.gather_tree.as_ref()),
        root_maps: options.root_maps,
        build: BUILD.into(),
        deal: deal.to_vec(),
    };
    broadcast_message(&control, Some(&encode(&load)))?;
    let team = Team::ordered(transport, order.to_vec())?;
    let own = if options.root_maps {
        let at = Placement {
            dir: &options.dir,
            digest: manifest.digest(),
            root_maps: true,
            deal,
        };
        open_share(&team, job, &at, previous)
            .map(Some)
            .map_err(|e| vocab_pipeline::chain(&e))
    } else {
        Ok(None)
    };
    let reply = match &own {
        Ok(None) => LoadReply {
            rows: 0,
            max_abs_bits: 0,
            magnitudes: Vec::new(),
            error: None,
        },
        Ok(Some(s)) => LoadReply {
            rows: s.rows(),
            max_abs_bits: s.max_abs().to_bits(),
            magnitudes: s.magnitudes(),
            error: None,
        },
        Err(e) => LoadReply {
            rows: 0,
            max_abs_bits: 0,
            magnitudes: Vec::new(),
            error: Some(e.clone()),
        },
    };
    let replies = gather(&control, &encode(&reply), MAX_CONTROL)?.unwrap_or_default();
    let (mut rows, mut peak, mut bins) = (0u64, 0f32, Vec::new());
    for (rank, bytes) in replies.iter().enumerate() {
        let reply: LoadReply = decode(rank, bytes)?;
        if let Some(reason) = reply.error {
            return Err(EngineError::Refused {
                rank,
                host: hosts.get(rank).cloned().unwrap_or_default(),
                reason,
            });
        }
        rows += reply.rows;
        peak = peak.max(f32::from_bits(reply.max_abs_bits));
        bins = vocab_pipeline::kmeans::partial::add_bins(bins, &reply.magnitudes);
    }
    if rows != manifest.count {
        return Err(EngineError::Count {
            got: rows,
            want: manifest.count,
        });
    }
    let scale = fixed_scale(peak, rows);
    vocab_pipeline::kmeans::partial::check_range(scale, &bins, peak)?;
    let share = own.map_err(|reason| EngineError::Refused {
        rank: 0,
        host: transport.host(),
        reason,
    })?;
    Ok(Opened {
        share,
        scale,
        remade,
    })
}

/// The driving member (rank 0) of an SPMD job.
pub struct Root<'t> {
    transport: Box<dyn Transport + 't>,
    hosts: Vec<String>,
    layout: Layout,
    options: Options,
    manifest: Manifest,
    /// `None` when the root does not map.
    share: Option<Share>,
    scale: i32,
    calibration: Option<Calibration>,
    job: u64,
    /// Broadcast seconds expected since the last calibration (the first one after it).
    expected: Option<f64>,
    /// The links are to be measured again before the next step.
    stale: bool,
    /// Partitions no member held, made again from their photos: (partition, host).
    remade: Vec<(u32, String)>,
}

impl std::fmt::Debug for Root<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root")
            .field("hosts", &self.hosts)
            .field("layout", &self.layout)
            .field("scale", &self.scale)
            .finish()
    }
}

/// The hosts of every rank, gathered once per process at the root (members send theirs when
/// they start serving).
#[derive(Debug, Clone)]
pub struct Members {
    /// Host of each rank.
    pub hosts: Vec<String>,
}

/// Gathers every rank's host at the root; call once, before the first [`Root::start`].
pub fn hello(transport: &dyn Transport) -> Result<Members, EngineError> {
    let control = Team::ranks(transport);
    let mine = Hello {
        host: transport.host(),
        build: BUILD.into(),
    };
    let all = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
    let mut hosts = Vec::with_capacity(all.len());
    for (rank, bytes) in all.iter().enumerate() {
        let hello: Hello = decode(rank, bytes)?;
        if hello.build != BUILD {
            return Err(EngineError::Refused {
                rank,
                host: hello.host,
                reason: format!("it runs {}, the root runs {BUILD}", hello.build),
            });
        }
        hosts.push(hello.host);
    }
    Ok(Members { hosts })
}

/// Broadcasts `data` from the root to every member with `plan`, down the chain `order` (ranks,
/// the root first; empty: rank order) or, for `mst`, `tree` (ranks; `None`: the binomial tree),
/// and checks every member's copy by its CRC-32; returns the seconds from the command to the
/// last check. Members must be in [`serve`].
pub fn broadcast_checked(
    transport: &dyn Transport,
    plan: BroadcastPlan,
    data: &[u8],
    order: &[usize],
    tree: Option<&Tree>,
) -> Result<f64, EngineError> {
    let started = Instant::now();
    let control = Team::ranks(transport);
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
    broadcast_message(&control, Some(&encode(&command)))?;
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
/// piece; returns the seconds from the command to the last piece. Members must be in [`serve`].
pub fn gather_checked(
    transport: &dyn Transport,
    bytes: u64,
    order: &[usize],
    tree: Option<&Tree>,
) -> Result<f64, EngineError> {
    let started = Instant::now();
    let control = Team::ranks(transport);
    let tree = lists(tree);
    let team = team_of(transport, order, &[], &tree)?;
    let command = Command::Gather {
        bytes,
        order: order.to_vec(),
        tree,
    };
    broadcast_message(&control, Some(&encode(&command)))?;
    let pieces = gather(&team, &[], MAX_STEP_BYTES)?.unwrap_or_default();
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

/// Tells every member to leave [`serve`].
pub fn exit(transport: &dyn Transport) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    broadcast_message(&control, Some(&encode(&Command::Exit)))?;
    Ok(())
}

impl<'t> Root<'t> {
    /// Has every member cache its share of the partitions of `manifest` (the root's copy; every
    /// rank must read the same at `options.dir`).
    /// `job` names the job's partitions at the members: a later start with the same job (a
    /// new team after a failure) reuses what they cached.
    pub fn start(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        options: Options,
        manifest: Manifest,
        job: u64,
    ) -> Result<Self, EngineError> {
        let (layout, calibration) = match options.auto {
            Some(auto) => {
                let known = options
                    .known
                    .as_ref()
                    .and_then(|k| k.links_for(&labels(&members.hosts)));
                let c = match known {
                    Some(links) => Calibration {
                        reused: true,
                        ..Calibration::choose(links, 0.0, auto, options.plan.chunk)
                    },
                    None => measure(&*transport, auto, options.plan.chunk)?,
                };
                (Layout::chosen(&c), Some(c))
            }
            None => {
                let layout = Layout {
                    order: chain_order(&members.hosts, &options.racks),
                    broadcast_tree: None,
                    gather_tree: None,
                };
                (layout, None)
            }
        };
        let Opened {
            share,
            scale,
            remade,
        } = load(
            &*transport,
            &members.hosts,
            &options,
            &manifest,
            job,
            &layout,
            None,
        )?;
        Ok(Self {
            remade,
            transport,
            hosts: members.hosts.clone(),
            layout,
            options,
            manifest,
            share,
            scale,
            calibration,
            job,
            expected: None,
            stale: false,
        })
    }

    /// Measures the links again and, if the chain or a tree changes, has every member load its
    /// share under the new layout (partitions already open are kept). Returns the seconds it
    /// took.
    fn recalibrate(&mut self) -> Result<f64, EngineError> {
        let Some(auto) = self.options.auto else {
            return Ok(0.0);
        };
        let started = Instant::now();
        let c = measure(&*self.transport, auto, self.options.plan.chunk)?;
        let layout = Layout::chosen(&c);
        if layout != self.layout {
            let opened = load(
                &*self.transport,
                &self.hosts,
                &self.options,
                &self.manifest,
                self.job,
                &layout,
                self.share.as_ref(),
            )?;
            self.remade.extend(opened.remade);
            (self.share, self.scale, self.layout) = (opened.share, opened.scale, layout);
        }
        self.calibration = Some(c);
        (self.expected, self.stale) = (None, false);
        Ok(started.elapsed().as_secs_f64())
    }

    /// Books a broadcast's seconds against the calibration: the first broadcast after a
    /// calibration sets what to expect; one more than 20% (and 20 ms) slower than that marks
    /// the links for measuring again before the next step.
    fn watch(&mut self, seconds: f64) {
        if self.calibration.is_some() {
            (self.expected, self.stale) = slowed(self.expected, seconds);
        }
    }

    /// What the calibration found, when the chain comes from measured links.
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_ref()
    }

    /// The transport the job runs on.
    pub fn transport(&self) -> &dyn Transport {
        &*self.transport
    }

    /// The rows of the global `indices`, in that order, from the members holding them (for
    /// the initial centroids when the partitions lie only at the members).
    pub fn rows(&self, indices: &[usize]) -> Result<Vec<f32>, EngineError> {
        let control = Team::ranks(self.transport.as_ref());
        let wanted: Vec<u64> = indices.iter().map(|&i| i as u64).collect();
        broadcast_message(
            &control,
            Some(&encode(&Command::Rows {
                indices: wanted.clone(),
            })),
        )?;
        let own = self
            .share
            .as_ref()
            .map_or_else(Vec::new, |s| s.rows_at(&wanted));
        let pieces = gather(&control, &own, MAX_STEP_BYTES)?.unwrap_or_default();
        let dims = self.manifest.dims;
        let mut rows = vec![0f32; indices.len() * dims];
        let mut filled = vec![false; indices.len()];
        for (rank, piece) in pieces.iter().enumerate() {
            let malformed = |reason: String| EngineError::Malformed { rank, reason };
            let record = 4 + 4 * dims;
            if piece.len() % record != 0 {
                return Err(malformed(format!("rows of {} bytes", piece.len())));
            }
            for row in piece.chunks_exact(record) {
                let at = u32::from_le_bytes([row[0], row[1], row[2], row[3]]) as usize;
                match filled.get_mut(at) {
                    Some(f) if !*f => *f = true,
                    _ => {
                        return Err(malformed(format!(
                            "row {at} of {} asked, twice or unasked",
                            indices.len()
                        )));
                    }
                }
                for (v, b) in rows[at * dims..(at + 1) * dims]
                    .iter_mut()
                    .zip(row[4..].chunks_exact(4))
                {
                    *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        }
        if let Some(at) = filled.iter().position(|f| !f) {
            return Err(EngineError::Malformed {
                rank: 0,
                reason: format!("no member holds row {}", indices[at]),
            });
        }
        Ok(rows)
    }

    /// Partitions no member held that were made again from their photos (partition, host of
    /// the member that made it), since the start.
    pub fn remade(&self) -> &[(u32, String)] {
        &self.remade
    }

    /// The vectors of the job and their dims (the manifest's).
    pub fn shape(&self) -> (u64, usize) {
        (self.manifest.count, self.manifest.dims)
    }

    /// The members in chain order, as `rank@host`.
    pub fn members(&self) -> Vec<String> {
        self.layout
            .order
            .iter()
            .map(|&r| format!("{r}@{}", self.hosts[r]))
            .collect()
    }

    /// The fixed-point scale of the partial sums.
    pub fn scale(&self) -> i32 {
        self.scale
    }

    /// Runs iteration `iteration` from `centroids` on every member.
    pub fn step(
        &mut self,
        iteration: u64,
        centroids: &Centroids,
    ) -> Result<StepResult, EngineError> {
        let recalibrated = if self.stale {
            Some(self.recalibrate()?)
        } else {
            None
        };
        let received = Instant::now();
        let (k, dims) = (centroids.k(), centroids.dims());
        let command = Command::Step {
            iteration,
            k: k as u64,
            dims: dims as u64,
            scale: self.scale,
            stage1: self.options.stage1,
            int8: self.options.assignment.kernel() == Kernel::Int8,
            prune: self.options.assignment.pruned(),
            approx_probes: match self.options.assignment {
                Assignment::Approx { probes, .. } => probes.max(1),
                _ => 0,
            },
            approx_lists: match self.options.assignment {
                Assignment::Approx { lists, .. } => lists,
                _ => 0,
            },
            algorithm: self.options.plan.algorithm.name().into(),
            chunk: self.options.plan.chunk as u64,
            chains: self.options.plan.chains as u64,
        };
        broadcast_message(&Team::ranks(&*self.transport), Some(&encode(&command)))?;
        let team = self.layout.team(&*self.transport)?;
        let piece = member_step(
            &team,
            self.share.as_ref(),
            self.options.root_maps,
            &command,
            Some(centroids),
            received,
            Faults::default(),
        )?;

        let pieces = gather(&team, &piece, MAX_STEP_BYTES)?.unwrap_or_default();
        // Every member times from its receipt of the step (the root: from sending it).
        let gathered_at = received.elapsed().as_secs_f64();
        let w = team.size();
        let (mut counts, mut means) = (vec![0u64; k], vec![0f32; k * dims]);
        let mut units = Vec::new();
        let mut report = StepReport {
            broadcast_bytes: (k * dims * 4 * (w - 1)) as u64,
            workers: w,
            attempts: 1,
            ..StepReport::default()
        };
        let (mut mapped, mut reduced, mut kept) = (0f64, 0f64, 0usize);
        for (j, piece) in pieces.iter().enumerate() {
            let rank = self.layout.order[j];
            let malformed = |reason: String| EngineError::Malformed { rank, reason };
            let head: [u8; 8] = piece
                .get(..8)
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| malformed("stage-3 piece without a header".into()))?;
            let stats_len = usize::try_from(u64::from_le_bytes(head))
                .ok()
                .filter(|&n| n <= piece.len() - 8)
                .ok_or_else(|| malformed("stage-3 header longer than the piece".into()))?;
            let stats: StepStats = decode(rank, &piece[8..8 + stats_len])?;
            let blob = &piece[8 + stats_len..];
            let r = range_at(k, j, w, self.options.root_maps);
            place_result(&mut counts, &mut means, r.start, r.len(), dims, blob)
                .map_err(|e| malformed(e.to_string()))?;
            units.extend(
                stats
                    .units
                    .iter()
                    .map(|&(key, bits)| (key, f64::from_bits(bits))),
            );
            report.broadcast_seconds = report.broadcast_seconds.max(stats.broadcast_seconds);
            report.map_seconds = report.map_seconds.max(stats.map_seconds);
            report.stage1_seconds = report.stage1_seconds.max(stats.stage1_seconds);
            mapped = mapped.max(stats.mapped_at);
            reduced = reduced.max(stats.reduced_at);
            report.stage2_bytes += stats.stage2_bytes;
            report.stage3_bytes += if j == 0 { 0 } else { piece.len() as u64 };
            report.tasks += stats.tasks;
            kept += stats.kept as usize;
        }
        let total: u64 = counts.iter().sum();
        if total != self.manifest.count {
            return Err(EngineError::Count {
                got: total,
                want: self.manifest.count,
            });
        }
        report.stage2_seconds = (reduced - mapped).max(0.0);
        // Stage 3 starts when the last member has its range: a root that does not map starts
        // gathering at once and would otherwise count the others' map and stage 2 as well.
        report.stage3_seconds = (gathered_at - reduced).max(0.0);
        report.recalibrated = recalibrated;
        self.watch(report.broadcast_seconds);
        Ok(StepResult {
            means,
            counts,
            inertia: inertia_of(&units),
            kept,
            report,
        })
    }
}

impl Engine for Root<'_> {
    type Error = EngineError;

    fn step(&mut self, iteration: u64, centroids: &Centroids) -> Result<StepResult, EngineError> {
        Root::step(self, iteration, centroids)
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, EngineError> {
        Root::rows(self, indices)
    }
}

/// Test helper: the distributed run `state` is the single-process run `local` bit for bit:
/// centroids, every iteration's inertia, and (pruned or not, as `assignment` says) the labels
/// the bounds kept.
#[cfg(test)]
pub(crate) fn assert_same_run(
    state: &vocab_pipeline::kmeans::State,
    local: &vocab_pipeline::kmeans::State,
    assignment: Assignment,
    what: &str,
) {
    assert_eq!(state.centroids, local.centroids, "{what}");
    let bits = |s: &vocab_pipeline::kmeans::State| {
        s.history
            .iter()
            .map(|h| h.inertia.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(bits(state), bits(local), "{what}");
    let kept =
        |s: &vocab_pipeline::kmeans::State| s.history.iter().map(|h| h.kept).collect::<Vec<_>>();
    assert_eq!(kept(state), kept(local), "{what}");
    assert_eq!(
        kept(state).iter().sum::<usize>() > 0,
        assignment.pruned(),
        "{what}"
    );
}

#[cfg(test)]
mod tests {
    use vocab_pipeline::kmeans::{self, Init, KMeansError, Params, State, initial_centroids};
    use vocab_pipeline::partition::{PartitionSet, split};
    use vocab_pipeline::store::{Element, Format};

    use super::*;
    use crate::net::transport::memory::MemoryTransport;

    /// Features around blobs, split into 7 partitions.
    fn dataset(dir: &std::path::Path) -> std::path::PathBuf {
        let features = dir.join("f.bin");
        vocab_pipeline::synth::generate_features(&features, Format::Bin, 3000, 24, 9, 5)
            .expect("features");
        let parts = dir.join("parts");
        split(&features, 7, &parts, Element::F32).expect("split");
        parts
    }

    fn params(k: usize, assignment: Assignment) -> Params {
        Params {
            k,
            max_iter: 5,
            tol: 0.0,
            seed: 3,
            init: Init::Random,
            threads: 2,
            assignment,
        }
    }

    /// Runs a job on an in-memory team on `hosts`: rank 0 drives, the others serve.
    fn run(
        hosts: &[&str],
        parts: &std::path::Path,
        options: Options,
        manifest: Manifest,
        params: &Params,
    ) -> Result<(State, Vec<StepReport>, Vec<String>), EngineError> {
        let hosts: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let team = MemoryTransport::team_on(&hosts);
        let set = PartitionSet::open(parts).expect("open");
        let start = State {
            iteration: 0,
            centroids: initial_centroids(&set.matrices(), params.k, &Init::Random, 3)
                .expect("init"),
            history: Vec::new(),
            converged: false,
        };
        std::thread::scope(|s| {
            let (root, members) = team.split_first().expect("a root");
            for m in members {
                s.spawn(move || serve(m, Faults::default()));
            }
            let driven = (|| {
                let members = hello(root)?;
                let mut engine = Root::start(Box::new(root), &members, options, manifest, 7)?;
                let mut reports = Vec::new();
                let state = vocab_pipeline::kmeans::fit_with::<_, EngineError>(
                    &mut engine,
                    params,
                    start,
                    &mut |_, r| {
                        reports.push(r.clone());
                        Ok(())
                    },
                )?;
                Ok((state, reports, engine.members()))
            })();
            // Members leave on Exit, or when the root's end of the team is gone.
            let _ = exit(root);
            driven
        })
    }

    fn options(
        parts: &std::path::Path,
        algorithm: Algorithm,
        stage1: bool,
        assignment: Assignment,
    ) -> Options {
        Options {
            dir: parts.display().to_string(),
            plan: BroadcastPlan {
                algorithm,
                chunk: 256,
                chains: 2,
            },
            stage1,
            assignment,
            racks: BTreeMap::new(),
            root_maps: true,
            auto: None,
            known: None,
            deal: Deal::Blocks,
            remake: None,
        }
    }

    #[test]
    fn spmd_runs_give_the_single_process_centroids_bit_for_bit() {
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        let manifest = read_manifest(&parts).expect("manifest");
        for (w, algorithm, stage1, k, assignment, root_maps) in [
            (
                1,
                Algorithm::Chain,
                true,
                20,
                Assignment::Full(Kernel::F32),
                true,
            ),
            (
                2,
                Algorithm::Chain,
                true,
                20,
                Assignment::Full(Kernel::F32),
                true,
            ),
            (
                3,
                Algorithm::MultiChain,
                false,
                20,
                Assignment::Full(Kernel::F32),
                true,
            ),
            (
                4,
                Algorithm::Mst,
                true,
                20,
                Assignment::Full(Kernel::F32),
                true,
            ),
            // Fewer centroids than members: some reduce an empty range.
            (
                4,
                Algorithm::Simple,
                true,
                3,
                Assignment::Full(Kernel::F32),
                true,
            ),
            (
                3,
                Algorithm::Chain,
                true,
                20,
                Assignment::Full(Kernel::Int8),
                true,
            ),
            // A root that only drives (the TCP driver): the others map and reduce.
            (
                2,
                Algorithm::Chain,
                true,
                20,
                Assignment::Full(Kernel::F32),
                false,
            ),
            (
                4,
                Algorithm::MultiChain,
                false,
                20,
                Assignment::Full(Kernel::Int8),
                false,
            ),
            // Pruned at the members, bounds kept beside their partitions across iterations.
            (
                3,
                Algorithm::Chain,
                true,
                20,
                Assignment::Pruned(Kernel::F32),
                true,
            ),
            (
                4,
                Algorithm::Mst,
                false,
                20,
                Assignment::Pruned(Kernel::Int8),
                false,
            ),
            // Approximate: every member builds the same index from the broadcast centroids.
            (
                3,
                Algorithm::Chain,
                true,
                20,
                Assignment::Approx {
                    lists: 0,
                    probes: 2,
                },
                true,
            ),
            (
                2,
                Algorithm::Mst,
                false,
                40,
                Assignment::Approx {
                    lists: 9,
                    probes: 1,
                },
                false,
            ),
        ] {
            let params = params(k, assignment);
            let local = kmeans::fit::<KMeansError>(&set.matrices(), &params, None, &mut |_| Ok(()))
                .expect("local");
            let hosts: Vec<&str> = ["a", "b", "a", "b"][..w].to_vec();
            let (state, reports, members) = run(
                &hosts,
                &parts,
                Options {
                    root_maps,
                    ..options(&parts, algorithm, stage1, assignment)
                },
                manifest.clone(),
                &params,
            )
            .expect("spmd");
            let what = format!(
                "{w} members, {algorithm:?}, k = {k}, {}, {root_maps}",
                assignment.name()
            );
            assert_same_run(&state, &local, assignment, &what);
            // Hosts a, b, a, b: the chain keeps host a's ranks together.
            let want = ["0@a", "2@a", "1@b", "3@b"];
            let want: Vec<&str> = want
                .into_iter()
                .filter(|m| m[..1].parse::<usize>().is_ok_and(|r| r < w))
                .collect();
            assert_eq!(members, want, "{what}");
            let r = &reports[0];
            assert_eq!(r.workers, w);
            assert_eq!(r.broadcast_bytes, (k * 24 * 4 * (w - 1)) as u64);
            let mappers = if root_maps { w } else { w - 1 };
            if mappers == 1 {
                assert_eq!(r.stage2_bytes, 0);
            } else {
                // Every mapper ships (m - 1) / m of its partial(s): k x (dims + 1) x 8 bytes.
                assert!(
                    r.stage2_bytes as f64 >= ((k * 25 * 8) * (mappers - 1)) as f64 * 0.9,
                    "{what}: {r:?}"
                );
            }
        }
    }

    /// The test partitions in `dir`, their manifest, k = 20 parameters and the single-process
    /// run of them.
    fn single_process(dir: &std::path::Path) -> (std::path::PathBuf, Manifest, Params, State) {
        let parts = dataset(dir);
        let set = PartitionSet::open(&parts).expect("open");
        let manifest = read_manifest(&parts).expect("manifest");
        let params = params(20, Assignment::Full(Kernel::F32));
        let local = kmeans::fit::<KMeansError>(&set.matrices(), &params, None, &mut |_| Ok(()))
            .expect("local");
        (parts, manifest, params, local)
    }

    #[test]
    fn a_chain_from_measured_links_gives_the_same_centroids() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (parts, manifest, params, local) = single_process(tmp.path());
        let auto = Auto {
            probe: Probe {
                small: 16,
                pings: 2,
                large: 8192,
            },
            bytes: (20 * 24 * 4) as f64,
        };
        for root_maps in [true, false] {
            let (state, _, members) = run(
                &["a", "b", "c", "d"],
                &parts,
                Options {
                    auto: Some(auto),
                    root_maps,
                    ..options(
                        &parts,
                        Algorithm::Chain,
                        true,
                        Assignment::Full(Kernel::F32),
                    )
                },
                manifest.clone(),
                &params,
            )
            .expect("spmd");
            assert_eq!(state.centroids, local.centroids, "root maps: {root_maps}");
            let mut ranks: Vec<&str> = members.iter().map(|m| &m[..1]).collect();
            assert_eq!(ranks[0], "0");
            ranks.sort_unstable();
            assert_eq!(ranks, ["0", "1", "2", "3"]);
        }
    }

    #[test]
    fn measured_trees_run_the_broadcast_and_the_gather_with_the_same_centroids() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (parts, manifest, params, local) = single_process(tmp.path());
        // One fast switch, but f's path to the driver a is slow both ways (a relay through
        // another member is faster), saved as a calibration of these hosts.
        let hosts = ["a", "b", "c", "d", "e", "f"];
        let mut links = topology::synthetic(&[0; 6], 100e6, 100e6, 0.1, 4);
        (links.bandwidth[5][0], links.bandwidth[0][5]) = (2e6, 2e6);
        let labels: Vec<String> = hosts.iter().map(|h| h.to_string()).collect();
        let auto = Auto {
            probe: Probe {
                small: 16,
                pings: 1,
                large: 1024,
            },
            bytes: 4e6,
        };
        let c = Calibration::choose(links.clone(), 0.0, auto, 65536);
        assert_ne!(c.gather_tree, Tree::star(6, 0), "{}", c.describe(&labels));
        assert!(c.gather_check.predicted < c.star, "{}", c.describe(&labels));
        assert!(c.broadcast_check.beats > 0.9, "{}", c.describe(&labels));
        let text = c.describe(&labels);
        assert!(text.contains("broadcast tree (mst): a > "), "{text}");
        assert!(text.contains("gather tree (stage 3): a > "), "{text}");
        for root_maps in [true, false] {
            let (state, reports, _) = run(
                &hosts,
                &parts,
                Options {
                    auto: Some(auto),
                    known: Some(topology::Saved::new(&labels, &links, 1.0)),
                    root_maps,
                    ..options(&parts, Algorithm::Mst, true, Assignment::Full(Kernel::F32))
                },
                manifest.clone(),
                &params,
            )
            .expect("spmd");
            assert_eq!(state.centroids, local.centroids, "root maps: {root_maps}");
            assert!(reports.iter().all(|r| r.recalibrated.is_none()));
        }
    }

    #[test]
    fn a_slower_broadcast_marks_the_links_for_measuring_again() {
        assert_eq!(slowed(None, 1.0), (Some(1.0), false));
        assert_eq!(slowed(Some(1.0), 1.19), (Some(1.0), false));
        assert_eq!(slowed(Some(1.0), 1.3), (Some(1.0), true));
        // Small broadcasts: 20 ms of slack, so jitter does not trigger it.
        assert_eq!(slowed(Some(0.001), 0.015), (Some(0.001), false));
    }

    #[test]
    fn measuring_again_mid_job_reorders_and_gives_the_same_centroids() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (parts, manifest, params, local) = single_process(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        let hosts: Vec<String> = ["a", "b", "c"].iter().map(|h| h.to_string()).collect();
        let team = MemoryTransport::team_on(&hosts);
        let mut state = State {
            iteration: 0,
            centroids: initial_centroids(&set.matrices(), 20, &Init::Random, 3).expect("init"),
            history: Vec::new(),
            converged: false,
        };
        let options = Options {
            auto: Some(Auto {
                probe: Probe {
                    small: 16,
                    pings: 1,
                    large: 4096,
                },
                bytes: 1e6,
            }),
            ..options(
                &parts,
                Algorithm::Chain,
                true,
                Assignment::Full(Kernel::F32),
            )
        };
        std::thread::scope(|s| {
            let (root, members) = team.split_first().expect("a root");
            for m in members {
                s.spawn(move || serve(m, Faults::default()));
            }
            let members = hello(root).expect("hello");
            let mut engine =
                Root::start(Box::new(root), &members, options, manifest, 7).expect("start");
            while state.iteration < params.max_iter {
                // Before every other iteration the links count as slowed down.
                engine.stale = state.iteration % 2 == 1;
                let started = Instant::now();
                let result = engine
                    .step(state.iteration + 1, &state.centroids)
                    .expect("step");
                let report = result.apply(&mut state, &params, started);
                assert_eq!(
                    report.recalibrated.is_some(),
                    state.iteration.is_multiple_of(2)
                );
            }
            exit(root).expect("exit");
        });
        assert_eq!(state.centroids, local.centroids);
    }

    #[test]
    fn members_with_other_partitions_are_refused_by_rank_and_host() {
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let mut manifest = read_manifest(&parts).expect("manifest");
        manifest.partitions[0].checksum ^= 1;
        let err = run(
            &["h0", "h1"],
            &parts,
            options(
                &parts,
                Algorithm::Chain,
                true,
                Assignment::Full(Kernel::F32),
            ),
            manifest,
            &params(5, Assignment::Full(Kernel::F32)),
        )
        .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("on h") && text.contains("manifest digest"),
            "{text}"
        );
        let err = run(
            &["h0", "h1", "h2"],
            &parts,
            options(
                std::path::Path::new("/nonexistent/parts"),
                Algorithm::Chain,
                true,
                Assignment::Full(Kernel::F32),
            ),
            read_manifest(&parts).expect("manifest"),
            &params(5, Assignment::Full(Kernel::F32)),
        );
        // The root's own read fails first here, naming the folder.
        let text = err.expect_err("refused").to_string();
        assert!(text.contains("/nonexistent/parts"), "{text}");
    }

    #[test]
    fn data_with_a_huge_outlier_is_refused_before_the_first_step() {
        let tmp = tempfile::tempdir().expect("tmp");
        let features = tmp.path().join("f.bin");
        let mut w = vocab_pipeline::store::FeatureWriter::create(&features, Format::Bin, 4)
            .expect("create");
        for i in 0..200u32 {
            let v = if i == 150 {
                1e30
            } else {
                (i % 7) as f32 / 10.0
            };
            w.write(i, 0, 0, &[v, 0.5, 0.25, 0.125]).expect("write");
        }
        w.finish().expect("finish");
        let parts = tmp.path().join("parts");
        split(&features, 4, &parts, Element::F32).expect("split");
        let err = run(
            &["h0", "h1"],
            &parts,
            options(
                &parts,
                Algorithm::Chain,
                true,
                Assignment::Full(Kernel::F32),
            ),
            read_manifest(&parts).expect("manifest"),
            &params(3, Assignment::Full(Kernel::F32)),
        )
        .expect_err("refused");
        assert!(matches!(err, EngineError::Range { .. }), "{err}");
    }

    #[test]
    fn the_chain_keeps_racks_together_in_order_of_first_appearance() {
        let hosts: Vec<String> = ["n1", "n2", "n3", "n4", "n5"]
            .iter()
            .map(|h| h.to_string())
            .collect();
        assert_eq!(chain_order(&hosts, &BTreeMap::new()), vec![0, 1, 2, 3, 4]);
        let racks: BTreeMap<String, String> =
            [("n1", "r2"), ("n2", "r1"), ("n3", "r2"), ("n4", "r1")]
                .iter()
                .map(|(h, r)| (h.to_string(), r.to_string()))
                .collect();
        // r2 (n1, n3), then r1 (n2, n4), then n5 on its own.
        assert_eq!(chain_order(&hosts, &racks), vec![0, 2, 1, 3, 4]);
        let same: Vec<String> = ["x", "y", "x", "y"].iter().map(|h| h.to_string()).collect();
        assert_eq!(chain_order(&same, &BTreeMap::new()), vec![0, 2, 1, 3]);
    }
}
