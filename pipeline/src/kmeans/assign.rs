//! The map step's kernel: nearest centroid of every vector by blocked GEMM with a fused arg-min.
//!
//! `||x - c||^2 = ||x||^2 - 2 x.c + ||c||^2`; the arg-min over `c` needs only `||c||^2 - 2 x.c`.
//! Vectors are taken [`ROW_BLOCK`] at a time and centroids [`CENTROID_BLOCK`] at a time, so the
//! dot-product buffer is bounded (1 MiB) whatever `k` is, up to millions of centroids. Each block
//! of dot products comes from the `gemm` crate (single-threaded here: map tasks are the unit of
//! parallelism) and is folded into a running minimum per vector before the next block.
//!
//! Ties go to the lowest centroid index, so the assignment is deterministic.

use crate::partition::Matrix;

/// Vectors per GEMM block.
pub const ROW_BLOCK: usize = 256;
/// Centroids per GEMM block.
pub const CENTROID_BLOCK: usize = 1024;

/// A set of centroids with their squared norms.
#[derive(Debug, Clone, PartialEq)]
pub struct Centroids {
    k: usize,
    dims: usize,
    data: Vec<f32>,
    norms: Vec<f32>,
}

impl Centroids {
    /// Centroids from `k x dims` row-major values.
    ///
    /// # Panics
    /// If `data.len()` is not a multiple of `dims` or `dims == 0`.
    pub fn new(data: Vec<f32>, dims: usize) -> Self {
        assert!(
            dims > 0 && data.len().is_multiple_of(dims),
            "centroid data is not k x {dims}"
        );
        let k = data.len() / dims;
        let norms = data.chunks_exact(dims).map(|c| dot(c, c)).collect();
        Self {
            k,
            dims,
            data,
            norms,
        }
    }

    /// Centroids whose searches ([`assign`], [`nearest_few`]) rank `||x - c_j||^2 + bias[j]`
    /// instead of the distance (the distances they report include the bias).
    ///
    /// # Panics
    /// As [`Centroids::new`], or if `bias` is not one value per centroid.
    pub fn biased(data: Vec<f32>, dims: usize, bias: &[f32]) -> Self {
        let mut c = Self::new(data, dims);
        assert_eq!(bias.len(), c.k, "one bias per centroid");
        for (n, b) in c.norms.iter_mut().zip(bias) {
            *n += b;
        }
        c
    }

    /// Number of centroids.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Values per centroid.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Centroid `j`.
    pub fn row(&self, j: usize) -> &[f32] {
        &self.data[j * self.dims..][..self.dims]
    }

    /// Squared norms of the centroids.
    pub fn norms(&self) -> &[f32] {
        &self.norms
    }

    /// All values, row-major.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Consumes the set, returning its values.
    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }
}

/// Dot product with eight independent `f32` accumulators (vectorises; order fixed).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// Squared Euclidean distance with eight independent accumulators.
#[inline]
pub fn dist2(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            let d = x[l] - y[l];
            acc[l] += d * d;
        }
    }
    dist2_finish(&acc, ra, rb)
}

/// [`dist2`] from a row of u8 codes, decoded as it is read ([`crate::store::u8_value`]): bit for
/// bit [`dist2`] of the decoded row (the same values, operations and order), with no copy of
/// the row.
///
/// # Panics
/// If the lengths differ.
#[inline]
pub fn dist2_u8(a: &[u8], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "rows of other lengths");
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            let d = crate::store::u8_value(x[l]) - y[l];
            acc[l] += d * d;
        }
    }
    let mut tail = [0f32; 8];
    for (t, &v) in tail.iter_mut().zip(ra) {
        *t = crate::store::u8_value(v);
    }
    dist2_finish(&acc, &tail[..ra.len()], rb)
}

/// The end of [`dist2`] and of every build of it: the eight lanes summed in order, plus the
/// squared differences of the elements past the last whole eight (`a`, `b`).
#[inline(always)]
pub(super) fn dist2_finish(lanes: &[f32; 8], a: &[f32], b: &[f32]) -> f32 {
    let tail: f32 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    lanes.iter().sum::<f32>() + tail
}

