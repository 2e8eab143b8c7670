//! The k-means job's root half: the job started on a team (links measured, partitions found
//! and loaded, the fixed-point scale agreed), then one [`Root::step`] per iteration; the k-means
//! [`Engine`] of an MPI rank 0, and of the TCP driver on each team it forms.

use crate::jobs::error::JobError;
use std::time::Instant;

use vocab_pipeline::kmeans::engine::{Engine, StepReport, StepResult};
use vocab_pipeline::kmeans::partial::inertia_of;
use vocab_pipeline::kmeans::{Assignment, Centroids, Kernel, fixed_scale};
use vocab_pipeline::mixture::{Engine as MixtureEngine, Moments, Statistic};
use vocab_pipeline::partition::Manifest;

use super::layout::{Deal, Layout, Options, Placement, check_deal, holdings, open_share, range_at};
use super::member::{member_moments, member_step};
use super::share::Share;
use super::wire::{Command, LoadReply, MAX_STEP_BYTES, StepStats, TAG};
use crate::collective::aggregate::{AggregateError, place_result, place_sums};
use crate::collective::calibration::{Auto, Calibration, chain_order, labels};
use crate::collective::{MAX_CONTROL, Team, gather};
use crate::engine::{EngineError, Members, calibrate_links, decode, encode, send_json};
use crate::jobs::born;
use crate::jobs::place::lists;
use crate::net::messages::BUILD;
use crate::net::transport::Transport;

/// What a broadcast of `seconds` means against `expected`: the new expectation, and whether
/// the links are to be measured again (more than 20% and 20 ms slower than expected).
pub(super) fn slowed(expected: Option<f64>, seconds: f64) -> (Option<f64>, bool) {
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
    send_json(transport, TAG, &command)?;
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
        return Err(JobError::Unplaced {
            file: manifest.partitions[first].file.clone(),
            dir: options.dir.clone(),
            hosts: hosts.len(),
        }
        .into());
    };
    // Each lost partition is made again by a mapping member with the fewest so far.
    let mappers: Vec<usize> = (usize::from(!options.root_maps)..transport.size()).collect();
    let mut which = Vec::with_capacity(lost.len());
    for &p in &lost {
        let Some(&rank) = mappers.iter().min_by_key(|&&r| (deal[r].len(), r)) else {
            return Err(JobError::Unplaced {
                file: manifest.partitions[p].file.clone(),
                dir: options.dir.clone(),
                hosts: hosts.len(),
            }
            .into());
        };
        deal[rank].push(p as u32);
        which.push((rank, p));
    }
    let remake = recipes
        .remake(&options.dir, manifest, &which)
        .map_err(|reason| EngineError::Malformed { rank: 0, reason })?;
    send_json(transport, born::TAG, &born::Command::Remake(remake.clone()))?;
    let mine = born::remake_here(transport, &remake).err();
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
    /// Largest magnitude of any value held (for the mixture's fixed-point scale).
    max_abs: f32,
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
    send_json(transport, TAG, &load)?;
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
        Ok(None) => LoadReply::refused(None),
        Ok(Some(s)) => LoadReply::of(s),
        Err(e) => LoadReply::refused(Some(e.clone())),
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
        return Err(JobError::Count {
            got: rows,
            want: manifest.count,
        }
        .into());
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
        max_abs: peak,
        remade,
    })
}

