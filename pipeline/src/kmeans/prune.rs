//! Exact pruned assignment with Yinyang bounds (Ding et al., ICML 2015) on top of the GEMM kernel.
//!
//! The centroids are split once into `G` groups (a few Lloyd steps over the first centroids; about
//! ten centroids per group, at most [`MAX_GROUPS`]). Every vector keeps its label and, per group,
//! a lower bound on its distance to the group's members other than its label (`n x G` values).
//! Each iteration, with `drift_j` how far centroid `j` moved and `Δ_g` the largest drift in group
//! `g`:
//!
//! 1. the exact distance `u` to the current label is computed for every vector (O(n d); it is also
//!    the vector's contribution to the inertia), and every group bound drops by `Δ_g`;
//! 2. **global filter**: when `u` is below every group bound (with slack), no centroid can be
//!    closer: the label stays;
//! 3. **group filter**: otherwise only groups whose bound is below the best distance found so far
//!    are searched, and within them, **local filter**, a centroid whose own bound (the group's
//!    previous bound minus its own drift) already exceeds that best distance is skipped; the rest
//!    get an exact distance. Searched groups get fresh bounds.
//!
//! A direct distance costs several times what the GEMM pays per distance, so a vector whose groups
//! left to search hold more than [`DENSE_SEARCH`] of all centroids (early iterations, when
//! centroids still move far) is not searched one distance at a time: such vectors are gathered
//! and assigned by the blocked GEMM, which also records every group's minimum, as the first
//! iteration does for all. So a pruned iteration never costs much more than the f32 full pass.
//!
//! **With the integer kernel** (`Assignment::Pruned(Kernel::Int8)`) the search is the kernel's
//! too. Groups are whole panels of it ([`group_size`]: 32 centroids at k = 16,384, 128 at
//! 65,536; the clusters balanced to that size by [`balance`]), and a block of vectors hands its
//! open (vector, group) pairs to [`quant::search_runs`]: one kernel call per four vectors and up
//! to four of the group's panels, products and bounds fused, then direct distances for the few
//! candidates those bounds leave; a searched group's new bound is the least of its members'
//! integer lower bounds (looser than the GEMM's, a bound all the same). There is no local
//! filter: a group's members cost one call together.
//! Vectors whose open groups hold more than [`DENSE_SEARCH_INT8`] of the centroids take the
//! integer full pass ([`quant::assign_quantized_runs`]), as the first iteration does. On the
//! 1.17M dense HOG vectors at k = 16,384, 20 iterations take 170 s against 273 s of plain VNNI
//! passes and 1,575 s of faiss (`eval/large_k`); with a direct distance per searched centroid,
//! as the f32 search does, pruning cost more than the plain passes there.
//!
//! Bounds from the GEMM's expansion `||x||^2 - 2 x.c + ||c||^2` are lowered by a bound on its
//! rounding error, and every comparison carries a slack (1e-3 relative plus 1e-6 absolute) far
//! wider than the rounding of the direct distances. So a centroid is ruled out only where the full
//! pass would rule it out too: labels can differ from the full pass only between centroids at the
//! same distance to float precision (and the same label then gives the same sums).

use rayon::prelude::*;

use super::assign::{AssignScratch, Centroids, ROW_BLOCK, dist2, dist2_u8, dot, for_each_block};
use super::quant::{self, QuantCentroids, QuantScratch, QuantSlice, Runs};
use crate::partition::{Matrix, Rows};

const SLACK_RELATIVE: f32 = 1e-3;
const SLACK_ABSOLUTE: f32 = 1e-6;
/// Bound on the rounding error of an f32 dot product of 512-d unit-scale vectors, relative to
/// `||x||^2 + ||c||^2` (`d * eps / 2` for `d = 512`, doubled for the norms' own rounding).
const EXPANSION_ERROR: f32 = 6e-5;
/// Rows whose searches [`quant::search_runs`] runs at once: their codes stay in cache while the
/// groups' panels stream past.
const SEARCH_BLOCK: usize = 512;
/// [`DENSE_SEARCH`] for the integer search, whose products cost more than the full pass's (one
/// group's panels per call, fewer rows sharing a panel load, and the search's bookkeeping). It
/// matters in the first few iterations: on the 1.17M HOG vectors at k = 16,384, 0.5 ran
/// iterations 2-4 in 50 s against 0.3's 46 s (one run each, `eval/large_k/choices`).
pub const DENSE_SEARCH_INT8: f64 = 0.3;
/// Groups at most for the f32 search (the bounds take `4 G` bytes per vector). At k = 16,384 on
/// HOG, 1,024 groups ran 20 pruned iterations 1.22x faster than 256 and as fast as k / 10 = 1,639
/// (`eval/large_k`).
pub const MAX_GROUPS: usize = 1024;
/// Groups at most for the integer search. Its products are cheap enough that the bounds' own
/// traffic (`4 G` bytes per vector, read and written every iteration) weighs as much: at
/// k = 16,384 on the 1.17M HOG vectors, 20 iterations took 192 s with 1,024 groups, 168 s with
/// 512 and 184 s with 256 (one run each, the same labels; `eval/large_k/choices`).
pub const MAX_INT8_GROUPS: usize = 512;
/// A vector whose unfiltered groups hold more than this fraction of the centroids goes to the
/// GEMM instead of a search: a direct distance costs several GEMM distances (about five, estimated
/// from one early run on HOG; see `eval/kmeans_bench/README.md`).
pub const DENSE_SEARCH: f64 = 0.15;

