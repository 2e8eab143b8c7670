//! The passes over quantised rows: the full assignment ([`assign_quantized`]), its runs of
//! centroid groups ([`assign_quantized_runs`]), the pruned search of open groups
//! ([`search_runs`]) and the `r` nearest ([`nearest_few_quantized`]); each scans the integer
//! products for candidates and re-ranks them by direct distances.

use super::codes::*;
use crate::kmeans::assign::Centroids;
#[cfg(doc)]
use crate::kmeans::assign::dist2;
use crate::partition::Matrix;

/// The integer products of rows `rows` (whole kernel groups may read the zero rows past them)
/// and centroids `centroids` (whole panels) into `dots`, `CENTROID_BLOCK` per row.
pub(super) fn block_products(
    kernel: Isa,
    xq: &QuantRows,
    rows: std::ops::Range<usize>,
    cq: &QuantCentroids,
    centroids: std::ops::Range<usize>,
    dots: &mut [i32],
) {
    let width = xq.width;
    let (panels, step) = (centroids.len() / NR, kernel.panels_per_call());
    for panel in (0..panels).step_by(step) {
        let count = step.min(panels - panel);
        let codes = &cq.panels[(centroids.start + panel * NR) * width..][..count * NR * width];
        for group in (0..rows.len()).step_by(MR) {
            let x = &xq.codes[(rows.start + group) * width..][..MR * width];
            let out = &mut dots[group * CENTROID_BLOCK + panel * NR..];
            kernel.products(x, width, codes, count, out);
        }
    }
}

/// Panics unless the rows, their codes, the quantised centroids and the centroids agree.
pub(super) fn check_shapes(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
) {
    assert!(
        x.dims() == xq.rows.dims
            && cq.dims == x.dims()
            && cq.width == xq.rows.width
            && centroids.dims() == x.dims(),
        "dims differ"
    );
    assert_eq!(cq.k, centroids.k(), "quantised centroids are another set");
}

/// Panics if `cq` carries biases: only [`nearest_few_quantized`] adds them to the distances it
/// verifies; the other searches would compare biased bounds with unbiased distances.
pub(super) fn check_unbiased(cq: &QuantCentroids) {
    assert!(
        cq.bias.is_empty(),
        "biased centroids are searched by nearest_few_quantized only"
    );
}

/// Reusable buffers of [`assign_quantized`].
#[derive(Debug, Default, Clone)]
pub struct QuantScratch {
    pub(super) dots: Vec<i32>,
    pub(super) lower: Vec<f32>,
    pub(super) min_upper: Vec<f32>,
    pub(super) candidates: Vec<Vec<Candidate>>,
}

/// Assigns each row of `x` (quantised as `xq`) to its nearest centroid: `labels[i]` is the
/// brute-force arg-min of [`dist2`] (lowest index on ties) and `dist[i]` that distance.
///
/// # Panics
/// If `x`, `xq`, `cq` and `centroids` disagree in rows, dims or `k`, or the output slices are
/// not `x.rows()` long.
pub fn assign_quantized(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
    scratch: &mut QuantScratch,
    labels: &mut [u32],
    dist: &mut [f32],
) {
    scan(x, xq, cq, centroids, scratch, labels, dist, None);
}

/// Centroids in runs (groups): for the pruned assignment, which needs each row's least lower
/// bound over every run besides its nearest centroid.
#[derive(Debug, Clone, Copy)]
pub struct Runs<'a> {
    /// Run `g` is columns `start[g]..start[g + 1]` (`start` ends at `k`).
    pub start: &'a [usize],
    /// The index each column is known by (ties go to the lowest of these).
    pub ids: &'a [u32],
    /// Every run starts at a multiple of [`PANEL`] (see [`Runs::new`]).
    pub(super) aligned: bool,
}

impl<'a> Runs<'a> {
    /// Runs `g` = columns `start[g]..start[g + 1]`, known by `ids`.
    pub fn new(start: &'a [usize], ids: &'a [u32]) -> Self {
        let aligned = start.iter().all(|s| s.is_multiple_of(NR));
        Self {
            start,
            ids,
            aligned,
        }
    }
}