/// [`dist2`] from `a` to four rows at once, each bit for bit [`dist2`]'s (the same operations
/// per row in the same order; the four chains only interleave, which hides their latency).
///
/// # Panics
/// If a row's length differs from `a`'s.
pub fn dist2_4(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
    assert!(
        b.iter().all(|b| b.len() == a.len()),
        "rows of other lengths"
    );
    let whole = a.len() / 8 * 8;
    let mut acc = [[0f32; 8]; 4];
    for at in (0..whole).step_by(8) {
        let x = &a[at..at + 8];
        for (acc, b) in acc.iter_mut().zip(&b) {
            let y = &b[at..at + 8];
            for l in 0..8 {
                let d = x[l] - y[l];
                acc[l] += d * d;
            }
        }
    }
    let mut out = [0f32; 4];
    for ((out, acc), b) in out.iter_mut().zip(&acc).zip(&b) {
        *out = dist2_finish(acc, &a[whole..], &b[whole..]);
    }
    out
}

/// Reusable buffers of [`assign`].
#[derive(Debug, Default, Clone)]
pub struct AssignScratch {
    pub(super) dots: Vec<f32>,
    pub(super) best: Vec<f32>,
}

/// Assigns each row of `x` to its nearest centroid: `labels[i]` and `dist[i] = ||x_i - c||^2`
/// (clamped at zero; computed through the expansion, so accurate to f32 rounding of the norms).
///
/// # Panics
/// If dims differ or the output slices are not `x.rows()` long.
pub fn assign(
    x: Matrix<'_>,
    centroids: &Centroids,
    scratch: &mut AssignScratch,
    labels: &mut [u32],
    dist: &mut [f32],
) {
    let n = x.rows();
    assert!(
        labels.len() == n && dist.len() == n,
        "output slices must hold {n} rows"
    );
    let k = centroids.k();
    let best = &mut scratch.best;
    best.resize(ROW_BLOCK, 0.0);
    for_each_block(x, centroids, &mut scratch.dots, |block, r0, c0, dots| {
        let (bm, bn) = (block.rows(), dots.len() / block.rows());
        if c0 == 0 {
            best[..bm].fill(f32::INFINITY);
        }
        let norms = &centroids.norms[c0..c0 + bn];
        for i in 0..bm {
            if let Some((j, v)) = row_min(&dots[i * bn..(i + 1) * bn], norms, best[i]) {
                best[i] = v;
                labels[r0 + i] = (c0 + j) as u32;
            }
        }
        if c0 + bn == k {
            for i in 0..bm {
                let xi = block.row(i);
                dist[r0 + i] = (dot(xi, xi) + best[i]).max(0.0);
            }
        }
    });
}

/// The `r` nearest centroids of each row of `x`: row `i`'s words at `words[i * r..][..r]` and
/// their squared distances (clamped at zero) at `dists[i * r..][..r]`, nearest first, ties to
/// the lower index (the first is [`assign`]'s word). With `r > k` the extra slots hold
/// `u32::MAX` and infinity.
///
/// # Panics
/// If dims differ or the output slices are not `x.rows() * r` long.
pub fn nearest_few(
    x: Matrix<'_>,
    centroids: &Centroids,
    scratch: &mut AssignScratch,
    r: usize,
    words: &mut [u32],
    dists: &mut [f32],
) {
    let n = x.rows();
    assert!(
        words.len() == n * r && dists.len() == n * r,
        "output slices must hold {n} x {r} entries"
    );
    if r == 0 {
        return;
    }
    words.fill(u32::MAX);
    dists.fill(f32::INFINITY);
    let k = centroids.k();
    for_each_block(x, centroids, &mut scratch.dots, |block, r0, c0, dots| {
        let (bm, bn) = (block.rows(), dots.len() / block.rows());
        let norms = &centroids.norms[c0..c0 + bn];
        for i in 0..bm {
            let (w, d) = (
                &mut words[(r0 + i) * r..][..r],
                &mut dists[(r0 + i) * r..][..r],
            );
            for (j, (&dot, &norm)) in dots[i * bn..(i + 1) * bn].iter().zip(norms).enumerate() {
                let v = norm - 2.0 * dot;
                // Strictly better than the worst kept: equal values keep the lower index.
                if v < d[r - 1] {
                    let mut at = r - 1;
                    while at > 0 && v < d[at - 1] {
                        d[at] = d[at - 1];
                        w[at] = w[at - 1];
                        at -= 1;
                    }
                    d[at] = v;
                    w[at] = (c0 + j) as u32;
                }
            }
            if c0 + bn == k {
                let xi = block.row(i);
                let own = dot(xi, xi);
                for v in d.iter_mut().filter(|v| v.is_finite()) {
                    *v = (own + *v).max(0.0);
                }
            }
        }
    });
}