/// `upper` is certainly below `bound`, beyond float rounding.
#[inline]
fn proves(upper: f32, bound: f32) -> bool {
    upper + SLACK_RELATIVE * (upper + bound) + SLACK_ABSOLUTE <= bound
}

/// The centroid groups of a run, fixed at its first pruned iteration.
#[derive(Debug, Clone)]
pub struct Groups {
    /// Group of each centroid.
    of: Vec<u32>,
    /// Members of group `g`: `members[start[g]..start[g + 1]]`.
    start: Vec<usize>,
    members: Vec<u32>,
    /// Where each centroid is in `members` (its column in the group-ordered centroids).
    column: Vec<u32>,
}

/// Centroids per group of the integer search for `k` centroids: whole panels of its kernel, as
/// few as make at most [`MAX_INT8_GROUPS`] groups (16 up to k = 8,192; 32 at 16,384; 128 at
/// 65,536).
pub fn group_size(k: usize) -> usize {
    quant::PANEL * k.div_ceil(quant::PANEL * MAX_INT8_GROUPS).max(1)
}

/// Groups for `k` centroids, [`Groups::new`]'s `aligned` or not (a memory plan's `k` may exceed
/// the address space: saturating).
pub fn group_count(k: u64, aligned: bool) -> u64 {
    if aligned {
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        k.div_ceil(group_size(k)).max(1) as u64
    } else {
        k.div_ceil(10).clamp(1, MAX_GROUPS as u64)
    }
}

impl Groups {
    /// The groups of `centroids`: five Lloyd steps over the centroids themselves, from evenly
    /// spaced starting members, cluster them (deterministic). For the f32 search (`aligned` false)
    /// each cluster is a group, about ten centroids each. For the integer search, which computes
    /// whole panels, every group holds [`group_size`] centroids (the last may hold fewer):
    /// [`balance`] fills the clusters to those sizes.
    pub fn new(centroids: &Centroids, aligned: bool) -> Self {
        let (k, d) = (centroids.k(), centroids.dims());
        let size = group_size(k);
        let count = usize::try_from(group_count(k as u64, aligned)).unwrap_or(1);
        let mut centers: Vec<f32> = (0..count)
            .flat_map(|g| centroids.row(g * k / count).iter().copied())
            .collect();
        let all = Matrix::dense(centroids.as_slice(), d);
        let mut cluster = vec![0u32; k];
        let mut dist = vec![0f32; k];
        for step in 0..6 {
            let current = Centroids::new(centers.clone(), d);
            // In parallel over whole GEMM row blocks (the same blocks as one call, so the same
            // labels on every node whatever its thread count).
            let rows = 16 * ROW_BLOCK;
            cluster
                .par_chunks_mut(rows)
                .zip(dist.par_chunks_mut(rows))
                .enumerate()
                .for_each_init(AssignScratch::default, |scratch, (i, (of, dist))| {
                    let block = all.slice(i * rows, i * rows + of.len());
                    super::assign(block, &current, scratch, of, dist);
                });
            if step == 5 {
                break;
            }
            let mut sums = vec![0f64; count * d];
            let mut counts = vec![0usize; count];
            for (j, &g) in cluster.iter().enumerate() {
                counts[g as usize] += 1;
                for (s, &v) in sums[g as usize * d..][..d].iter_mut().zip(centroids.row(j)) {
                    *s += f64::from(v);
                }
            }
            for g in (0..count).filter(|&g| counts[g] > 0) {
                for (c, &s) in centers[g * d..][..d].iter_mut().zip(&sums[g * d..][..d]) {
                    *c = (s / counts[g] as f64) as f32;
                }
            }
        }
        if aligned {
            cluster = balance(centroids, &Centroids::new(centers, d), size);
        }
        let mut members: Vec<u32> = (0..k as u32).collect();
        members.sort_by_key(|&j| (cluster[j as usize], j));
        let start: Vec<usize> = if aligned {
            (0..=count).map(|g| (g * size).min(k)).collect()
        } else {
            let mut start = vec![0usize; count + 1];
            for &g in &cluster {
                start[g as usize + 1] += 1;
            }
            for g in 0..count {
                start[g + 1] += start[g];
            }
            start
        };
        let (mut of, mut column) = (vec![0u32; k], vec![0u32; k]);
        for g in 0..count {
            for (pos, &j) in members.iter().enumerate().take(start[g + 1]).skip(start[g]) {
                (of[j as usize], column[j as usize]) = (g as u32, pos as u32);
            }
        }
        Self {
            of,
            start,
            members,
            column,
        }
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// Whether there are no groups (never: even `k = 0` has one, empty).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of centroids grouped.
    pub fn k(&self) -> usize {
        self.of.len()
    }

    fn members(&self, g: usize) -> &[u32] {
        &self.members[self.start[g]..self.start[g + 1]]
    }
}

/// Per-iteration facts about the centroids that the bounds need.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// How far each centroid moved since the previous iteration (empty on the first).
    drift: Vec<f32>,
    /// The largest drift in each group.
    group_drift: Vec<f32>,
    /// The centroids in group order (`Groups::members`), so a group is a contiguous run of
    /// GEMM columns.
    sorted: Centroids,
    /// `sorted` quantised, when the full passes run through the integer kernel.
    quantized: Option<QuantCentroids>,
    /// The largest `||c||^2`.
    max_norm: f32,
}