/// [`assign_quantized`] over centroids in runs: `labels[i]` is the id ([`Runs::ids`]) of the
/// brute-force arg-min of [`dist2`] (the lowest id on ties), and `least[i * G + g]` a lower bound
/// on `||c||^2 - 2 x.c` over the columns of run `g` (`G` runs), float rounding of `||x||^2` aside.
///
/// # Panics
/// As [`assign_quantized`], and if `least` is not `x.rows() x G` or the runs do not cover the
/// centroids.
#[allow(clippy::too_many_arguments)]
pub fn assign_quantized_runs(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
    runs: Runs<'_>,
    scratch: &mut QuantScratch,
    labels: &mut [u32],
    dist: &mut [f32],
    least: &mut [f32],
) {
    let count = runs.start.len().saturating_sub(1);
    assert!(
        runs.start.first() == Some(&0)
            && runs.start.last() == Some(&centroids.k())
            && runs.ids.len() == centroids.k()
            && least.len() == x.rows() * count,
        "runs must cover the {} centroids and `least` hold {} x {count} values",
        centroids.k(),
        x.rows()
    );
    scan(
        x,
        xq,
        cq,
        centroids,
        scratch,
        labels,
        dist,
        Some((runs, least)),
    );
}

/// Reusable buffers of [`search_runs`].
#[derive(Debug, Default, Clone)]
pub struct SearchScratch {
    /// Pair indices ordered by run, and where each run's start in that order.
    pub(super) order: Vec<u32>,
    pub(super) first: Vec<usize>,
    /// The codes of the [`MR`] rows of one kernel call (builds that need them side by side),
    /// and their products.
    pub(super) codes: Vec<u8>,
    pub(super) dots: Vec<i32>,
    /// Per pair, the lower bounds of its run's columns (`span` each).
    pub(super) lowers: Vec<f32>,
    pub(super) min_upper: Vec<f32>,
    pub(super) candidates: Vec<Candidate>,
}

/// The searched runs of a row block: for each `(row, run)` of `pairs` (row ascending; each row's
/// runs once), the integer products of `x.row(rows[row])` and the run's columns, and from them:
///
/// - `best[row]`, on entry a column and its exact [`dist2`] (the row's label, an upper bound),
///   becomes the brute-force arg-min of [`dist2`] over that column and every column of the row's
///   runs (ties to the lowest id, [`Runs::ids`]), with that distance; a row without pairs keeps
///   its entry;
/// - `least[p]` a lower bound on `||c||^2 - 2 x.c` over pair `p`'s run other than the row's
///   final best column (infinity if none), float rounding of `||x||^2` aside, as
///   [`assign_quantized_runs`] gives for every run.
///
/// Exact by [`assign_quantized`]'s argument: the nearest column's lower bound is at most every
/// column's upper bound and the entry's distance, so it is verified; columns whose lower bound
/// exceeds the best distance found (with both sides' slack) are strictly farther. This is
/// Yinyang's group search on the integer kernel: a row pays for the runs it searches only.
///
/// # Panics
/// As [`assign_quantized`], if a run does not start at a multiple of [`PANEL`] or is longer than
/// [`CENTROID_BLOCK`], or `pairs`, `rows`, `best` and `least` disagree.
#[allow(clippy::too_many_arguments)]
pub fn search_runs(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
    runs: Runs<'_>,
    rows: &[usize],
    pairs: &[(u32, u32)],
    scratch: &mut SearchScratch,
    best: &mut [(u32, f32)],
    least: &mut [f32],
) {
    check_shapes(x, xq, cq, centroids);
    check_unbiased(cq);
    let count = runs.start.len().saturating_sub(1);
    check_search(xq, centroids.k(), runs, rows, pairs, best, least);
    let span = runs
        .start
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(NR) * NR)
        .max()
        .unwrap_or(0);
    let search = RunSearch {
        kernel: cq.isa,
        x,
        xq,
        cq,
        centroids,
        runs,
        rows,
        pairs,
        count,
        span,
    };
    let SearchScratch {
        order,
        first,
        codes,
        dots,
        lowers,
        min_upper,
        candidates,
    } = scratch;
    order_by_run(pairs, count, order, first);
    dots.resize(MR * CENTROID_BLOCK, 0);
    // Each pair's slice is written (its run's whole panels) before it is read.
    // Spare spans past the pairs' take the writes of a kernel call's unused slots.
    if lowers.len() < (pairs.len() + MR) * span {
        lowers.resize((pairs.len() + MR) * span, f32::INFINITY);
    }
    min_upper.clear();
    min_upper.resize(rows.len(), f32::INFINITY);
    search.products(order, first, (codes, dots), lowers, min_upper);
    search.verify_rows(lowers, min_upper, candidates, best, least);
}

