//! The k-means job's member half: a share of the partitions cached across iterations (and
//! across teams of the same job), and each iteration's broadcast, map, stage 1 and stage 2.

use crate::jobs::error::JobError;
use std::borrow::Cow;
use std::time::Instant;

use vocab_pipeline::kmeans::{Assignment, Centroids, Kernel};
use vocab_pipeline::mixture::Statistic;
use vocab_pipeline::mixture::moments::values_len;

use super::layout::{Placement, holdings, mapper, open_share};
use super::share::{Mapped, Share};
use super::wire::{Command, LoadReply, MAX_STEP_BYTES, StepStats, TAG};
use crate::collective::aggregate::RangeSum;
use crate::collective::{BroadcastPlan, MAX_CONTROL, Team, broadcast, gather, reduce_ranges};
use crate::engine::{EngineError, Job, Member, decode, encode};
use crate::jobs::place::{plan_of, team_of};
use crate::net::messages::BUILD;

/// What a member knows of a loaded job.
#[derive(Debug, Clone)]
struct Loaded {
    order: Vec<usize>,
    broadcast_tree: Vec<Vec<usize>>,
    gather_tree: Vec<Vec<usize>>,
    root_maps: bool,
}

/// The k-means job at a member: its share of the partitions (kept when a new team of the same
/// job forms, so the partitions are not opened again) and the job it loaded in this team.
#[derive(Debug, Default)]
pub struct Kmeans {
    share: Option<Share>,
    loaded: Option<Loaded>,
}

impl Job for Kmeans {
    fn tag(&self) -> &'static str {
        TAG
    }

    fn begin(&mut self) {
        self.loaded = None;
    }

    fn serve(&mut self, member: &Member<'_>, body: &[u8]) -> Result<(), EngineError> {
        let transport = member.transport();
        let control = Team::ranks(transport);
        let command: Command = decode(0, body)?;
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
                            open_share(&team, job, &at, self.share.as_ref())
                                .map_err(|e| vocab_pipeline::chain(&e))
                        })
                };
                let reply = match opened {
                    Ok(s) => {
                        let reply = LoadReply::of(&s);
                        self.share = Some(s);
                        self.loaded = Some(Loaded {
                            order: chain.clone(),
                            broadcast_tree: broadcast_tree.clone(),
                            gather_tree: gather_tree.clone(),
                            root_maps,
                        });
                        reply
                    }
                    Err(e) => {
                        (self.share, self.loaded) = (None, None);
                        LoadReply::refused(Some(e))
                    }
                };
                gather(&control, &encode(&reply), MAX_CONTROL)?;
            }
            Command::Step { .. } | Command::Moments { .. } => {
                let (Some(s), Some(job)) = (self.share.as_ref(), self.loaded.as_ref()) else {
                    return Err(JobError::NotLoaded(transport.rank()).into());
                };
                let team = team_of(transport, &job.order, &job.broadcast_tree, &job.gather_tree)?;
                let (share, received) = (Some(s), member.received());
                let piece = if let Command::Step { .. } = command {
                    member_step(
                        &team,
                        share,
                        job.root_maps,
                        &command,
                        None,
                        received,
                        &|iteration| member.reached(TAG, "mapped", iteration),
                    )?
                } else {
                    member_moments(&team, share, job.root_maps, &command, None, received)?
                };
                gather(&team, &piece, MAX_STEP_BYTES)?;
            }
            Command::Holdings { ref dir, manifest } => {
                let held = holdings(dir, transport, manifest);
                gather(&control, &encode(&held), MAX_CONTROL)?;
            }
            Command::Rows { ref indices } => {
                let piece = (self.share.as_ref()).map_or_else(Vec::new, |s| s.rows_at(indices));
                gather(&control, &piece, MAX_STEP_BYTES)?;
            }
        }
        Ok(())
    }
}

/// A member's part of one iteration: the centroid broadcast, map, stage 1 and stage 2; returns
/// the stage-3 piece (statistics, then the reduced range's counts and means).
pub(super) fn member_step(
    team: &Team<'_>,
    share: Option<&Share>,
    root_maps: bool,
    command: &Command,
    centroids: Option<&Centroids>,
    received: Instant,
    on_mapped: &dyn Fn(u64),
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
        return Err(JobError::Shape {
            got: 0,
            want: k.saturating_mul(dims),
        }
        .into());
    };
    let plan = plan_of(algorithm, chunk, chains)?;
    let (broadcast_seconds, centroids) =
        broadcast_centroids(team, plan, centroids, values, dims, received)?;
    let (w, me) = (team.size(), team.me());
    let Some(share) = share.filter(|_| mapper(me, w, root_maps).is_some()) else {
        // A root that only drives: no map, no range; its piece is empty statistics.
        let stats = StepStats {
            broadcast_seconds,
            ..StepStats::default()
        };
        return Ok(stats.piece(&[]));
    };
    let mapped = share.map(
        &centroids,
        scale,
        assignment_of(prune, int8, approx_lists, approx_probes),
        stage1,
        iteration,
    );
    on_mapped(iteration);
    reduce_and_report(
        team,
        root_maps,
        mapped,
        (k, dims),
        plan.chunk,
        (broadcast_seconds, received),
        |sum| sum.encode_result(scale),
    )
}