impl Geometry {
    /// Geometry of `current` centroids that moved from `previous` (if any); with `int8`, the
    /// full passes (first iteration, wide searches) go through the integer kernel
    /// ([`quant`]), and [`UnitBounds::step`] needs the rows' codes.
    pub fn new(
        current: &Centroids,
        previous: Option<&Centroids>,
        groups: &Groups,
        int8: bool,
    ) -> Self {
        let k = current.k();
        let drift: Vec<f32> = match previous {
            Some(prev) if prev.k() == k && groups.k() == k => (0..k)
                .map(|j| dist2(current.row(j), prev.row(j)).sqrt())
                .collect(),
            _ => Vec::new(),
        };
        let mut group_drift = vec![0f32; groups.len()];
        for (&g, &d) in groups.of.iter().zip(&drift) {
            let slot = &mut group_drift[g as usize];
            *slot = slot.max(d);
        }
        let sorted = Centroids::new(
            groups
                .members
                .iter()
                .flat_map(|&j| current.row(j as usize).iter().copied())
                .collect(),
            current.dims(),
        );
        let quantized = int8.then(|| QuantCentroids::new(&sorted));
        let max_norm = sorted.norms().iter().copied().fold(0f32, f32::max);
        Self {
            max_norm,
            drift,
            group_drift,
            sorted,
            quantized,
        }
    }
}

/// Bounds of the vectors of one map unit.
#[derive(Debug, Clone, Default)]
pub struct UnitBounds {
    labels: Vec<u32>,
    /// `n x G`: lower bound on the distance to group `g`'s members other than the label.
    lower: Vec<f32>,
    ready: bool,
}

/// Scratch of one pruned step.
#[derive(Debug, Default)]
pub struct PruneScratch {
    assign: AssignScratch,
    quant: QuantScratch,
    /// Centroids met in a vector's search: `(centroid, distance or lower bound)`.
    met: Vec<(u32, f32)>,
    searched: Vec<u32>,
    /// Vectors sent to the GEMM, their rows gathered, and the GEMM's results for them.
    dense: Vec<usize>,
    gathered: Vec<f32>,
    dense_labels: Vec<u32>,
    dense_dist: Vec<f32>,
    dense_lower: Vec<f32>,
    /// The integer search of a row block: its rows, their `(row, group)` pairs, each row's best
    /// `(column, distance)` and distance to its label before, and each pair's least lower bound.
    search: quant::SearchScratch,
    rows: Vec<usize>,
    own: Vec<f32>,
    open: Vec<u32>,
    pairs: Vec<(u32, u32)>,
    best: Vec<(u32, f32)>,
    least: Vec<f32>,
}

impl UnitBounds {
    /// Assigns the vectors of `x` (quantised as `xq` when the geometry is for the integer
    /// kernel), writing `labels` and squared distances `dist`; returns how many vectors kept
    /// their label without a search (the global filter). u8 rows are decoded into `decoded`
    /// only when some row is searched: a unit whose every label the filter proves is read as
    /// its codes.
    ///
    /// # Panics
    /// If the geometry is for the integer kernel and `xq` is `None`, or `xq` is not `x`'s rows.
    #[allow(clippy::too_many_arguments)]
    pub fn step(
        &mut self,
        x: Rows<'_>,
        decoded: &mut Vec<f32>,
        xq: Option<QuantSlice<'_>>,
        centroids: &Centroids,
        groups: &Groups,
        geometry: &Geometry,
        scratch: &mut PruneScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) -> usize {
        let n = x.rows();
        let count = groups.len();
        if !self.ready || geometry.drift.is_empty() || self.labels.len() != n {
            let x = x.to_f32(decoded);
            self.labels.resize(n, 0);
            self.lower.resize(n * count, 0.0);
            scratch.dense.clear();
            scratch.dense.extend(0..n);
            self.assign_dense(x, xq, geometry, groups, scratch, labels, dist);
            self.ready = true;
            return 0;
        }
        let drift = &geometry.group_drift;
        if self.all_proved(x, centroids, drift, &mut scratch.own, labels, dist) {
            return n;
        }
        // Some row is searched: the rows are needed as values.
        let x = x.to_f32(decoded);
        if let (Some(cq), Some(xq)) = (&geometry.quantized, xq) {
            return self.step_int8(
                x, xq, cq, centroids, groups, geometry, scratch, labels, dist,
            );
        }
        let dense_above = DENSE_SEARCH * centroids.k() as f64;
        let mut kept = 0usize;
        scratch.dense.clear();
        for i in 0..n {
            let xi = x.row(i);
            let label = self.labels[i] as usize;
            let own2 = dist2(xi, centroids.row(label));
            let own = own2.sqrt();
            let lower = &mut self.lower[i * count..][..count];
            let global = least_after(lower, &geometry.group_drift);
            if proves(own, global) {
                for (l, d) in lower.iter_mut().zip(&geometry.group_drift) {
                    *l -= d;
                }
                labels[i] = label as u32;
                dist[i] = own2;
                kept += 1;
                continue;
            }
            let wide: usize = lower
                .iter()
                .zip(&geometry.group_drift)
                .enumerate()
                .filter(|(_, (l, d))| !proves(own, *l - *d))
                .map(|(g, _)| groups.members(g).len())
                .sum();
            if wide as f64 > dense_above {
                scratch.dense.push(i);
                continue;
            }
            // Search the groups whose bound does not clear the best distance so far.
            let (mut best, mut best_d) = (label, own);
            scratch.met.clear();
            scratch.searched.clear();
            for (g, (l, &gd)) in lower.iter_mut().zip(&geometry.group_drift).enumerate() {
                let previous = *l;
                *l = previous - gd;
                if proves(best_d, *l) {
                    continue;
                }
                scratch.searched.push(g as u32);
                for &c in groups.members(g) {
                    let c = c as usize;
                    if c == label {
                        continue;
                    }
                    let bound = previous - geometry.drift[c];
                    if proves(best_d, bound) {
                        scratch.met.push((c as u32, bound));
                        continue;
                    }
                    let dc = dist2(xi, centroids.row(c)).sqrt();
                    scratch.met.push((c as u32, dc));
                    if dc < best_d || (dc == best_d && c < best) {
                        (best, best_d) = (c, dc);
                    }
                }
            }
            for &g in &scratch.searched {
                lower[g as usize] = f32::INFINITY;
            }
            for &(c, v) in scratch.met.iter().filter(|m| m.0 as usize != best) {
                let slot = &mut lower[groups.of[c as usize] as usize];
                *slot = slot.min(v);
            }
            if best != label {
                let slot = &mut lower[groups.of[label] as usize];
                *slot = slot.min(own);
            }
            self.labels[i] = best as u32;
            labels[i] = best as u32;
            dist[i] = if best == label {
                own2
            } else {
                dist2(xi, centroids.row(best))
            };
        }
        self.assign_dense(x, xq, geometry, groups, scratch, labels, dist);
        kept
    }