/// Panics unless `runs` cover the `k` centroids in runs of whole panels at most
/// [`CENTROID_BLOCK`] long, and `pairs` (in row order) name rows of `rows` (rows of `xq`) and
/// runs, with `best` one entry per row and `least` one per pair ([`search_runs`]).
fn check_search(
    xq: QuantSlice<'_>,
    k: usize,
    runs: Runs<'_>,
    rows: &[usize],
    pairs: &[(u32, u32)],
    best: &[(u32, f32)],
    least: &[f32],
) {
    let count = runs.start.len().saturating_sub(1);
    assert!(
        runs.start.first() == Some(&0)
            && runs.start.last() == Some(&k)
            && runs.ids.len() == k
            && runs.start.windows(2).all(|w| {
                w[0].is_multiple_of(NR) && w[0] <= w[1] && w[1] - w[0] <= CENTROID_BLOCK
            }),
        "runs must cover the {k} centroids, each starting at a whole panel"
    );
    assert!(
        best.len() == rows.len()
            && least.len() == pairs.len()
            && rows.iter().all(|&i| i < xq.len)
            && best.iter().all(|&(col, _)| (col as usize) < k)
            && pairs.windows(2).all(|w| w[0].0 <= w[1].0)
            && pairs
                .iter()
                .all(|&(r, g)| (r as usize) < rows.len() && (g as usize) < count),
        "pairs must name rows and runs, in row order"
    );
}

/// Orders the indices of `pairs` by run into `order`, run `g`'s at `order[first[g]..first[g +
/// 1]]` (`count` runs): a stable counting sort, so rows stay ascending within a run.
fn order_by_run(pairs: &[(u32, u32)], count: usize, order: &mut Vec<u32>, first: &mut Vec<usize>) {
    first.clear();
    first.resize(count + 1, 0);
    for &(_, g) in pairs {
        first[g as usize + 1] += 1;
    }
    for g in 0..count {
        first[g + 1] += first[g];
    }
    order.resize(pairs.len(), 0);
    let mut fill = first[..count].to_vec();
    for (p, &(_, g)) in pairs.iter().enumerate() {
        order[fill[g as usize]] = p as u32;
        fill[g as usize] += 1;
    }
}

/// The checked inputs of one [`search_runs`] call, shared by its two phases.
#[derive(Clone, Copy)]
struct RunSearch<'a> {
    kernel: Isa,
    x: Matrix<'a>,
    xq: QuantSlice<'a>,
    cq: &'a QuantCentroids,
    centroids: &'a Centroids,
    runs: Runs<'a>,
    rows: &'a [usize],
    pairs: &'a [(u32, u32)],
    /// Number of runs.
    count: usize,
    /// Lower bounds kept per pair: the longest run, in whole panels.
    span: usize,
}