/// What the members' stage-3 pieces of a step said besides their ranges.
struct Collected {
    /// Per-unit values (inertia or log-likelihood) by unit key.
    units: Vec<(u64, f64)>,
    /// Vectors whose label pruning kept.
    kept: usize,
    /// Times and traffic.
    report: StepReport,
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
    max_abs: f32,
    calibration: Option<Calibration>,
    job: u64,
    /// Broadcast seconds expected since the last calibration (the first one after it).
    expected: Option<f64>,
    /// The links are to be measured again before the next step.
    pub(super) stale: bool,
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
            max_abs,
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
            max_abs,
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
            (self.share, self.scale, self.max_abs, self.layout) =
                (opened.share, opened.scale, opened.max_abs, layout);
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
        send_json(
            self.transport.as_ref(),
            TAG,
            &Command::Rows {
                indices: wanted.clone(),
            },
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

    /// Every rank's host, by rank.
    pub fn hosts(&self) -> &[String] {
        &self.hosts
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
        send_json(&*self.transport, TAG, &command)?;
        let team = self.layout.team(&*self.transport)?;
        let piece = member_step(
            &team,
            self.share.as_ref(),
            self.options.root_maps,
            &command,
            Some(centroids),
            received,
            &|_| {},
        )?;

        let pieces = gather(&team, &piece, MAX_STEP_BYTES)?.unwrap_or_default();
        let (mut counts, mut means) = (vec![0u64; k], vec![0f32; k * dims]);
        let Collected {
            units,
            kept,
            mut report,
        } = self.collect(&pieces, k, received, |r, blob| {
            place_result(&mut counts, &mut means, r.start, r.len(), dims, blob)
        })?;
        report.broadcast_bytes = (k * dims * 4 * (team.size() - 1)) as u64;
        let total: u64 = counts.iter().sum();
        if total != self.manifest.count {
            return Err(JobError::Count {
                got: total,
                want: self.manifest.count,
            }
            .into());
        }
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

    /// Sums a mixture or PCA `statistic` over every vector (step `step` of its run).
    pub fn moments(&mut self, step: u64, statistic: &Statistic) -> Result<Moments, EngineError> {
        let recalibrated = if self.stale {
            Some(self.recalibrate()?)
        } else {
            None
        };
        let received = Instant::now();
        let scales = statistic.scales(self.max_abs, self.manifest.count);
        let command = Command::Moments {
            step,
            head: statistic.head(),
            scales: scales.clone(),
            stage1: self.options.stage1,
            algorithm: self.options.plan.algorithm.name().into(),
            chunk: self.options.plan.chunk as u64,
            chains: self.options.plan.chains as u64,
        };
        send_json(&*self.transport, TAG, &command)?;
        let team = self.layout.team(&*self.transport)?;
        let piece = member_moments(
            &team,
            self.share.as_ref(),
            self.options.root_maps,
            &command,
            Some(statistic),
            received,
        )?;
        let pieces = gather(&team, &piece, MAX_STEP_BYTES)?.unwrap_or_default();
        let (k, width) = statistic.shape();
        let (mut counts, mut sums) = (vec![0u64; k], vec![0i64; k * width]);
        let Collected {
            units, mut report, ..
        } = self.collect(&pieces, k, received, |r, blob| {
            place_sums(&mut counts, &mut sums, r.start, r.len(), width, blob)
        })?;
        report.broadcast_bytes = (statistic.values().len() * 8 * (team.size() - 1)) as u64;
        report.recalibrated = recalibrated;
        self.watch(report.broadcast_seconds);
        Ok(Moments {
            counts,
            sums,
            width,
            scales,
            log_likelihood: inertia_of(&units),
            report,
        })
    }

    /// Reads the gathered stage-3 `pieces` of a step over `k` rows (one per member in chain
    /// order): each member's statistics, and its range's bytes handed to `place`. Returns the
    /// per-unit values, the vectors pruning kept and the step's report (times from
    /// `received`, the root's sending of the step).
    fn collect(
        &self,
        pieces: &[Vec<u8>],
        k: usize,
        received: Instant,
        mut place: impl FnMut(std::ops::Range<usize>, &[u8]) -> Result<(), AggregateError>,
    ) -> Result<Collected, EngineError> {
        // Every member times from its receipt of the step (the root: from sending it).
        let gathered_at = received.elapsed().as_secs_f64();
        let w = pieces.len();
        let mut units = Vec::new();
        let mut report = StepReport {
            workers: w,
            attempts: 1,
            ..StepReport::default()
        };
        let (mut mapped, mut reduced, mut kept) = (0f64, 0f64, 0usize);
        for (j, piece) in pieces.iter().enumerate() {
            let rank = self.layout.order[j];
            let malformed = |reason: String| EngineError::Malformed { rank, reason };
            let (stats, blob) = StepStats::of_piece(piece)
                .ok_or_else(|| malformed("a stage-3 piece shorter than its own words".into()))?;
            place(range_at(k, j, w, self.options.root_maps), blob)
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
        report.stage2_seconds = (reduced - mapped).max(0.0);
        // Stage 3 starts when the last member has its range: a root that does not map starts
        // gathering at once and would otherwise count the others' map and stage 2 as well.
        report.stage3_seconds = (gathered_at - reduced).max(0.0);
        Ok(Collected {
            units,
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

impl MixtureEngine for Root<'_> {
    type Error = EngineError;

    fn moments(&mut self, step: u64, statistic: &Statistic) -> Result<Moments, EngineError> {
        Root::moments(self, step, statistic)
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, EngineError> {
        Root::rows(self, indices)
    }

    fn shape(&self) -> (u64, usize) {
        Root::shape(self)
    }
}