    /// Whether the global filter proves every row's label, each distance to its label taken
    /// from the row as it is held (u8 rows are not decoded). If so, writes what the filter
    /// writes for each row (label, distance, bounds lowered by the groups' drift) and returns
    /// true; else changes nothing (`own` aside) and returns false at the first row not proved.
    fn all_proved(
        &mut self,
        x: Rows<'_>,
        centroids: &Centroids,
        drift: &[f32],
        own: &mut Vec<f32>,
        labels: &mut [u32],
        dist: &mut [f32],
    ) -> bool {
        let count = drift.len();
        own.clear();
        for i in 0..x.rows() {
            let c = centroids.row(self.labels[i] as usize);
            let own2 = match x {
                Rows::F32(m) => dist2(m.row(i), c),
                Rows::U8(codes) => dist2_u8(codes.row(i), c),
            };
            let lower = &self.lower[i * count..][..count];
            if !proves(own2.sqrt(), least_after(lower, drift)) {
                return false;
            }
            own.push(own2);
        }
        for (i, &own2) in own.iter().enumerate() {
            for (l, d) in self.lower[i * count..][..count].iter_mut().zip(drift) {
                *l -= d;
            }
            (labels[i], dist[i]) = (self.labels[i], own2);
        }
        true
    }

    /// [`UnitBounds::step`] on the integer kernel: row blocks whose unproved groups are searched
    /// by [`quant::search_runs`] (a group is a run of whole panels), rows with wide searches by
    /// the integer full pass.
    #[allow(clippy::too_many_arguments)]
    fn step_int8(
        &mut self,
        x: Matrix<'_>,
        xq: QuantSlice<'_>,
        cq: &QuantCentroids,
        centroids: &Centroids,
        groups: &Groups,
        geometry: &Geometry,
        scratch: &mut PruneScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) -> usize {
        let (n, count) = (x.rows(), groups.len());
        let dense_above = DENSE_SEARCH_INT8 * centroids.k() as f64;
        let runs = Runs::new(&groups.start, &groups.members);
        let mut kept = 0usize;
        scratch.dense.clear();
        for b0 in (0..n).step_by(SEARCH_BLOCK) {
            scratch.rows.clear();
            scratch.pairs.clear();
            scratch.best.clear();
            scratch.own.clear();
            for i in b0..n.min(b0 + SEARCH_BLOCK) {
                let label = self.labels[i] as usize;
                let own2 = dist2(x.row(i), centroids.row(label));
                let own = own2.sqrt();
                let lower = &mut self.lower[i * count..][..count];
                if proves(own, drop_by(lower, &geometry.group_drift)) {
                    (labels[i], dist[i]) = (label as u32, own2);
                    kept += 1;
                    continue;
                }
                scratch.open.clear();
                open_groups(own, lower, &mut scratch.open);
                let wide: usize = scratch
                    .open
                    .iter()
                    .map(|&g| groups.start[g as usize + 1] - groups.start[g as usize])
                    .sum();
                if wide as f64 > dense_above {
                    scratch.dense.push(i);
                    continue;
                }
                let row = scratch.rows.len() as u32;
                scratch.rows.push(i);
                scratch.best.push((groups.column[label], own2));
                scratch.own.push(own2);
                scratch.pairs.extend(scratch.open.iter().map(|&g| (row, g)));
            }
            scratch.least.resize(scratch.pairs.len(), 0.0);
            quant::search_runs(
                x,
                xq,
                cq,
                &geometry.sorted,
                runs,
                &scratch.rows,
                &scratch.pairs,
                &mut scratch.search,
                &mut scratch.best,
                &mut scratch.least,
            );
            let mut searched = scratch.pairs.iter().zip(&scratch.least).peekable();
            for (row, (&i, &(column, d2))) in scratch.rows.iter().zip(&scratch.best).enumerate() {
                let xi = x.row(i);
                let xx = dot(xi, xi);
                let err = EXPANSION_ERROR * (xx + geometry.max_norm);
                let lower = &mut self.lower[i * count..][..count];
                while let Some((&(_, g), &v)) = searched.next_if(|((r, _), _)| *r as usize == row) {
                    lower[g as usize] = distance_bound(xx, v, err);
                }
                let (old, new) = (self.labels[i] as usize, groups.members[column as usize]);
                if new as usize != old {
                    // The old label is now one of its group's other members.
                    let slot = &mut lower[groups.of[old] as usize];
                    *slot = slot.min(scratch.own[row].sqrt());
                }
                (self.labels[i], labels[i], dist[i]) = (new, new, d2);
            }
        }
        self.assign_dense(x, Some(xq), geometry, groups, scratch, labels, dist);
        kept
    }