/// A member's part of a mixture or PCA map step: the statistic's broadcast, map, stage 1 and
/// stage 2; returns the stage-3 piece (statistics, then the reduced range's exact sums).
pub(super) fn member_moments(
    team: &Team<'_>,
    share: Option<&Share>,
    root_maps: bool,
    command: &Command,
    statistic: Option<&Statistic>,
    received: Instant,
) -> Result<Vec<u8>, EngineError> {
    let Command::Moments {
        head,
        ref scales,
        stage1,
        ref algorithm,
        chunk,
        chains,
        ..
    } = *command
    else {
        return Err(EngineError::Malformed {
            rank: 0,
            reason: "not a moments step".into(),
        });
    };
    let malformed = |reason: String| EngineError::Malformed { rank: 0, reason };
    let values = values_len(&head)
        .filter(|&v| v as u64 <= MAX_STEP_BYTES / 8)
        .ok_or_else(|| malformed(format!("a statistic of shape {head:?}")))?;
    let plan = plan_of(algorithm, chunk, chains)?;
    let mut bytes = match statistic {
        Some(s) => s.values().iter().flat_map(|v| v.to_le_bytes()).collect(),
        None => vec![0u8; values * 8],
    };
    broadcast(team, plan, &mut bytes)?;
    let broadcast_seconds = received.elapsed().as_secs_f64();
    let decoded;
    let statistic = match statistic {
        Some(s) => s,
        None => {
            let values: Vec<f64> = bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect();
            decoded = Statistic::from_values(head, &values)
                .map_err(|e| malformed(vocab_pipeline::chain(&e)))?;
            &decoded
        }
    };
    let (w, me) = (team.size(), team.me());
    let Some(share) = share.filter(|_| mapper(me, w, root_maps).is_some()) else {
        let stats = StepStats {
            broadcast_seconds,
            ..StepStats::default()
        };
        return Ok(stats.piece(&[]));
    };
    if !vocab_pipeline::mixture::moments::scales_fit(statistic, scales) {
        return Err(malformed(format!(
            "{} column scales for a statistic of {} columns",
            scales.len(),
            statistic.shape().1
        )));
    }
    let mapped = share.moments(statistic, scales, stage1);
    reduce_and_report(
        team,
        root_maps,
        mapped,
        statistic.shape(),
        plan.chunk,
        (broadcast_seconds, received),
        RangeSum::encode_sums,
    )
}

/// Stage 2 of a member's mapped partials over the mapping members, and its stage-3 piece:
/// the statistics, then `result` of the reduced range.
fn reduce_and_report(
    team: &Team<'_>,
    root_maps: bool,
    mapped: Mapped,
    (k, dims): (usize, usize),
    chunk: usize,
    (broadcast_seconds, received): (f64, Instant),
    result: impl Fn(&RangeSum) -> Vec<u8>,
) -> Result<Vec<u8>, EngineError> {
    let Mapped {
        partials,
        kept,
        tasks,
        map_seconds,
        stage1_seconds,
    } = mapped;
    let mapped_at = received.elapsed().as_secs_f64();
    let mappers = if root_maps {
        Team::subset(team.transport(), team.order().to_vec())?
    } else {
        Team::subset(team.transport(), team.order()[1..].to_vec())?
    };
    let (sum, stage2_bytes) = reduce_ranges(&mappers, &partials, k, dims, chunk)?;
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
    Ok(stats.piece(&result(&sum)))
}

/// The step's `k x dims` centroids (`values` floats) broadcast by `plan` from the root, which
/// holds them in `centroids`; the others receive them. Returns the seconds from `received` to
/// the end of the broadcast, and the centroids (borrowed at the root, decoded elsewhere).
fn broadcast_centroids<'c>(
    team: &Team<'_>,
    plan: BroadcastPlan,
    centroids: Option<&'c Centroids>,
    values: usize,
    dims: usize,
    received: Instant,
) -> Result<(f64, Cow<'c, Centroids>), EngineError> {
    let mut bytes = match centroids {
        Some(c) => c.as_slice().iter().flat_map(|v| v.to_le_bytes()).collect(),
        None => vec![0u8; values * 4],
    };
    broadcast(team, plan, &mut bytes)?;
    let broadcast_seconds = received.elapsed().as_secs_f64();
    let centroids = match centroids {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(Centroids::new(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            dims,
        )),
    };
    Ok((broadcast_seconds, centroids))
}

/// The assignment a step command names: approximate with `approx_probes > 0` (over
/// `approx_lists` lists), else exact, pruned or not; by the f32 or the int8 kernel.
fn assignment_of(prune: bool, int8: bool, approx_lists: u32, approx_probes: u32) -> Assignment {
    let kernel = if int8 { Kernel::Int8 } else { Kernel::F32 };
    if approx_probes > 0 {
        Assignment::Approx {
            lists: approx_lists,
            probes: approx_probes,
            kernel,
        }
    } else {
        Assignment::new(prune, kernel)
    }
}