impl RunSearch<'_> {
    /// The integer phase: run by run, [`MR`] pairs a kernel call, each pair's lower bounds into
    /// its `span` of `lowers` and each row's least upper bound into `min_upper[row]` (which the
    /// caller fills with infinity). `order` and `first` are the pairs by run
    /// ([`order_by_run`]); `codes` and `dots` the kernel's buffers.
    #[inline]
    fn products(
        &self,
        order: &[u32],
        first: &[usize],
        (codes, dots): (&mut Vec<u8>, &mut [i32]),
        lowers: &mut [f32],
        min_upper: &mut [f32],
    ) {
        let Self {
            kernel,
            xq,
            cq,
            runs,
            rows,
            pairs,
            count,
            span,
            ..
        } = *self;
        let qrows = xq.rows;
        let step = kernel.panels_per_call();
        for g in 0..count {
            let (c0, panels) = (
                runs.start[g],
                (runs.start[g + 1] - runs.start[g]).div_ceil(NR),
            );
            for chunk in order[first[g]..first[g + 1]].chunks(MR) {
                // Slots past the chunk repeat its first row and write to the spare spans past
                // the pairs' (their results are not read).
                let (mut slots, mut of) = ([0usize; MR], [0usize; MR]);
                for slot in 0..MR {
                    let p = chunk.get(slot).copied().unwrap_or(chunk[0]) as usize;
                    of[slot] = xq.start + rows[pairs[p].0 as usize];
                    slots[slot] = if slot < chunk.len() {
                        p
                    } else {
                        pairs.len() + slot
                    };
                }
                for panel in (0..panels).step_by(step) {
                    let n = step.min(panels - panel);
                    let mut at = [0usize; MR];
                    for (at, &slot) in at.iter_mut().zip(&slots) {
                        *at = slot * span + panel * NR;
                    }
                    let upper = kernel.search_panels(
                        qrows,
                        of,
                        cq,
                        (c0 + panel * NR, n),
                        (codes, dots),
                        lowers,
                        at,
                    );
                    for (&p, &u) in chunk.iter().zip(&upper) {
                        let row = pairs[p as usize].0 as usize;
                        min_upper[row] = min_upper[row].min(u);
                    }
                }
            }
        }
    }

    /// The verifying phase, row by row: the candidates of the row's pairs' `lowers` below its
    /// stop (from `min_upper` and its entry in `best`) are verified by direct distance into
    /// `best[row]`, then each pair's `least` is taken from its lower bounds without the best
    /// column.
    #[inline]
    fn verify_rows(
        &self,
        lowers: &[f32],
        min_upper: &[f32],
        candidates: &mut Vec<Candidate>,
        best: &mut [(u32, f32)],
        least: &mut [f32],
    ) {
        let Self {
            kernel,
            x,
            xq,
            cq,
            centroids,
            runs,
            rows,
            pairs,
            span,
            ..
        } = *self;
        let qrows = xq.rows;
        let mut a = 0;
        while a < pairs.len() {
            let row = pairs[a].0 as usize;
            let b = a + pairs[a..]
                .iter()
                .take_while(|q| q.0 as usize == row)
                .count();
            let (i, g) = (rows[row], xq.start + rows[row]);
            let xi = x.row(i);
            let own = crate::kmeans::assign::dot(xi, xi);
            let slack = qrows.slack[g];
            let (col, d) = best[row];
            let stop = (min_upper[row] + 4.0 * slack)
                .min(d - own + 4.0 * (slack + cq.slack[col as usize]));
            candidates.clear();
            for q in a..b {
                let c0 = runs.start[pairs[q].1 as usize];
                let len = (runs.start[pairs[q].1 as usize + 1] - c0).div_ceil(NR) * NR;
                kernel.below(&lowers[q * span..][..len], c0, stop, candidates);
            }
            let entry = (d, runs.ids[col as usize], col);
            let (d, _, col) = verify(
                kernel,
                (xi, own),
                centroids,
                cq,
                slack,
                Some(runs.ids),
                candidates,
                entry,
                stop,
            );
            best[row] = (col, d);
            for q in a..b {
                let run = pairs[q].1 as usize;
                let c0 = runs.start[run];
                let lower = &lowers[q * span..][..runs.start[run + 1] - c0];
                least[q] = match (col as usize).checked_sub(c0) {
                    // The best column's own run: its other members.
                    Some(j) if j < lower.len() => {
                        least_of(&lower[..j]).min(least_of(&lower[j + 1..]))
                    }
                    _ => least_of(lower),
                };
            }
            a = b;
        }
    }
}