/// The blocked GEMM walk shared by the assignment kernels: for each block of at most
/// [`ROW_BLOCK`] rows (starting at row `r0`), and within it for each block of at most
/// [`CENTROID_BLOCK`] centroids in order (starting at `c0`), `visit(block, r0, c0, dots)` with
/// `dots` the `block.rows() x bn` products `x . c`, row-major. Nothing is visited when `k == 0`.
///
/// # Panics
/// If the dims of `x` and the centroids differ.
pub(super) fn for_each_block(
    x: Matrix<'_>,
    centroids: &Centroids,
    dots: &mut Vec<f32>,
    mut visit: impl FnMut(Matrix<'_>, usize, usize, &[f32]),
) {
    let (n, d, k) = (x.rows(), x.dims(), centroids.k());
    assert_eq!(
        d,
        centroids.dims(),
        "vectors have {d} dims, centroids {}",
        centroids.dims()
    );
    dots.resize(ROW_BLOCK * CENTROID_BLOCK, 0.0);
    for r0 in (0..n).step_by(ROW_BLOCK) {
        let block = x.slice(r0, r0 + ROW_BLOCK.min(n - r0));
        for c0 in (0..k).step_by(CENTROID_BLOCK) {
            let bn = CENTROID_BLOCK.min(k - c0);
            let dots = &mut dots[..block.rows() * bn];
            block_dots(block, centroids, c0, bn, dots);
            visit(block, r0, c0, dots);
        }
    }
}

/// `dots = block . centroids[c0..c0+bn]^T`, row-major `block.rows() x bn`.
pub(super) fn block_dots(
    block: Matrix<'_>,
    centroids: &Centroids,
    c0: usize,
    bn: usize,
    dots: &mut [f32],
) {
    let (bm, d) = (block.rows(), block.dims());
    assert!(dots.len() >= bm * bn && (c0 + bn) * d <= centroids.data.len());
    // SAFETY: dst is bm x bn row-major inside `dots`; lhs is the bm rows of `block` (stride
    // `block.stride()`, d values each); rhs is the d x bn transpose view of centroids c0..c0+bn
    // (row j of the centroids is column j of rhs). All lie within their slices (checked above and
    // by `Matrix::new`).
    unsafe {
        gemm::gemm(
            bm,
            bn,
            d,
            dots.as_mut_ptr(),
            1,
            bn as isize,
            false,
            block.as_ptr(),
            1,
            block.stride() as isize,
            centroids.data.as_ptr().add(c0 * d),
            d as isize,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// The lowest `norms[j] - 2 dots[j]` strictly below `bound`, with the first index reaching it.
#[inline]
pub(super) fn row_min(dots: &[f32], norms: &[f32], bound: f32) -> Option<(usize, f32)> {
    // Pass 1, vectorised: the minimum value.
    let mut lanes = [f32::INFINITY; 8];
    let (cd, cn) = (dots.chunks_exact(8), norms.chunks_exact(8));
    let (rd, rn) = (cd.remainder(), cn.remainder());
    for (d, n) in cd.zip(cn) {
        for l in 0..8 {
            let v = n[l] - 2.0 * d[l];
            lanes[l] = if v < lanes[l] { v } else { lanes[l] };
        }
    }
    let mut min = lanes.iter().copied().fold(f32::INFINITY, f32::min);
    for (d, n) in rd.iter().zip(rn) {
        min = min.min(n - 2.0 * d);
    }
    if min >= bound {
        return None;
    }
    // Pass 2: its first position (same arithmetic, so equality is exact).
    let j = dots
        .iter()
        .zip(norms)
        .position(|(d, n)| n - 2.0 * d == min)?;
    Some((j, min))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Values in `[-0.5, 0.5)` from a fixed LCG (also used by the int8 kernel's tests).
    pub(in crate::kmeans) fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    #[test]
    fn four_distances_at_once_are_dist2_bit_for_bit() {
        for dims in [1, 7, 8, 13, 512, 515] {
            let a = values(dims, 1);
            let rows: Vec<Vec<f32>> = (2..6).map(|seed| values(dims, seed)).collect();
            let got = dist2_4(&a, [&rows[0], &rows[1], &rows[2], &rows[3]]);
            for (got, row) in got.iter().zip(&rows) {
                assert_eq!(got.to_bits(), dist2(&a, row).to_bits(), "{dims} dims");
            }
        }
    }

    #[test]
    fn distances_from_u8_codes_are_dist2_of_the_decoded_row_bit_for_bit() {
        for dims in [1, 7, 8, 13, 512, 515] {
            let codes: Vec<u8> = (0..dims).map(|i| (i * 97 % 256) as u8).collect();
            let decoded: Vec<f32> = codes.iter().map(|&b| crate::store::u8_value(b)).collect();
            let b: Vec<f32> = values(dims, 3).iter().map(|v| v + 0.5).collect();
            let (got, want) = (dist2_u8(&codes, &b), dist2(&decoded, &b));
            assert_eq!(got.to_bits(), want.to_bits(), "{dims} dims");
        }
    }

    fn check(n: usize, k: usize, d: usize, stride: usize) {
        let raw = values(n * stride, 1);
        let x = Matrix::new(&raw, n, d, stride);
        let centroids = Centroids::new(values(k * d, 2), d);
        let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
        assign(
            x,
            &centroids,
            &mut AssignScratch::default(),
            &mut labels,
            &mut dist,
        );
        for i in 0..n {
            let exact: Vec<f64> = (0..k)
                .map(|j| {
                    x.row(i)
                        .iter()
                        .zip(centroids.row(j))
                        .map(|(a, b)| f64::from(a - b).powi(2))
                        .sum()
                })
                .collect();
            let best = exact.iter().copied().fold(f64::INFINITY, f64::min);
            let got = exact[labels[i] as usize];
            // Same assignment as brute force, or a tie within f32 rounding of the expansion.
            assert!(
                got - best <= 1e-5 * best.max(1.0),
                "row {i}: {got} vs best {best} (n={n} k={k} d={d})"
            );
            assert!(
                (f64::from(dist[i]) - got).abs() <= 1e-4 * got.max(1.0),
                "row {i} distance"
            );
        }
    }

    #[test]
    fn matches_brute_force_across_block_edges() {
        for (n, k, d, stride) in [
            (1, 1, 3, 3),
            (7, 3, 5, 7),
            (300, 1030, 16, 18),
            (513, 40, 512, 514),
            (20, 2100, 9, 9),
        ] {
            check(n, k, d, stride);
        }
    }

    #[test]
    fn the_few_nearest_are_the_sorted_head_of_every_distance() {
        for (n, k, d, r) in [
            (5, 3, 4, 5),
            (300, 1030, 16, 4),
            (20, 2100, 9, 1),
            (3, 7, 2, 0),
        ] {
            let x = values(n * d, 7);
            let centroids = Centroids::new(values(k * d, 8), d);
            let (mut words, mut dists) = (vec![0u32; n * r], vec![0f32; n * r]);
            let mut scratch = AssignScratch::default();
            let matrix = Matrix::dense(&x, d);
            nearest_few(matrix, &centroids, &mut scratch, r, &mut words, &mut dists);
            let (mut labels, mut best) = (vec![0u32; n], vec![0f32; n]);
            assign(matrix, &centroids, &mut scratch, &mut labels, &mut best);
            for i in 0..n {
                let mut exact: Vec<(f64, usize)> = (0..k)
                    .map(|j| {
                        let e = x[i * d..][..d]
                            .iter()
                            .zip(centroids.row(j))
                            .map(|(a, b)| f64::from(a - b).powi(2))
                            .sum();
                        (e, j)
                    })
                    .collect();
                exact.sort_by(|a, b| a.0.total_cmp(&b.0));
                for slot in 0..r {
                    let (w, dist) = (words[i * r + slot], dists[i * r + slot]);
                    if slot >= k {
                        assert_eq!((w, dist), (u32::MAX, f32::INFINITY));
                        continue;
                    }
                    let want = exact[slot].0;
                    assert!(
                        (f64::from(dist) - want).abs() <= 1e-4 * want.max(1.0),
                        "row {i} slot {slot}: {dist} vs {want}"
                    );
                }
                if r > 0 {
                    assert_eq!(words[i * r], labels[i], "the first is assign's word");
                }
            }
        }
    }

    #[test]
    fn ties_go_to_the_lowest_index() {
        let c = Centroids::new(vec![1.0, 0.0, 1.0, 0.0, -1.0, 0.0], 2);
        let x = [0.0f32, 0.0];
        let (mut labels, mut dist) = ([9u32], [0f32]);
        assign(
            Matrix::dense(&x, 2),
            &c,
            &mut AssignScratch::default(),
            &mut labels,
            &mut dist,
        );
        assert_eq!(labels[0], 0);
        assert_eq!(dist[0], 1.0);
    }
}