    /// Assigns the vectors in `scratch.dense` (ascending) by the GEMM (or the integer kernel),
    /// renewing all their bounds.
    #[allow(clippy::too_many_arguments)]
    fn assign_dense(
        &mut self,
        x: Matrix<'_>,
        xq: Option<QuantSlice<'_>>,
        geometry: &Geometry,
        groups: &Groups,
        scratch: &mut PruneScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) {
        let (m, d, count) = (scratch.dense.len(), x.dims(), groups.len());
        if m == 0 {
            return;
        }
        if m == x.rows() {
            // Every row (the list is ascending, so it is 0..n): assigned in place, no copies.
            grouped_assign(
                x,
                xq,
                geometry,
                groups,
                (&mut scratch.assign, &mut scratch.quant),
                labels,
                dist,
                &mut self.lower,
            );
            self.labels.copy_from_slice(labels);
            return;
        }
        scratch.gathered.clear();
        for &i in &scratch.dense {
            scratch.gathered.extend_from_slice(x.row(i));
        }
        scratch.dense_labels.resize(m, 0);
        scratch.dense_dist.resize(m, 0.0);
        scratch.dense_lower.resize(m * count, 0.0);
        let codes = xq.map(|xq| xq.gather(&scratch.dense));
        grouped_assign(
            Matrix::dense(&scratch.gathered, d),
            codes.as_ref().map(|q| q.slice(0, m)),
            geometry,
            groups,
            (&mut scratch.assign, &mut scratch.quant),
            &mut scratch.dense_labels,
            &mut scratch.dense_dist,
            &mut scratch.dense_lower,
        );
        for (slot, &i) in scratch.dense.iter().enumerate() {
            let label = scratch.dense_labels[slot];
            (labels[i], dist[i], self.labels[i]) = (label, scratch.dense_dist[slot], label);
            self.lower[i * count..][..count]
                .copy_from_slice(&scratch.dense_lower[slot * count..][..count]);
        }
    }
}

/// Nearest centers [`balance`] considers per centroid.
const BALANCE_CHOICES: usize = 8;

/// The centroids assigned to `centers` so that center `g` gets exactly `size` of them (the last
/// center the rest): every (centroid, one of its [`BALANCE_CHOICES`] nearest centers) pair in
/// ascending distance, a centroid going to the first with room (ties by centroid, then center);
/// the few whose choices all filled up go to the lowest centers with room. Deterministic.
fn balance(centroids: &Centroids, centers: &Centroids, size: usize) -> Vec<u32> {
    let (k, count) = (centroids.k(), centers.k());
    let capacity = |g: usize| size.min(k.saturating_sub(g * size));
    let all = Matrix::dense(centroids.as_slice(), centroids.dims());
    // Each centroid's nearest centers by `||m||^2 - 2 c.m`, ascending (ties to the lower
    // center), in parallel over whole row blocks.
    let rows = 16 * ROW_BLOCK;
    let mut near = vec![[(f32::INFINITY, u32::MAX); BALANCE_CHOICES]; k];
    near.par_chunks_mut(rows)
        .enumerate()
        .for_each_init(Vec::new, |dots, (i, near)| {
            let block = all.slice(i * rows, i * rows + near.len());
            for_each_block(block, centers, dots, |part, r0, c0, dots| {
                let bn = dots.len() / part.rows();
                for (list, row) in near[r0..].iter_mut().zip(dots.chunks_exact(bn)) {
                    for (j, &dot) in row.iter().enumerate() {
                        let v = centers.norms()[c0 + j] - 2.0 * dot;
                        let mut at = BALANCE_CHOICES;
                        while at > 0 && v < list[at - 1].0 {
                            at -= 1;
                        }
                        if at < BALANCE_CHOICES {
                            list.copy_within(at..BALANCE_CHOICES - 1, at + 1);
                            list[at] = (v, (c0 + j) as u32);
                        }
                    }
                }
            });
        });
    let mut choices: Vec<(f32, u32, u32)> = near
        .iter()
        .enumerate()
        .flat_map(|(j, list)| {
            let own = centroids.norms()[j];
            list.iter()
                .filter(|c| c.1 != u32::MAX)
                .map(move |&(v, g)| (own + v, j as u32, g))
        })
        .collect();
    choices.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let (mut group, mut fill) = (vec![u32::MAX; k], vec![0usize; count]);
    for (_, j, g) in choices {
        let (j, g) = (j as usize, g as usize);
        if group[j] == u32::MAX && fill[g] < capacity(g) {
            (group[j], fill[g]) = (g as u32, fill[g] + 1);
        }
    }
    let mut open = 0;
    for slot in group.iter_mut().filter(|g| **g == u32::MAX) {
        while fill[open] >= capacity(open) {
            open += 1;
        }
        (*slot, fill[open]) = (open as u32, fill[open] + 1);
    }
    group
}

/// The least of the bounds `lower` once each group's `drift` is taken off (the global filter's
/// bound), without changing them.
fn least_after(lower: &[f32], drift: &[f32]) -> f32 {
    lower
        .iter()
        .zip(drift)
        .fold(f32::INFINITY, |m, (l, d)| m.min(l - d))
}

