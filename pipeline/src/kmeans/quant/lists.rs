//! The approximate search's lists through the integer kernel, list by list
//! ([`search_lists`]): every row probing a list is searched against it while its packed codes
//! are in cache, whatever map unit the row came from, and the candidates the error bound leaves
//! are re-ranked by direct distances, as the full pass does.

use super::codes::{CENTROID_BLOCK, Candidate, MR, NR, QuantCentroids, QuantSlice};
use super::isa::gather_rows;
use super::search::{check_shapes, check_unbiased, verify};
#[cfg(doc)]
use crate::kmeans::assign::dist2;
use crate::kmeans::assign::{Centroids, dot};
use crate::partition::Matrix;

/// An inverted file's lists as [`search_lists`] reads them: list `l` is the columns
/// `start[l]..start[l + 1]` of the quantised centroids, each list starting at a whole panel
/// ([`PANEL`](super::codes::PANEL)), and column `j` is known by `ids[j]` (a list padded to
/// whole panels has padding columns [`QuantCentroids::never`] keeps out of every search).
#[derive(Debug, Clone, Copy)]
pub struct Lists<'a> {
    /// Where each list starts, and the end of the last.
    pub start: &'a [usize],
    /// The id of each column (ties go to the lowest).
    pub ids: &'a [u32],
}

/// Reusable buffers of [`search_lists`].
#[derive(Debug, Default, Clone)]
pub struct ListScratch {
    /// The rows probing each list (row order), list `l`'s at `members[first[l]..first[l + 1]]`.
    first: Vec<usize>,
    members: Vec<u32>,
    /// The kernel's buffers: row codes side by side, products, one list's lower bounds per slot.
    codes: Vec<u8>,
    dots: Vec<i32>,
    lower: Vec<f32>,
    /// Per row, the least upper bound over the lists searched so far, `x . x`, and the best
    /// column so far (distance, id, column).
    min_upper: Vec<f32>,
    own: Vec<f32>,
    best: Vec<(f32, u32, u32)>,
    /// One list's candidates for one row.
    found: Vec<Candidate>,
}