/// The scan behind [`assign_quantized`] and [`assign_quantized_runs`].
#[allow(clippy::too_many_arguments)]
pub(super) fn scan(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
    scratch: &mut QuantScratch,
    labels: &mut [u32],
    dist: &mut [f32],
    mut runs: Option<(Runs<'_>, &mut [f32])>,
) {
    let kernel = cq.isa;
    let n = x.rows();
    assert!(
        xq.len == n && labels.len() == n && dist.len() == n,
        "quantised rows and outputs must hold {n} rows"
    );
    check_shapes(x, xq, cq, centroids);
    check_unbiased(cq);
    let rows = xq.rows;
    let padded = cq.norm.len();
    let QuantScratch {
        dots,
        lower,
        min_upper,
        candidates,
    } = scratch;
    dots.resize(ROW_BLOCK * CENTROID_BLOCK, 0);
    lower.resize(CENTROID_BLOCK, 0.0);
    min_upper.resize(ROW_BLOCK, 0.0);
    candidates.resize_with(ROW_BLOCK, Vec::new);
    for r0 in (0..n).step_by(ROW_BLOCK) {
        let bm = ROW_BLOCK.min(n - r0);
        if let Some((runs, least)) = runs.as_mut() {
            // The block's minima start here, so they are in cache while the block is scanned.
            let count = runs.start.len() - 1;
            least[r0 * count..(r0 + bm) * count].fill(f32::INFINITY);
        }
        let first = xq.start + r0;
        min_upper[..bm].fill(f32::INFINITY);
        candidates[..bm].iter_mut().for_each(Vec::clear);
        for c0 in (0..padded).step_by(CENTROID_BLOCK) {
            let bn = CENTROID_BLOCK.min(padded - c0);
            block_products(kernel, rows, first..first + bm, cq, c0..c0 + bn, dots);
            for i in 0..bm {
                let g = first + i;
                let terms = rows.terms(g);
                let dots = &dots[i * CENTROID_BLOCK..][..bn];
                let least = kernel.bounds(dots, cq, c0, terms, &mut lower[..bn]);
                min_upper[i] = min_upper[i].min(least);
                let threshold = min_upper[i] + 4.0 * rows.slack[g];
                let list = &mut candidates[i];
                kernel.below(&lower[..bn], c0, threshold, list);
                if list.len() > COMPACT_AT {
                    list.retain(|c| c.lower <= threshold);
                }
                if let Some((runs, least)) = runs.as_mut() {
                    run_minima(kernel, runs, c0, &lower[..bn], least, r0 + i);
                }
            }
        }
        let ids = runs.as_ref().map(|(r, _)| r.ids);
        for i in 0..bm {
            let g = first + i;
            let threshold = min_upper[i] + 4.0 * rows.slack[g];
            let xi = x.row(r0 + i);
            let own = crate::kmeans::assign::dot(xi, xi);
            let entry = (f32::INFINITY, u32::MAX, u32::MAX);
            let slack = rows.slack[g];
            let (best, label, _) = verify(
                kernel,
                (xi, own),
                centroids,
                cq,
                slack,
                ids,
                &mut candidates[i],
                entry,
                threshold,
            );
            labels[r0 + i] = label;
            dist[r0 + i] = best;
        }
    }
}

/// The nearest of `best` (distance, id, column) and `candidates` to `xi` (`own` = `xi . xi`) by
/// direct distance (ties to the lowest id: `ids[column]`, or the column without `ids`).
/// Candidates are taken in ascending order of their lower bounds (sorted here), so the nearest
/// tends to come first; one whose lower bound exceeds `stop` (which starts as the caller's
/// threshold and falls to each better distance found, with both sides' slack; `slack` is the
/// row's) is strictly farther and skipped, as in [`nearest_few_quantized`]. The order decides
/// only how many distances are computed, never the result.
#[allow(clippy::too_many_arguments)]
pub(super) fn verify(
    kernel: Isa,
    (xi, own): (&[f32], f32),
    centroids: &Centroids,
    cq: &QuantCentroids,
    slack: f32,
    ids: Option<&[u32]>,
    candidates: &mut [Candidate],
    mut best: (f32, u32, u32),
    mut stop: f32,
) -> (f32, u32, u32) {
    if candidates.len() > 4 {
        candidates.sort_unstable_by(|a, b| a.lower.total_cmp(&b.lower));
    }
    let mut next = Pending::new(candidates);
    while let Some((columns, count)) = next.take(stop) {
        let found = kernel.dists(xi, centroids, &columns[..count]);
        for (&j, &d) in columns[..count].iter().zip(&found) {
            let id = ids.map_or(j, |ids| ids[j as usize]);
            if d < best.0 || (d == best.0 && id < best.1) {
                best = (d, id, j);
                stop = stop.min(d - own + 4.0 * (slack + cq.slack[j as usize]));
            }
        }
    }
    best
}

/// The least [`dist2`] from `xi` to the centroids `columns` (infinity without any), four at a
/// time through the widest build [`crate::isa::level`] allows: each distance is [`dist2`]'s
/// bit for bit, so the least is too.
pub fn least_dist2(xi: &[f32], centroids: &Centroids, columns: impl Iterator<Item = u32>) -> f32 {
    let kernel = Isa::detect();
    let (mut least, mut batch, mut count) = (f32::INFINITY, [0u32; 4], 0);
    let mut flush = |batch: &[u32]| {
        let found = kernel.dists(xi, centroids, batch);
        for &d in &found[..batch.len()] {
            least = if d < least { d } else { least };
        }
    };
    for j in columns {
        batch[count] = j;
        count += 1;
        if count == 4 {
            flush(&batch);
            count = 0;
        }
    }
    if count > 0 {
        flush(&batch[..count]);
    }
    least
}

/// Lowers row `row`'s run minima in `least` by the lower bounds of columns `c0..` (`lower`).
pub(super) fn run_minima(
    kernel: Isa,
    runs: &Runs<'_>,
    c0: usize,
    lower: &[f32],
    least: &mut [f32],
    row: usize,
) {
    let count = runs.start.len() - 1;
    let end = (c0 + lower.len()).min(runs.start[count]);
    if c0 >= end {
        return;
    }
    if runs.aligned && lower.len() <= CENTROID_BLOCK {
        // Runs of whole panels: one least per panel (padding columns' bounds are infinite).
        let mut minima = [0f32; CENTROID_BLOCK / NR];
        let minima = &mut minima[..lower.len() / NR];
        kernel.panel_minima(lower, minima);
        let least = &mut least[row * count..][..count];
        let mut g = runs.start.partition_point(|&s| s <= c0) - 1;
        for (p, &m) in minima.iter().enumerate() {
            let column = c0 + p * NR;
            if column >= end {
                break;
            }
            while runs.start[g + 1] <= column {
                g += 1;
            }
            least[g] = least[g].min(m);
        }
        return;
    }
    // Runs with columns in c0..end (empty runs give empty ranges).
    let first = runs.start.partition_point(|&s| s <= c0) - 1;
    let last = runs.start[..count].partition_point(|&s| s < end);
    let least = &mut least[row * count..][..count];
    for (g, slot) in (first..last).zip(&mut least[first..last]) {
        let lo = runs.start[g].max(c0) - c0;
        let hi = runs.start[g + 1].min(end) - c0;
        *slot = slot.min(least_of(&lower[lo..hi]));
    }
}

/// Reusable buffers of [`nearest_few_quantized`].
#[derive(Debug, Default, Clone)]
pub struct FewScratch {
    pub(super) dots: Vec<i32>,
    pub(super) lower: Vec<f32>,
    /// Per row of a block, the `r` least upper bounds seen so far, ascending.
    pub(super) uppers: Vec<f32>,
    pub(super) threshold: Vec<f32>,
    pub(super) candidates: Vec<Vec<Candidate>>,
}

/// The `r` nearest centroids of each row of `x` (quantised as `xq`): row `i`'s words at
/// `words[i * r..][..r]` and their [`dist2`] distances at `dists[i * r..][..r]`, nearest first,
/// ties to the lower index: exactly the first `r` of all centroids sorted by (`dist2`, index),
/// with each centroid's bias added to `dist2` (and to the distances written) when `cq` is
/// [`QuantCentroids::biased`]. With `r > k` the extra slots hold `u32::MAX` and infinity.
///
/// Exact by the same argument as [`assign_quantized`], with the `r`-th least upper bound in place
/// of the least: the `r` true nearest have values at most that bound, so their lower bounds are
/// too. The `r` candidates of least lower bound are verified first; every other candidate is
/// verified only if its lower bound does not exceed the `r`-th distance found so far (with the
/// slack of both sides' rounding): the others are strictly farther.
///
/// # Panics
/// As [`assign_quantized`], with outputs of `x.rows() * r` entries.
#[allow(clippy::too_many_arguments)]
pub fn nearest_few_quantized(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
    scratch: &mut FewScratch,
    r: usize,
    words: &mut [u32],
    dists: &mut [f32],
) {
    let kernel = cq.isa;
    let n = x.rows();
    assert!(
        xq.len == n && words.len() == n * r && dists.len() == n * r,
        "quantised rows and outputs must hold {n} rows"
    );
    check_shapes(x, xq, cq, centroids);
    if r == 0 {
        return;
    }
    let rows = xq.rows;
    let (k, padded) = (cq.k, cq.norm.len());
    let FewScratch {
        dots,
        lower,
        uppers,
        threshold,
        candidates,
    } = scratch;
    dots.resize(ROW_BLOCK * CENTROID_BLOCK, 0);
    lower.resize(CENTROID_BLOCK, 0.0);
    uppers.resize(ROW_BLOCK * r, 0.0);
    threshold.resize(ROW_BLOCK, 0.0);
    candidates.resize_with(ROW_BLOCK, Vec::new);
    for r0 in (0..n).step_by(ROW_BLOCK) {
        let bm = ROW_BLOCK.min(n - r0);
        let first = xq.start + r0;
        uppers[..bm * r].fill(f32::INFINITY);
        threshold[..bm].fill(f32::INFINITY);
        candidates[..bm].iter_mut().for_each(Vec::clear);
        for c0 in (0..padded).step_by(CENTROID_BLOCK) {
            let bn = CENTROID_BLOCK.min(padded - c0);
            block_products(kernel, rows, first..first + bm, cq, c0..c0 + bn, dots);
            for i in 0..bm {
                let g = first + i;
                let terms = rows.terms(g);
                let dots = &dots[i * CENTROID_BLOCK..][..bn];
                // The r least upper bounds so far (padding's are infinite and never enter),
                // then the block's candidates under the threshold they make.
                let least = &mut uppers[i * r..][..r];
                kernel.few_bounds(dots, cq, c0, terms, &mut lower[..bn], least);
                threshold[i] = least[r - 1] + 4.0 * rows.slack[g];
                let list = &mut candidates[i];
                kernel.below(&lower[..bn], c0, threshold[i], list);
                if list.len() > COMPACT_AT {
                    let t = threshold[i];
                    list.retain(|c| c.lower <= t);
                }
            }
        }
        for i in 0..bm {
            let g = first + i;
            let xi = x.row(r0 + i);
            let (w, d) = (
                &mut words[(r0 + i) * r..][..r],
                &mut dists[(r0 + i) * r..][..r],
            );
            w.fill(u32::MAX);
            d.fill(f32::INFINITY);
            let list = &mut candidates[i];
            list.retain(|c| (c.index as usize) < k && c.lower <= threshold[i]);
            // The r least lower bounds first (they are verified whatever they are), the rest in
            // any order.
            if list.len() > r {
                list.select_nth_unstable_by(r - 1, |a, b| {
                    a.lower.total_cmp(&b.lower).then(a.index.cmp(&b.index))
                });
            }
            let own = crate::kmeans::assign::dot(xi, xi);
            let mut stop = f32::INFINITY;
            let mut next = Pending::new(list);
            while let Some((columns, count)) = next.take(stop) {
                let found = kernel.dists(xi, centroids, &columns[..count]);
                for (&j, &dist) in columns[..count].iter().zip(&found) {
                    let dist = dist + cq.bias(j as usize);
                    // Strictly nearer than the r-th, or as near with a lower index.
                    if (dist, j) < (d[r - 1], w[r - 1]) {
                        let mut at = r - 1;
                        while at > 0 && (dist, j) < (d[at - 1], w[at - 1]) {
                            d[at] = d[at - 1];
                            w[at] = w[at - 1];
                            at -= 1;
                        }
                        (d[at], w[at]) = (dist, j);
                        if w[r - 1] != u32::MAX {
                            let far = w[r - 1] as usize;
                            stop = d[r - 1] - own + 4.0 * (rows.slack[g] + cq.slack[far]);
                        }
                    }
                }
            }
        }
    }
}

/// Candidates taken for direct distances up to four at a time, skipping those whose lower bound
/// exceeds the caller's current `stop` (which only falls as distances are found).
pub(super) struct Pending<'a> {
    pub(super) list: &'a [Candidate],
    pub(super) at: usize,
}

impl<'a> Pending<'a> {
    pub(super) fn new(list: &'a [Candidate]) -> Self {
        Self { list, at: 0 }
    }

    /// The next up to four columns with lower bounds at most `stop`, in list order, and how
    /// many there are; `None` when the list is done.
    pub(super) fn take(&mut self, stop: f32) -> Option<([u32; 4], usize)> {
        let (mut columns, mut count) = ([0u32; 4], 0);
        while count < 4 && self.at < self.list.len() {
            let c = self.list[self.at];
            self.at += 1;
            if c.lower <= stop {
                columns[count] = c.index;
                count += 1;
            }
        }
        (count > 0).then_some((columns, count))
    }
}