/// Lowers every bound by its group's drift and returns the least (no NaN reaches here). Sixteen
/// independent lanes, so the compiler keeps them in vector registers.
fn drop_by(lower: &mut [f32], drift: &[f32]) -> f32 {
    let mut lanes = [f32::INFINITY; 16];
    for (l, d) in lower.chunks_mut(16).zip(drift.chunks(16)) {
        for ((m, l), d) in lanes.iter_mut().zip(l).zip(d) {
            *l -= d;
            *m = if *l < *m { *l } else { *m };
        }
    }
    lanes.into_iter().fold(f32::INFINITY, f32::min)
}

/// Appends to `out` the groups whose bound in `lower` does not clear `own` ([`proves`]), in
/// order: sixteen comparisons become a bit mask, and only the open groups cost a step.
fn open_groups(own: f32, lower: &[f32], out: &mut Vec<u32>) {
    for (c, chunk) in lower.chunks(16).enumerate() {
        let mut bits = 0u32;
        for (lane, &l) in chunk.iter().enumerate() {
            bits |= u32::from(!proves(own, l)) << lane;
        }
        while bits != 0 {
            out.push((c * 16) as u32 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
}

/// The full assignment of `x`, also writing each vector's nearest distance in every group other
/// than its label's (and in its label's group, the nearest other member) into `lower`
/// (`x.rows() x G`).
///
/// With the f32 GEMM (`xq` is `None`), the GEMM runs against the centroids in group order, so
/// each group's minimum is a contiguous run; the label is the minimum of `||c||^2 - 2 x.c` (the
/// arithmetic of [`super::assign`]), ties to the lowest centroid index. With the integer kernel
/// (the geometry's quantised centroids and the rows' codes `xq`), the label is the brute-force
/// arg-min of [`dist2`] ([`quant::assign_quantized_runs`]) and a group's bound is the least of
/// its members' lower bounds, a looser bound but a bound all the same.
#[allow(clippy::too_many_arguments)]
fn grouped_assign(
    x: Matrix<'_>,
    xq: Option<QuantSlice<'_>>,
    geometry: &Geometry,
    groups: &Groups,
    (scratch, quant_scratch): (&mut AssignScratch, &mut QuantScratch),
    labels: &mut [u32],
    dist: &mut [f32],
    lower: &mut [f32],
) {
    let sorted = &geometry.sorted;
    let (k, count) = (sorted.k(), groups.len());
    assert!(
        labels.len() == x.rows() && dist.len() == x.rows() && lower.len() == x.rows() * count,
        "output slices must hold {} rows",
        x.rows()
    );
    let max_norm = geometry.max_norm;
    if let Some(cq) = &geometry.quantized {
        let xq = xq.expect("the integer kernel's geometry needs the rows' codes");
        let runs = Runs::new(&groups.start, &groups.members);
        quant::assign_quantized_runs(x, xq, cq, sorted, runs, quant_scratch, labels, dist, lower);
        for i in 0..x.rows() {
            let low = &mut lower[i * count..][..count];
            finish_bounds(
                x.row(i),
                labels[i] as usize,
                max_norm,
                geometry,
                groups,
                low,
            );
        }
        return;
    }
    let best = &mut scratch.best;
    best.resize(ROW_BLOCK, 0.0);
    for_each_block(x, sorted, &mut scratch.dots, |block, r0, c0, dots| {
        let (bm, bn) = (block.rows(), dots.len() / block.rows());
        if c0 == 0 {
            best[..bm].fill(f32::INFINITY);
            lower[r0 * count..(r0 + bm) * count].fill(f32::INFINITY);
        }
        let norms = &sorted.norms()[c0..c0 + bn];
        // Groups with members in columns c0..c0+bn (empty groups give empty runs).
        let first = groups.start.partition_point(|&s| s <= c0) - 1;
        let last = groups.start[..count].partition_point(|&s| s < c0 + bn);
        for i in 0..bm {
            let row = &dots[i * bn..(i + 1) * bn];
            let low = &mut lower[(r0 + i) * count..][..count];
            let (mut b, mut label) = (best[i], labels[r0 + i]);
            for (g, slot) in (first..last).zip(&mut low[first..last]) {
                let lo = groups.start[g].max(c0) - c0;
                let hi = groups.start[g + 1].min(c0 + bn) - c0;
                let mut m = f32::INFINITY;
                for (&dj, &nj) in row[lo..hi].iter().zip(&norms[lo..hi]) {
                    let v = nj - 2.0 * dj;
                    m = if v < m { v } else { m };
                }
                *slot = slot.min(m);
                if m <= b {
                    // The run holds the best so far: its lowest centroid index reaching it.
                    let reach = (lo..hi)
                        .filter(|&j| norms[j] - 2.0 * row[j] == m)
                        .map(|j| groups.members[c0 + j])
                        .min()
                        .unwrap_or(u32::MAX);
                    label = if m < b { reach } else { label.min(reach) };
                    b = m;
                }
            }
            (best[i], labels[r0 + i]) = (b, label);
        }
        if c0 + bn < k {
            return;
        }
        for i in 0..bm {
            let xi = block.row(i);
            dist[r0 + i] = (dot(xi, xi) + best[i]).max(0.0);
            let low = &mut lower[(r0 + i) * count..][..count];
            finish_bounds(xi, labels[r0 + i] as usize, max_norm, geometry, groups, low);
        }
    });
}

/// A lower bound on a distance from a lower bound `v` on `||c||^2 - 2 x.c` (`xx` = `||x||^2`),
/// lowered by `err`, the expansion's rounding bound.
#[inline]
fn distance_bound(xx: f32, v: f32, err: f32) -> f32 {
    let t = xx + v - err;
    // Not `f32::max`: its NaN rule keeps the loop from vectorising (no NaN reaches here).
    if t > 0.0 { t } else { 0.0 }.sqrt()
}

/// Turns a vector's group minima of `||c||^2 - 2 x.c` (`low`) into lower bounds on distances,
/// lowered by a bound on the expansion's rounding, and sets its label's group to the nearest
/// other member, directly.
fn finish_bounds(
    xi: &[f32],
    label: usize,
    max_norm: f32,
    geometry: &Geometry,
    groups: &Groups,
    low: &mut [f32],
) {
    let xx = dot(xi, xi);
    let err = EXPANSION_ERROR * (xx + max_norm);
    for v in low.iter_mut() {
        *v = distance_bound(xx, *v, err);
    }
    let g = groups.of[label] as usize;
    let others = (groups.start[g]..groups.start[g + 1])
        .filter(|&pos| groups.members[pos] as usize != label)
        .map(|pos| pos as u32);
    // The square root is monotone: the least root is the root of the least.
    low[g] = quant::least_dist2(xi, &geometry.sorted, others).sqrt();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points around `c` well-separated centres in `d` dims (fixed LCG).
    fn blobs(c: usize, per: usize, d: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let centres: Vec<f32> = (0..c * d).map(|_| 8.0 * next()).collect();
        let mut out = Vec::with_capacity(c * per * d);
        for i in 0..c * per {
            let centre = &centres[(i % c) * d..][..d];
            out.extend(centre.iter().map(|&m| m + next()));
        }
        out
    }

    #[test]
    fn groups_cover_every_centroid_once() {
        let d = 6;
        let centroids = Centroids::new(blobs(5, 30, d, 2), d);
        // Clusters of about ten for the f32 search; whole panels of 16 for the integer search.
        for (aligned, count) in [(false, 15), (true, 10)] {
            let groups = Groups::new(&centroids, aligned);
            assert_eq!(groups.len(), count);
            let mut seen: Vec<u32> = (0..groups.len())
                .flat_map(|g| groups.members(g).to_vec())
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..150).collect::<Vec<_>>());
            for g in 0..groups.len() {
                for &c in groups.members(g) {
                    assert_eq!(groups.of[c as usize] as usize, g);
                    assert_eq!(groups.members[groups.column[c as usize] as usize], c);
                }
                if aligned {
                    assert_eq!(groups.start[g], 16 * g);
                }
            }
        }
    }

    /// Runs eight pruned steps over `data`, moving every centroid a little (one in eight far)
    /// between steps, and hands each step's number, the rows the GEMM assigned (all of them in a
    /// full pass), labels, distances and centroids to `check`; returns how many labels the global
    /// filter kept.
    fn drive(
        data: &[f32],
        d: usize,
        int8: bool,
        mut check: impl FnMut(u32, &[usize], &[u32], &[f32], &Centroids),
    ) -> usize {
        let x = Matrix::dense(data, d);
        let n = x.rows();
        let codes = int8.then(|| quant::QuantRows::new(x.into()));
        let mut centroids = Centroids::new(data[..96 * d].to_vec(), d);
        let groups = Groups::new(&centroids, int8);
        let mut bounds = UnitBounds::default();
        let mut scratch = PruneScratch::default();
        let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
        let mut previous: Option<Centroids> = None;
        let mut kept = 0;
        for step in 0..8u32 {
            let geometry = Geometry::new(&centroids, previous.as_ref(), &groups, int8);
            let full = !bounds.ready || previous.is_none();
            kept += bounds.step(
                x.into(),
                &mut Vec::new(),
                codes.as_ref().map(|c| c.slice(0, n)),
                &centroids,
                &groups,
                &geometry,
                &mut scratch,
                &mut labels,
                &mut dist,
            );
            let all: Vec<usize> = (0..n).collect();
            let dense = if full { &all } else { &scratch.dense };
            check(step, dense, &labels, &dist, &centroids);
            let mut next = centroids.as_slice().to_vec();
            for (j, row) in next.chunks_exact_mut(d).enumerate() {
                let jump = if (j + step as usize).is_multiple_of(8) {
                    0.5
                } else {
                    0.02
                };
                for (v, &p) in row.iter_mut().zip(&data[..d]) {
                    *v += jump * (p - *v);
                }
            }
            previous = Some(centroids);
            centroids = Centroids::new(next, d);
        }
        kept
    }

    #[test]
    fn a_unit_whose_every_label_the_bounds_prove_is_not_decoded() {
        // u8 rows near six far-apart centres, which are the centroids: at the second step (no
        // drift) the filter proves every label from the codes, on both kernels.
        use crate::partition::Codes;
        let (d, n, c) = (16, 120, 6);
        let centre = |g: usize, j: usize| if (g + j) % c < 2 { 200u8 } else { 20 };
        let bytes: Vec<u8> = (0..n * d)
            .map(|i| centre(i / d % c, i % d) + (i * 7 % 5) as u8)
            .collect();
        let rows = Rows::U8(Codes::new(&bytes, n, d, d));
        let values: Vec<f32> = (0..c * d)
            .map(|i| crate::store::u8_value(centre(i / d, i % d)))
            .collect();
        let centroids = Centroids::new(values, d);
        for int8 in [false, true] {
            let codes = int8.then(|| quant::QuantRows::new(rows));
            let groups = Groups::new(&centroids, int8);
            let (mut bounds, mut scratch) = (UnitBounds::default(), PruneScratch::default());
            let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
            for (step, previous) in [None, Some(&centroids)].into_iter().enumerate() {
                let geometry = Geometry::new(&centroids, previous, &groups, int8);
                let mut decoded = Vec::new();
                let kept = bounds.step(
                    rows,
                    &mut decoded,
                    codes.as_ref().map(|q| q.slice(0, n)),
                    &centroids,
                    &groups,
                    &geometry,
                    &mut scratch,
                    &mut labels,
                    &mut dist,
                );
                assert_eq!(
                    (kept, decoded.is_empty()),
                    (step * n, step == 1),
                    "int8 {int8}"
                );
                // Kept labels carry their direct distance (the full pass's f32 one is the
                // GEMM expansion's).
                let mut buf = Vec::new();
                for i in 0..n {
                    let want = dist2(rows.row(i, &mut buf), centroids.row(i % c));
                    assert_eq!(labels[i], (i % c) as u32);
                    assert!(step == 0 || dist[i].to_bits() == want.to_bits(), "row {i}");
                }
            }
        }
    }

    #[test]
    fn pruned_steps_match_the_full_assignment() {
        let d = 16;
        let data = blobs(12, 60, d, 4);
        let x = Matrix::dense(&data, d);
        let kept = drive(&data, d, false, |step, _, labels, dist, centroids| {
            let n = labels.len();
            let (mut want, mut want_dist) = (vec![0u32; n], vec![0f32; n]);
            super::super::assign(
                x,
                centroids,
                &mut AssignScratch::default(),
                &mut want,
                &mut want_dist,
            );
            assert_eq!(labels, &want[..], "step {step}");
            for (a, b) in dist.iter().zip(&want_dist) {
                assert!(
                    (a - b).abs() <= 1e-4 * b.max(1.0),
                    "step {step}: {a} vs {b}"
                );
            }
        });
        assert!(kept > 0, "the bounds never proved a label");
    }

    #[test]
    fn pruned_labels_are_nearest_in_f64_far_from_the_origin() {
        // Centres 100 noise widths from the origin: the expansion's rounding is then larger than
        // some gaps between nearest and second-nearest; the pruned labels must still be nearest
        // by exact (f64) distance, up to f32 rounding of direct distances. (Rows the GEMM assigns
        // rank such near-ties only to the expansion's precision; a bound never keeps such a
        // label, so a later step searches it again.)
        let d = 16;
        let data: Vec<f32> = blobs(12, 60, d, 9).iter().map(|v| v + 100.0).collect();
        let x = Matrix::dense(&data, d);
        let mut searched = 0;
        let kept = drive(&data, d, false, |step, dense, labels, _, centroids| {
            for (i, &label) in labels.iter().enumerate() {
                if dense.contains(&i) {
                    continue;
                }
                searched += 1;
                let exact = |j: usize| -> f64 {
                    x.row(i)
                        .iter()
                        .zip(centroids.row(j))
                        .map(|(&a, &b)| (f64::from(a) - f64::from(b)).powi(2))
                        .sum()
                };
                let best = (0..centroids.k()).map(exact).fold(f64::INFINITY, f64::min);
                let got = exact(label as usize);
                assert!(
                    got <= best * (1.0 + 1e-5) + 1e-9,
                    "step {step} row {i}: label at {got}, nearest at {best}"
                );
            }
        });
        assert!(
            searched >= 500,
            "only {searched} labels decided by the bounds"
        );
        assert!(kept > 0, "the bounds never proved a label");
    }

    #[test]
    fn pruned_steps_through_the_integer_kernel_give_the_brute_force_nearest() {
        // Every row, whether its label was kept, searched or found by the integer full pass,
        // gets the arg-min of direct distances (lowest index on ties) and that distance; far
        // from the origin too, where the integer bounds are loosest.
        let d = 16;
        for shift in [0.0, 100.0] {
            let data: Vec<f32> = blobs(12, 60, d, 5).iter().map(|v| v + shift).collect();
            let x = Matrix::dense(&data, d);
            let (mut passes, mut undense, mut whole) = (0, 0, 0);
            let kept = drive(&data, d, true, |step, dense, labels, dist, centroids| {
                passes += dense.len();
                // Later steps with every row in the full pass (assigned in place, no copies).
                whole += usize::from(step > 0 && dense.len() == labels.len());
                undense += labels.len() - dense.len();
                for (i, (&label, &got)) in labels.iter().zip(dist).enumerate() {
                    let (want, want_dist) = (0..centroids.k())
                        .map(|j| (dist2(x.row(i), centroids.row(j)), j as u32))
                        .fold((u32::MAX, f32::INFINITY), |(bj, bd), (dj, j)| {
                            if dj < bd { (j, dj) } else { (bj, bd) }
                        });
                    assert_eq!(
                        (label, got),
                        (want, want_dist),
                        "shift {shift} step {step} row {i}"
                    );
                }
            });
            // Far from the origin the integer bounds are too loose to prove labels (the
            // quantisation error scales with the vectors' length): correct, not faster.
            if shift == 0.0 {
                assert!(kept > 0, "the bounds never proved a label");
            }
            assert!(passes > data.len() / d, "shift {shift}: no wide search");
            if shift == 100.0 {
                assert!(whole > 0, "no later step sent every row to the full pass");
            }
            // Rows neither kept nor sent to the full pass went through the integer search.
            if shift == 0.0 {
                assert!(
                    undense - kept >= 500,
                    "only {} rows searched",
                    undense - kept
                );
            }
        }
    }
}