/// Assigns each row of `x` (quantised as `xq`) to the nearest column of the lists it probes
/// (`probed[i * p..][..p]` for row `i`, `p = probed.len() / x.rows()`): `labels[i]` is the id
/// ([`Lists::ids`]) of the brute-force arg-min of [`dist2`] over those columns (the lowest id
/// on ties) and `dist[i]` that distance.
///
/// Lists are visited in order, each against all the rows probing it, [`MR`] rows a kernel
/// call, so a list's codes are read once for many rows. Of each list a row verifies by direct
/// distance the columns whose lower bound is at most both its least upper bound over the lists
/// seen so far and its best distance so far (with slack). Exact by the full pass's argument:
/// the nearest column's lower bound is at most every column's upper bound and distance, so it
/// is verified, and the verification ranks by [`dist2`] alone. A row's result therefore depends
/// only on the row and its lists, not on the other rows searched with it; and a row holds no
/// more than one list's candidates at a time.
///
/// # Panics
/// As [`assign_quantized`](super::search::assign_quantized), if the lists do not cover the
/// centroids in whole panels, or `probed` does not name at least one list for each of the
/// `x.rows()` rows.
#[allow(clippy::too_many_arguments)]
pub fn search_lists(
    x: Matrix<'_>,
    xq: QuantSlice<'_>,
    cq: &QuantCentroids,
    centroids: &Centroids,
    lists: Lists<'_>,
    probed: &[u32],
    scratch: &mut ListScratch,
    labels: &mut [u32],
    dist: &mut [f32],
) {
    let n = x.rows();
    assert!(
        xq.len == n && labels.len() == n && dist.len() == n,
        "quantised rows and outputs must hold {n} rows"
    );
    if n == 0 {
        return;
    }
    check_shapes(x, xq, cq, centroids);
    check_unbiased(cq);
    let count = lists.start.len().saturating_sub(1);
    assert!(
        lists.start.first() == Some(&0)
            && lists.start.last() == Some(&centroids.k())
            && lists.ids.len() == centroids.k()
            && lists
                .start
                .windows(2)
                .all(|w| w[0] <= w[1] && w[0].is_multiple_of(NR))
            && centroids.k().is_multiple_of(NR),
        "lists must cover the {} columns in whole panels",
        centroids.k()
    );
    assert!(
        probed.len() >= n
            && probed.len().is_multiple_of(n)
            && probed.iter().all(|&l| (l as usize) < count),
        "probed lists must name lists, at least one and the same number per row"
    );
    let probes = probed.len() / n;
    let s = scratch;
    rows_by_list(probed, probes, count, &mut s.first, &mut s.members);
    let span = lists
        .start
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or(0);
    s.lower.resize(MR * span.max(NR), f32::INFINITY);
    s.dots.resize(MR * CENTROID_BLOCK, 0);
    s.min_upper.clear();
    s.min_upper.resize(n, f32::INFINITY);
    s.own.clear();
    s.own.extend((0..n).map(|i| dot(x.row(i), x.row(i))));
    s.best.clear();
    s.best.resize(n, (f32::INFINITY, u32::MAX, u32::MAX));
    let kernel = cq.isa;
    let step = kernel.panels_per_call();
    let at = std::array::from_fn::<usize, MR, _>(|slot| slot * span);
    for l in 0..count {
        let (c0, len) = (lists.start[l], lists.start[l + 1] - lists.start[l]);
        if len == 0 {
            continue;
        }
        for chunk in s.members[s.first[l]..s.first[l + 1]].chunks(MR) {
            // Slots past the chunk repeat its first row (their bounds are not read).
            let of = std::array::from_fn(|slot| {
                xq.start + chunk.get(slot).copied().unwrap_or(chunk[0]) as usize
            });
            let mut upper = [f32::INFINITY; MR];
            // Builds that copy the rows for the kernel copy them once for the whole list.
            let gathered = !kernel.reads_rows_in_place();
            if gathered {
                gather_rows(xq.rows, of, &mut s.codes);
            }
            let terms = of.map(|g| xq.rows.terms(g));
            for panel in (0..len / NR).step_by(step) {
                let panels = (c0 + panel * NR, step.min(len / NR - panel));
                let at = at.map(|a| a + panel * NR);
                let u = if gathered {
                    let rows = (&s.codes[..], terms);
                    kernel.gathered_panels(rows, cq, panels, &mut s.dots, &mut s.lower, at)
                } else {
                    let buffers = (&mut s.codes, &mut s.dots[..]);
                    kernel.search_panels(xq.rows, of, cq, panels, buffers, &mut s.lower, at)
                };
                for (upper, u) in upper.iter_mut().zip(u) {
                    *upper = upper.min(u);
                }
            }
            for (slot, &r) in chunk.iter().enumerate() {
                let (r, g) = (r as usize, of[slot]);
                let slack = xq.rows.slack[g];
                let least = &mut s.min_upper[r];
                *least = least.min(upper[slot]);
                // The list's candidates, verified at once against the row's best so far: a
                // column whose lower bound is above the least upper bound over the lists seen,
                // or above the best distance found (with both sides' slack), is strictly farther.
                let (d, _, col) = s.best[r];
                let mut stop = *least + 4.0 * slack;
                if let Some(c) = cq.slack.get(col as usize) {
                    stop = stop.min(d - s.own[r] + 4.0 * (slack + c));
                }
                s.found.clear();
                kernel.below(&s.lower[at[slot]..][..len], c0, stop, &mut s.found);
                if !s.found.is_empty() {
                    s.best[r] = verify(
                        kernel,
                        (x.row(r), s.own[r]),
                        centroids,
                        cq,
                        slack,
                        Some(lists.ids),
                        &mut s.found,
                        s.best[r],
                        stop,
                    );
                }
            }
        }
    }
    for (i, &(d, id, _)) in s.best.iter().enumerate() {
        debug_assert!(id != u32::MAX, "row {i} found no column");
        labels[i] = id;
        dist[i] = d;
    }
}

/// The rows probing each of `count` lists, ascending (a stable counting sort of `probed`,
/// `probes` lists a row): list `l`'s at `rows[first[l]..first[l + 1]]`. Shared by the f32 and
/// the integer searches of an inverted file.
pub fn rows_by_list(
    probed: &[u32],
    probes: usize,
    count: usize,
    first: &mut Vec<usize>,
    rows: &mut Vec<u32>,
) {
    first.clear();
    first.resize(count + 1, 0);
    for &l in probed {
        first[l as usize + 1] += 1;
    }
    for l in 0..count {
        first[l + 1] += first[l];
    }
    rows.resize(probed.len(), 0);
    let mut fill = first[..count].to_vec();
    for (at, &l) in probed.iter().enumerate() {
        let slot = &mut fill[l as usize];
        rows[*slot] = (at / probes) as u32;
        *slot += 1;
    }
}
