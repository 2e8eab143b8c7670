//! Where the k-means job's data lies: the job's options, how partitions are dealt to the
//! members (even blocks in chain order, by rank, or found where they are), the centroid range
//! each member reduces, and a member's share opened from its folder.

use std::collections::BTreeMap;

use vocab_pipeline::kmeans::Assignment;
use vocab_pipeline::partition::read_manifest;

use super::share::{Share, ShareError};
use crate::collective::aggregate::range_of;
use crate::collective::calibration::{Auto, Calibration};
use crate::collective::topology::{self, tree::Tree};
use crate::collective::{BroadcastPlan, Team};
use crate::engine::EngineError;
use crate::jobs::place::my_dir;
use crate::net::transport::Transport;

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
    /// when they cover every member (labelled by [`crate::collective::calibration::labels`]); measured again once a broadcast
    /// runs more than 20% slower than the first one on them.
    pub known: Option<topology::Saved>,
    /// How partitions are dealt to the members.
    pub deal: Deal,
    /// With [`Deal::Found`]: how partitions born on the nodes are made again from their photos
    /// when no member holds them (a node lost, its folder gone); `None`: such a partition is
    /// an error.
    pub remake: Option<std::sync::Arc<crate::jobs::born::Recipes>>,
}

/// How a job's partitions are dealt to the members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Deal {
    /// Even blocks in chain order: every member reads the same folder (a shared filesystem).
    #[default]
    Blocks,
    /// The partitions of each rank, by rank (born there: [`crate::jobs::born::Born::by_rank`]).
    ByRank(Vec<Vec<u32>>),
    /// Where they are: every member says which partitions its folder holds (`dir` as it sees
    /// it, `{rank}` its rank), and each partition goes to a holder with the fewest so far.
    Found,
}

/// Partitions of the member at chain position `j` of `w` out of `p`: a contiguous, even block
/// of the mapping members (all, or all but the root).
pub(super) fn share_of(p: usize, j: usize, w: usize, root_maps: bool) -> Vec<u32> {
    let Some((j, w)) = mapper(j, w, root_maps) else {
        return Vec::new();
    };
    (p * j / w..p * (j + 1) / w).map(|i| i as u32).collect()
}

/// Centroid range the member at chain position `j` of `w` reduces.
pub(super) fn range_at(k: usize, j: usize, w: usize, root_maps: bool) -> std::ops::Range<usize> {
    mapper(j, w, root_maps).map_or(0..0, |(j, w)| range_of(k, w, j))
}

/// Position among the mapping members, and their number.
pub(super) fn mapper(j: usize, w: usize, root_maps: bool) -> Option<(usize, usize)> {
    match (root_maps, j) {
        (true, _) => Some((j, w)),
        (false, 0) => None,
        (false, _) => Some((j - 1, w - 1)),
    }
}

/// Where the members stand: the chain (ranks, root first) and the measured trees (ranks; `None`:
/// the binomial tree, the direct gather).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) order: Vec<usize>,
    pub(super) broadcast_tree: Option<Tree>,
    pub(super) gather_tree: Option<Tree>,
}

impl Layout {
    /// The chain and trees a calibration chose.
    pub(super) fn chosen(c: &Calibration) -> Self {
        Self {
            order: c.order.clone(),
            broadcast_tree: Some(c.broadcast_tree.clone()),
            gather_tree: Some(c.gather_tree.clone()),
        }
    }

    /// The team of the transport's members so placed.
    pub(super) fn team<'t>(&self, transport: &'t dyn Transport) -> Result<Team<'t>, EngineError> {
        Ok(Team::ordered(transport, self.order.clone())?
            .with_trees(self.broadcast_tree.as_ref(), self.gather_tree.as_ref())?)
    }
}

/// Opens this member's share of the partitions in `dir` (its block in chain order).
/// Where a member finds its share of a job's partitions.
pub(super) struct Placement<'a> {
    /// The folder as every member sees it (`{rank}`: the member's rank).
    pub(super) dir: &'a str,
    /// The manifest's digest at the root.
    pub(super) digest: u32,
    pub(super) root_maps: bool,
    /// Partitions by rank (empty: even blocks in chain order).
    pub(super) deal: &'a [Vec<u32>],
}

pub(super) fn open_share(
    team: &Team<'_>,
    job: u64,
    at: &Placement<'_>,
    previous: Option<&Share>,
) -> Result<Share, ShareError> {
    let dir = my_dir(at.dir, team.transport());
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
pub(super) fn check_deal(
    deal: &[Vec<u32>],
    parts: usize,
    size: usize,
    root_maps: bool,
) -> Result<(), String> {
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

/// The partitions of the manifest with `digest` that this member's folder `dir` (see
/// [`crate::jobs::born::member_dir`]) holds: its manifest has that digest and each file's header and
/// length are its entry's (the payload is verified when the partition is loaded).
pub(super) fn holdings(dir: &str, transport: &dyn Transport, digest: u32) -> Vec<u32> {
    let dir = my_dir(dir, transport);
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
