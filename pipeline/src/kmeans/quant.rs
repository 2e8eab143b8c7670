//! The full assignment pass through 7-bit integer products, exact by re-ranking.
//!
//! On AVX2 machines without AVX-512 the f32 GEMM is bound by two FMA pipes (16 multiply-adds per
//! cycle per core); `vpmaddubsw` multiplies 32 `u8 x i8` pairs per instruction, and measured here
//! (Zen 3) integer products run at about twice the multiply-adds per cycle of f32 FMA. With
//! AVX-512 VNNI, `vpdpbusd` does 64 such products and their sums into `i32` in one instruction
//! (measured on Zen 5: the int8 pass at 0.18x faiss's f32 time, `eval/large_k`). So:
//!
//! 1. **Rows** are quantised once (they are static data, cached like the partitions): per row an
//!    offset `lo` and a step `s`, codes `q` in `0..=127`, so `x~ = lo + s q` elementwise.
//!    **Centroids** are quantised every iteration: per centroid a step `t`, codes `p` in
//!    `-127..=127`, `c~ = t p`. (`127 * 127 * 2` fits the `i16` pair sums of `vpmaddubsw`.)
//! 2. The integer dot `q . p` is exact, and `x~ . c~ = t (lo sum(p) + s (q . p))`, so
//!    `v = ||c||^2 - 2 x~ . c~` approximates `||x - c||^2 - ||x||^2` with a rigorous bound:
//!    `|x . c - x~ . c~| = |x . (c - c~) + (x - x~) . c~| <= ||x|| ||c - c~|| + ||x - x~|| ||c~||`
//!    (Cauchy-Schwarz; on HOG it leaves 2-3x fewer candidates than the `L1 x Linf` form, see
//!    `eval/kmeans_bench`), widened by a float slack relative to `||x||^2 + ||c||^2` (about 2e-5
//!    at 512 dims: four times the rounding bound of [`dist2`], far above the scan's own), every
//!    factor rounded up.
//! 3. Every centroid whose lower bound `v - 2e` is at most the least upper bound `v + 2e` over all
//!    centroids is a **candidate**; candidates get a direct distance ([`dist2`]) and the least
//!    wins, the lowest index on ties.
//!
//! So the labels are exactly those of a brute-force arg-min of [`dist2`] over all centroids
//! (tested), on every machine: the integer products are exact and the final choice is made by
//! `dist2` alone, and the slack keeps every centroid that `dist2`'s rounding could rank first
//! among the candidates, so rounding in the scan can only add or drop ones that cannot win. The
//! distance returned is the direct one, not the expansion's. Candidates are a few per vector on
//! clustered data (measured in `eval/kmeans_bench`); on degenerate data (many equidistant
//! centroids) they can grow to all `k`, which stays correct but costs direct distances.
//!
//! The build runs at the level [`crate::isa::level`] chooses (VNNI, AVX2 or portable code); the
//! integer products and therefore the labels are the same at every level, only slower below.

use rayon::prelude::*;

#[cfg(doc)]
use super::assign::dist2;
use super::assign::{Centroids, dist2_4};
use crate::partition::Matrix;

/// Highest row code.
const ROW_LEVELS: f32 = 127.0;
/// Highest centroid code magnitude.
const CENTROID_LEVELS: f32 = 127.0;
/// Float slack of the bounds, relative to `||x||^2` and `||c||^2`: four times the rounding
/// bound of [`dist2`] (`(dims / 8 + 16)` roundings of `2^-24` per lane sum and the final sum),
/// and at least 1e-5; 1.9e-5 at 512 dims. It also covers the scan's own few roundings.
fn rounding(dims: usize) -> f64 {
    (4.0 * (dims as f64 / 8.0 + 16.0) * f64::from(f32::EPSILON) / 2.0).max(1e-5)
}
/// Rows per kernel call.
const MR: usize = 4;
/// Centroids per packed panel (two AVX2 vectors of eight `i32`).
const NR: usize = 16;
/// Rows per block (their codes stay in L1 while a panel is swept over them).
pub const ROW_BLOCK: usize = 64;
/// Centroids per block (the block's `i32` products are scanned before the next block).
pub const CENTROID_BLOCK: usize = 512;
/// A row's candidate list is pruned to the current bound when it grows past this.
const COMPACT_AT: usize = 1024;

/// `v` in f64 rounded up to the next `f32` at or above it (for bounds).
fn up(v: f64) -> f32 {
    (v * (1.0 + 1e-6)) as f32
}

/// Dims rounded up to whole groups of four (the kernel's unit).
fn width(dims: usize) -> usize {
    dims.div_ceil(4) * 4
}

/// Quantised rows of one partition: built once, kept across iterations.
#[derive(Debug, Clone)]
pub struct QuantRows {
    rows: usize,
    dims: usize,
    width: usize,
    /// `(rows + MR - 1) x width` codes; the extra zero rows let any slice be read in whole
    /// kernel groups.
    codes: Vec<u8>,
    lo: Vec<f32>,
    step: Vec<f32>,
    /// `||x||`, rounded up.
    length: Vec<f32>,
    /// `||x - x~||` plus the scan's slack (`rounding(dims) sqrt(dims) max |x|`), rounded up.
    error: Vec<f32>,
    /// `rounding(dims) * ||x||^2`.
    slack: Vec<f32>,
}

impl QuantRows {
    /// Quantises every row of `x`.
    pub fn new(x: Matrix<'_>) -> Self {
        let (rows, dims) = (x.rows(), x.dims());
        let width = width(dims);
        let slack = rounding(dims);
        let mut out = Self {
            rows,
            dims,
            width,
            codes: vec![0; (rows + MR - 1) * width],
            lo: Vec::with_capacity(rows),
            step: Vec::with_capacity(rows),
            length: Vec::with_capacity(rows),
            error: Vec::with_capacity(rows),
            slack: Vec::with_capacity(rows),
        };
        // Rows in parallel, each returning its terms (lo, step, length, error, slack).
        let terms: Vec<[f32; 5]> = out
            .codes
            .par_chunks_mut(width)
            .take(rows)
            .enumerate()
            .map(|(i, codes)| quantise_row(x.row(i), slack, codes))
            .collect();
        for [lo, step, length, error, slack] in terms {
            out.lo.push(lo);
            out.step.push(step);
            out.length.push(length);
            out.error.push(error);
            out.slack.push(slack);
        }
        out
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Rows `start..end`.
    ///
    /// # Panics
    /// If the range is outside the rows.
    pub fn slice(&self, start: usize, end: usize) -> QuantSlice<'_> {
        assert!(start <= end && end <= self.rows, "rows {start}..{end}");
        QuantSlice {
            rows: self,
            start,
            len: end - start,
        }
    }
}

/// Quantises `row` into `codes`; returns its terms (`lo`, `step`, `length`, `error`, `slack`,
/// as in [`QuantRows`]).
fn quantise_row(row: &[f32], slack: f64, codes: &mut [u8]) -> [f32; 5] {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        // SAFETY: AVX2 was detected.
        return unsafe { quantise_row_avx2(row, slack, codes) };
    }
    quantise_row_body(row, slack, codes)
}

/// Per-lane sums of a row's quantisation: lane `l` takes the elements at `l` modulo 8, in order
/// (a fixed order, so the bound is reproducible whichever code computes it).
#[derive(Clone, Copy)]
struct RowSums {
    norm: [f64; 8],
    error: [f64; 8],
    peak: f32,
}

/// The row's code range: `lo`, the step and its inverse.
fn row_range(row: &[f32]) -> (f32, f32, f32) {
    let lo = row.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let step = if hi > lo { (hi - lo) / ROW_LEVELS } else { 1.0 };
    (lo, step, 1.0 / step)
}

/// Codes and sums of the elements from `from` on (`from` a multiple of 8).
fn quantise_from(
    row: &[f32],
    from: usize,
    range: (f32, f32, f32),
    codes: &mut [u8],
    sums: &mut RowSums,
) {
    let (lo, step, inverse) = range;
    for (codes, row) in codes[from..].chunks_mut(8).zip(row[from..].chunks(8)) {
        for (l, (code, &v)) in codes.iter_mut().zip(row).enumerate() {
            // Nearest code, or next to it; `as` truncates a non-negative value (no libm call),
            // and the bound uses the error of whatever code results.
            let q = ((v - lo) * inverse + 0.5).min(ROW_LEVELS) as u8;
            *code = q;
            let off = f64::from(v) - (f64::from(lo) + f64::from(step) * f64::from(q));
            sums.error[l] += off * off;
            sums.norm[l] += f64::from(v) * f64::from(v);
            sums.peak = sums.peak.max(v.abs());
        }
    }
}

/// The row's terms from its range and sums.
fn row_terms(len: usize, range: (f32, f32, f32), sums: &RowSums, slack: f64) -> [f32; 5] {
    let (lo, step, _) = range;
    let (norm, error, peak) = (
        sums.norm.iter().sum::<f64>(),
        sums.error.iter().sum::<f64>(),
        f64::from(sums.peak),
    );
    let scan = slack * (len as f64).sqrt() * peak;
    [
        lo,
        step,
        up(norm.sqrt()),
        up(error.sqrt() + scan),
        up(slack * norm),
    ]
}

fn quantise_row_body(row: &[f32], slack: f64, codes: &mut [u8]) -> [f32; 5] {
    let range = row_range(row);
    let mut sums = RowSums {
        norm: [0.0; 8],
        error: [0.0; 8],
        peak: 0.0,
    };
    quantise_from(row, 0, range, codes, &mut sums);
    row_terms(row.len(), range, &sums, slack)
}

/// [`quantise_row_body`] with the whole groups of eight in AVX2: the same operations in the same
/// order per lane (no FMA; f64 sums in two registers of four lanes), so the same codes and terms;
/// it matters where rows are quantised per photo (encoding).
///
/// # Safety
/// AVX2 must be available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn quantise_row_avx2(row: &[f32], slack: f64, codes: &mut [u8]) -> [f32; 5] {
    use std::arch::x86_64::*;

    let range = row_range(row);
    let (lo, step, inverse) = range;
    let whole = row.len() / 8 * 8;
    assert!(codes.len() >= whole);
    let (vlo, vinv, half, top) = (
        _mm256_set1_ps(lo),
        _mm256_set1_ps(inverse),
        _mm256_set1_ps(0.5),
        _mm256_set1_ps(ROW_LEVELS),
    );
    let (dlo, dstep) = (
        _mm256_set1_pd(f64::from(lo)),
        _mm256_set1_pd(f64::from(step)),
    );
    let sign = _mm256_set1_ps(-0.0);
    let zero = _mm256_setzero_si256();
    let (mut norm, mut error) = ([_mm256_setzero_pd(); 2], [_mm256_setzero_pd(); 2]);
    let mut peak = _mm256_setzero_ps();
    for at in (0..whole).step_by(8) {
        // SAFETY: at + 8 <= whole <= row.len().
        let v = unsafe { _mm256_loadu_ps(row.as_ptr().add(at)) };
        // `min(t, 127)` returns 127 for a NaN t, as `f32::min` does; negative values become 0
        // as `as u8` makes them.
        let t = _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, vlo), vinv), half);
        let q = _mm256_max_epi32(_mm256_cvttps_epi32(_mm256_min_ps(t, top)), zero);
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` holds eight i32.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), q) };
        for (code, lane) in codes[at..at + 8].iter_mut().zip(lanes) {
            *code = lane as u8;
        }
        let qf = _mm256_cvtepi32_ps(q);
        for (half, (v, qf)) in [
            (_mm256_castps256_ps128(v), _mm256_castps256_ps128(qf)),
            (
                _mm256_extractf128_ps::<1>(v),
                _mm256_extractf128_ps::<1>(qf),
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let (v, q) = (_mm256_cvtps_pd(v), _mm256_cvtps_pd(qf));
            let off = _mm256_sub_pd(v, _mm256_add_pd(dlo, _mm256_mul_pd(dstep, q)));
            error[half] = _mm256_add_pd(error[half], _mm256_mul_pd(off, off));
            norm[half] = _mm256_add_pd(norm[half], _mm256_mul_pd(v, v));
        }
        // `max(|v|, peak)` keeps peak for a NaN |v|, as `f32::max` does.
        peak = _mm256_max_ps(_mm256_andnot_ps(sign, v), peak);
    }
    let mut sums = RowSums {
        norm: [0.0; 8],
        error: [0.0; 8],
        peak: 0.0,
    };
    let mut peaks = [0f32; 8];
    // SAFETY: the arrays hold eight values each.
    unsafe {
        _mm256_storeu_pd(sums.norm.as_mut_ptr(), norm[0]);
        _mm256_storeu_pd(sums.norm.as_mut_ptr().add(4), norm[1]);
        _mm256_storeu_pd(sums.error.as_mut_ptr(), error[0]);
        _mm256_storeu_pd(sums.error.as_mut_ptr().add(4), error[1]);
        _mm256_storeu_ps(peaks.as_mut_ptr(), peak);
    }
    sums.peak = peaks.into_iter().fold(0.0, f32::max);
    quantise_from(row, whole, range, codes, &mut sums);
    row_terms(row.len(), range, &sums, slack)
}

impl QuantRows {
    /// Row `g`'s constants of the scan.
    fn terms(&self, g: usize) -> RowTerms {
        RowTerms {
            lo: self.lo[g],
            step: self.step[g],
            length: self.length[g],
            error: self.error[g],
        }
    }
}

/// The integer products of rows `rows` (whole kernel groups may read the zero rows past them)
/// and centroids `centroids` (whole panels) into `dots`, `CENTROID_BLOCK` per row.
fn block_products(
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
fn check_shapes(x: Matrix<'_>, xq: QuantSlice<'_>, cq: &QuantCentroids, centroids: &Centroids) {
    assert!(
        x.dims() == xq.rows.dims
            && cq.dims == x.dims()
            && cq.width == xq.rows.width
            && centroids.dims() == x.dims(),
        "dims differ"
    );
    assert_eq!(cq.k, centroids.k(), "quantised centroids are another set");
}

/// Rows `start..start + len` of a [`QuantRows`].
#[derive(Debug, Clone, Copy)]
pub struct QuantSlice<'a> {
    rows: &'a QuantRows,
    start: usize,
    len: usize,
}

impl QuantSlice<'_> {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice holds no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of rows `indices` of the slice (relative to its start), in that order.
    ///
    /// # Panics
    /// If an index is outside the slice.
    pub fn gather(&self, indices: &[usize]) -> QuantRows {
        let src = self.rows;
        let (m, width) = (indices.len(), src.width);
        let mut out = QuantRows {
            rows: m,
            dims: src.dims,
            width,
            codes: vec![0; (m + MR - 1) * width],
            lo: Vec::with_capacity(m),
            step: Vec::with_capacity(m),
            length: Vec::with_capacity(m),
            error: Vec::with_capacity(m),
            slack: Vec::with_capacity(m),
        };
        for (codes, &i) in out.codes.chunks_exact_mut(width).zip(indices) {
            assert!(i < self.len, "row {i} outside a slice of {}", self.len);
            let g = self.start + i;
            codes.copy_from_slice(&src.codes[g * width..][..width]);
            out.lo.push(src.lo[g]);
            out.step.push(src.step[g]);
            out.length.push(src.length[g]);
            out.error.push(src.error[g]);
            out.slack.push(src.slack[g]);
        }
        out
    }
}

/// Quantised centroids, packed for the kernel: made once per iteration.
#[derive(Debug, Clone)]
pub struct QuantCentroids {
    /// The instruction set the kernel and scan run on (detected when the set is made).
    isa: Isa,
    k: usize,
    dims: usize,
    width: usize,
    /// Panels of [`NR`] centroids: `[panel][quad][NR][4]` codes (as bytes).
    panels: Vec<u8>,
    /// Per centroid, padded to whole panels (padding never wins: `norm = inf`):
    /// `||c||^2`, `2 t sum(p)`, `2 t`, `||c - c~||`, `||c~||`, `rounding(dims) ||c||^2`.
    norm: Vec<f32>,
    offset: Vec<f32>,
    scale: Vec<f32>,
    error: Vec<f32>,
    length: Vec<f32>,
    slack: Vec<f32>,
}

impl QuantCentroids {
    /// Quantises and packs `centroids`.
    pub fn new(centroids: &Centroids) -> Self {
        let (k, dims) = (centroids.k(), centroids.dims());
        let width = width(dims);
        let padded = k.div_ceil(NR) * NR;
        let slack = rounding(dims);
        let mut out = Self {
            isa: Isa::detect(),
            k,
            dims,
            width,
            panels: vec![0; padded * width],
            norm: vec![f32::INFINITY; padded],
            offset: vec![0.0; padded],
            scale: vec![0.0; padded],
            error: vec![0.0; padded],
            length: vec![0.0; padded],
            slack: vec![0.0; padded],
        };
        // Panels in parallel (k reaches millions); each returns its centroids' terms.
        let terms: Vec<[[f32; 6]; NR]> = out
            .panels
            .par_chunks_mut(NR * width)
            .enumerate()
            .map(|(p, panel)| {
                let mut terms = [[f32::INFINITY, 0.0, 0.0, 0.0, 0.0, 0.0]; NR];
                for (lane, terms) in terms.iter_mut().enumerate() {
                    let j = p * NR + lane;
                    if j < k {
                        *terms = quantise_centroid(centroids, j, slack, lane, width, panel);
                    }
                }
                terms
            })
            .collect();
        for (j, t) in terms.iter().flatten().enumerate() {
            [
                out.norm[j],
                out.offset[j],
                out.scale[j],
                out.error[j],
                out.length[j],
                out.slack[j],
            ] = *t;
        }
        out
    }

    /// Number of (real) centroids.
    pub fn k(&self) -> usize {
        self.k
    }
}

/// Quantises centroid `j` into lane `lane` of its `panel`; returns its terms (`norm`, `offset`,
/// `scale`, `error`, `length`, `slack`, as in [`QuantCentroids`]).
fn quantise_centroid(
    centroids: &Centroids,
    j: usize,
    slack: f64,
    lane: usize,
    width: usize,
    panel: &mut [u8],
) -> [f32; 6] {
    let c = centroids.row(j);
    let peak = c.iter().fold(0f32, |m, v| m.max(v.abs()));
    let t = if peak > 0.0 {
        peak / CENTROID_LEVELS
    } else {
        1.0
    };
    let (mut sum, mut squares, mut error) = (0i64, 0i64, 0f64);
    for (d, &v) in c.iter().enumerate() {
        let r = v / t;
        let p = ((r + 0.5f32.copysign(r)) as i32 as f32).clamp(-CENTROID_LEVELS, CENTROID_LEVELS);
        // Dims d..d+4 of the panel's 16 centroids sit together: [quad][lane][4].
        panel[(d / 4) * NR * 4 + lane * 4 + d % 4] = p as i8 as u8;
        sum += p as i64;
        squares += (p as i64) * (p as i64);
        let off = f64::from(v) - f64::from(t) * f64::from(p);
        error += off * off;
    }
    debug_assert!(c.len() <= width);
    let norm = centroids.norms()[j];
    [
        norm,
        2.0 * t * sum as f32,
        2.0 * t,
        up(error.sqrt()),
        up(f64::from(t) * (squares as f64).sqrt()),
        up(slack * f64::from(norm)),
    ]
}

/// Reusable buffers of [`assign_quantized`].
#[derive(Debug, Default, Clone)]
pub struct QuantScratch {
    dots: Vec<i32>,
    lower: Vec<f32>,
    min_upper: Vec<f32>,
    candidates: Vec<Vec<Candidate>>,
}

/// A centroid that may be a row's nearest (or among its `r` nearest), with its lower bound.
/// `repr(C)`: the AVX-512 scan stores the pair as one 64-bit lane, index first.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Candidate {
    index: u32,
    lower: f32,
}

/// Per-row constants of the scan.
#[derive(Debug, Clone, Copy)]
struct RowTerms {
    lo: f32,
    step: f32,
    length: f32,
    error: f32,
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
    aligned: bool,
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

/// Centroids per panel: [`search_runs`] needs every run to start at a multiple of this.
pub const PANEL: usize = NR;

/// Reusable buffers of [`search_runs`].
#[derive(Debug, Default, Clone)]
pub struct SearchScratch {
    /// Pair indices ordered by run, and where each run's start in that order.
    order: Vec<u32>,
    first: Vec<usize>,
    /// The codes of the [`MR`] rows of one kernel call (builds that need them side by side),
    /// and their products.
    codes: Vec<u8>,
    dots: Vec<i32>,
    /// Per pair, the lower bounds of its run's columns (`span` each).
    lowers: Vec<f32>,
    min_upper: Vec<f32>,
    candidates: Vec<Candidate>,
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
    let kernel = cq.isa;
    check_shapes(x, xq, cq, centroids);
    let count = runs.start.len().saturating_sub(1);
    let k = centroids.k();
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
    let qrows = xq.rows;
    let span = runs
        .start
        .windows(2)
        .map(|w| (w[1] - w[0]).div_ceil(NR) * NR)
        .max()
        .unwrap_or(0);
    let SearchScratch {
        order,
        first,
        codes,
        dots,
        lowers,
        min_upper,
        candidates,
    } = scratch;
    // Pairs by run (a stable counting sort: rows stay ascending within a run).
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
    dots.resize(MR * CENTROID_BLOCK, 0);
    // Each pair's slice is written (its run's whole panels) before it is read.
    // Spare spans past the pairs' take the writes of a kernel call's unused slots.
    if lowers.len() < (pairs.len() + MR) * span {
        lowers.resize((pairs.len() + MR) * span, f32::INFINITY);
    }
    min_upper.clear();
    min_upper.resize(rows.len(), f32::INFINITY);
    let step = kernel.panels_per_call();
    for g in 0..count {
        let (c0, panels) = (
            runs.start[g],
            (runs.start[g + 1] - runs.start[g]).div_ceil(NR),
        );
        for chunk in order[first[g]..first[g + 1]].chunks(MR) {
            // Slots past the chunk repeat its first row and write to the spare spans past the
            // pairs' (their results are not read).
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
    let mut a = 0;
    while a < pairs.len() {
        let row = pairs[a].0 as usize;
        let b = a + pairs[a..]
            .iter()
            .take_while(|q| q.0 as usize == row)
            .count();
        let (i, g) = (rows[row], xq.start + rows[row]);
        let xi = x.row(i);
        let own = super::assign::dot(xi, xi);
        let slack = qrows.slack[g];
        let (col, d) = best[row];
        let stop =
            (min_upper[row] + 4.0 * slack).min(d - own + 4.0 * (slack + cq.slack[col as usize]));
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
                Some(j) if j < lower.len() => least_of(&lower[..j]).min(least_of(&lower[j + 1..])),
                _ => least_of(lower),
            };
        }
        a = b;
    }
}

/// The scan behind [`assign_quantized`] and [`assign_quantized_runs`].
#[allow(clippy::too_many_arguments)]
fn scan(
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
            let own = super::assign::dot(xi, xi);
            let entry = (f32::INFINITY, u32::MAX, u32::MAX);
            let slack = rows.slack[g];
            let (best, label, _) = verify(
                kernel,
                (xi, own),
                centroids,
                cq,
                slack,
                ids,
                &candidates[i],
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
/// Candidates are taken in list order; one whose lower bound exceeds `stop` (which starts as the caller's threshold and falls
/// to each better distance found, with both sides' slack; `slack` is the row's) is strictly
/// farther and skipped, as in [`nearest_few_quantized`].
#[allow(clippy::too_many_arguments)]
fn verify(
    kernel: Isa,
    (xi, own): (&[f32], f32),
    centroids: &Centroids,
    cq: &QuantCentroids,
    slack: f32,
    ids: Option<&[u32]>,
    candidates: &[Candidate],
    mut best: (f32, u32, u32),
    mut stop: f32,
) -> (f32, u32, u32) {
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

/// Lowers row `row`'s run minima in `least` by the lower bounds of columns `c0..` (`lower`).
fn run_minima(
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

/// The least value of `v` (infinity when empty; the bounds hold no NaN): eight independent
/// lanes, so the compiler keeps them in one vector register.
fn least_of(v: &[f32]) -> f32 {
    let mut lanes = [f32::INFINITY; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            *m = if x < *m { x } else { *m };
        }
    }
    for (m, &x) in lanes.iter_mut().zip(rest) {
        *m = if x < *m { x } else { *m };
    }
    lanes.into_iter().fold(f32::INFINITY, f32::min)
}

/// Reusable buffers of [`nearest_few_quantized`].
#[derive(Debug, Default, Clone)]
pub struct FewScratch {
    dots: Vec<i32>,
    lower: Vec<f32>,
    /// Per row of a block, the `r` least upper bounds seen so far, ascending.
    uppers: Vec<f32>,
    threshold: Vec<f32>,
    candidates: Vec<Vec<Candidate>>,
}

/// The `r` nearest centroids of each row of `x` (quantised as `xq`): row `i`'s words at
/// `words[i * r..][..r]` and their [`dist2`] distances at `dists[i * r..][..r]`, nearest first,
/// ties to the lower index: exactly the first `r` of all centroids sorted by (`dist2`, index).
/// With `r > k` the extra slots hold `u32::MAX` and infinity.
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
            let own = super::assign::dot(xi, xi);
            let mut stop = f32::INFINITY;
            let mut next = Pending::new(list);
            while let Some((columns, count)) = next.take(stop) {
                let found = kernel.dists(xi, centroids, &columns[..count]);
                for (&j, &dist) in columns[..count].iter().zip(&found) {
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
struct Pending<'a> {
    list: &'a [Candidate],
    at: usize,
}

impl<'a> Pending<'a> {
    fn new(list: &'a [Candidate]) -> Self {
        Self { list, at: 0 }
    }

    /// The next up to four columns with lower bounds at most `stop`, in list order, and how
    /// many there are; `None` when the list is done.
    fn take(&mut self, stop: f32) -> Option<([u32; 4], usize)> {
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

/// Inserts `u` into `least` (ascending) if it is below the last.
#[inline]
fn insert_least(least: &mut [f32], u: f32) {
    let last = least.len() - 1;
    if u < least[last] {
        let mut at = last;
        while at > 0 && u < least[at - 1] {
            least[at] = least[at - 1];
            at -= 1;
        }
        least[at] = u;
    }
}

/// Which instruction set runs the kernel and the scan.
#[derive(Debug, Clone, Copy)]
enum Isa {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// `vpdpbusd` products on 512-bit registers, the branch-free scan for up to
    /// `avx512::MAX_FEW` nearest and candidate packing; bounds and direct distances as
    /// [`Isa::Avx2`].
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Isa {
    /// The widest build [`crate::isa::level`] allows.
    fn detect() -> Self {
        Self::at(crate::isa::level())
    }

    /// The build for `level` (which the CPU must have).
    fn at(level: crate::isa::Level) -> Self {
        use crate::isa::Level;
        match level {
            Level::Portable => Isa::Portable,
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => Isa::Avx2,
            #[cfg(target_arch = "x86_64")]
            Level::Avx512 => Isa::Avx512,
            #[cfg(not(target_arch = "x86_64"))]
            _ => Isa::Portable,
        }
    }

    /// `out[r * CENTROID_BLOCK + j] = q_r . p_j` for the [`MR`] rows of `x` and the
    /// `count * NR` centroids of `count` consecutive panels (at most [`Isa::panels_per_call`]).
    fn products(self, x: &[u8], width: usize, panels: &[u8], count: usize, out: &mut [i32]) {
        assert!(
            (1..=self.panels_per_call()).contains(&count)
                && x.len() >= MR * width
                && panels.len() >= count * NR * width
                && out.len() >= (MR - 1) * CENTROID_BLOCK + count * NR
        );
        match self {
            Isa::Portable => {
                for p in 0..count {
                    products_portable(x, width, &panels[p * NR * width..], &mut out[p * NR..]);
                }
            }
            // SAFETY: AVX2 was detected; the slices were checked to cover what the kernel reads
            // and writes.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { avx2::products(x, width, panels, out) },
            // SAFETY: AVX-512 F/BW/VNNI were detected; the slices were checked as above.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe {
                match count {
                    1 => avx512::products::<1>(x, width, panels, out),
                    2 => avx512::products::<2>(x, width, panels, out),
                    3 => avx512::products::<3>(x, width, panels, out),
                    _ => avx512::products::<4>(x, width, panels, out),
                }
            },
        }
    }

    /// The search's products and bounds for rows `rows` of `xq` ([`MR`] of them, anywhere) and
    /// `count` panels from centroid `c0` on (at most [`Isa::panels_per_call`]): row `r`'s lower
    /// bounds go to `lower[at[r]..][..count * NR]`, and its least upper bound is returned, as
    /// [`Isa::bounds`]. The AVX-512 build reads the rows in place and keeps the products in
    /// registers (twice the accumulator chains at one panel); the others copy the rows into
    /// `buffer` and the products through `dots`.
    #[allow(clippy::too_many_arguments)]
    fn search_panels(
        self,
        xq: &QuantRows,
        rows: [usize; MR],
        cq: &QuantCentroids,
        (c0, count): (usize, usize),
        (buffer, dots): (&mut Vec<u8>, &mut [i32]),
        lower: &mut [f32],
        at: [usize; MR],
    ) -> [f32; MR] {
        let (len, width) = (count * NR, xq.width);
        let panels = &cq.panels[c0 * width..][..len * width];
        assert!(
            (1..=self.panels_per_call()).contains(&count)
                && c0.is_multiple_of(NR)
                && xq.width == cq.width
                && rows.iter().all(|&g| g < xq.rows)
                && at.iter().all(|&a| a + len <= lower.len())
                && (0..MR).all(|r| (r + 1..MR).all(|q| at[r].abs_diff(at[q]) >= len)),
            "whole panels, rows of `xq`, disjoint outputs within `lower`"
        );
        match self {
            // SAFETY: AVX-512 F/BW/VNNI were detected; the panels and centroid terms cover
            // `c0..c0 + len` (sliced above), the rows exist, the outputs were checked to be in
            // `lower` and disjoint.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe {
                match count {
                    1 => avx512::search_panels::<1, 2>(xq, rows, panels, cq, c0, lower, at),
                    2 => avx512::search_panels::<2, 1>(xq, rows, panels, cq, c0, lower, at),
                    3 => avx512::search_panels::<3, 1>(xq, rows, panels, cq, c0, lower, at),
                    _ => avx512::search_panels::<4, 1>(xq, rows, panels, cq, c0, lower, at),
                }
            },
            _ => {
                buffer.resize(MR * width, 0);
                for (slot, &g) in buffer.chunks_exact_mut(width).zip(&rows) {
                    slot.copy_from_slice(&xq.codes[g * width..][..width]);
                }
                self.products(buffer, width, panels, count, dots);
                let mut out = [0f32; MR];
                for (r, out) in out.iter_mut().enumerate() {
                    let dots = &dots[r * CENTROID_BLOCK..][..len];
                    let lower = &mut lower[at[r]..][..len];
                    *out = self.bounds(dots, cq, c0, xq.terms(rows[r]), lower);
                }
                out
            }
        }
    }

    /// Panels [`Isa::products`] takes at once.
    fn panels_per_call(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => avx512::PANELS,
            _ => 1,
        }
    }

    /// Writes the lower bounds `v - 2e` of the block's centroids to `lower` and returns the
    /// least upper bound `v + 2e`.
    fn bounds(
        self,
        dots: &[i32],
        cq: &QuantCentroids,
        c0: usize,
        row: RowTerms,
        lower: &mut [f32],
    ) -> f32 {
        assert!(
            dots.len().is_multiple_of(8)
                && lower.len() == dots.len()
                && c0 + dots.len() <= cq.norm.len()
        );
        match self {
            Isa::Portable => bounds_portable(dots, cq, c0, row, lower),
            // SAFETY: AVX-512 F was detected; the lengths were checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 if dots.len().is_multiple_of(16) => unsafe {
                avx512::bounds(dots, cq, c0, row, lower)
            },
            // SAFETY: AVX2 and FMA were detected (AVX-512 implies them here); the lengths were
            // checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { avx2::bounds(dots, cq, c0, row, lower) },
        }
    }

    /// Writes the lower bounds `v - 2e` of the block's centroids to `lower`, and lowers `least`
    /// (ascending) by their upper bounds `v + 2e`: it ends holding the least `least.len()` of
    /// its values and those bounds.
    fn few_bounds(
        self,
        dots: &[i32],
        cq: &QuantCentroids,
        c0: usize,
        row: RowTerms,
        lower: &mut [f32],
        least: &mut [f32],
    ) {
        assert!(
            dots.len().is_multiple_of(16)
                && lower.len() == dots.len()
                && c0 + dots.len() <= cq.norm.len()
                && !least.is_empty(),
            "a block of whole panels within the centroids"
        );
        match self {
            Isa::Portable => {
                for (j, (&dot, lower)) in dots.iter().zip(lower).enumerate() {
                    let (v, e) = bounds(dot, cq, c0 + j, row);
                    *lower = (-2f32).mul_add(e, v);
                    insert_least(least, 2f32.mul_add(e, v));
                }
            }
            // SAFETY: AVX-512 F (and AVX2, FMA) were detected; the lengths were checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 if least.len() <= avx512::MAX_FEW => unsafe {
                avx512::few_bounds(dots, cq, c0, row, lower, least)
            },
            // SAFETY: AVX2 and FMA were detected (AVX-512 implies them here); the lengths were
            // checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { avx2::few_bounds(dots, cq, c0, row, lower, least) },
        }
    }

    /// `out[p]` = the least of `lower[p * NR..][..NR]` (the bounds hold no NaN).
    fn panel_minima(self, lower: &[f32], out: &mut [f32]) {
        assert_eq!(lower.len(), out.len() * NR, "one minimum per panel");
        match self {
            // SAFETY: AVX-512 F was detected; the lengths were checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { avx512::panel_minima(lower, out) },
            _ => {
                for (out, panel) in out.iter_mut().zip(lower.chunks_exact(NR)) {
                    *out = least_of(panel);
                }
            }
        }
    }

    /// Appends `(c0 + j, lower[j])` for every `lower[j] <= threshold`, in index order.
    fn below(self, lower: &[f32], c0: usize, threshold: f32, out: &mut Vec<Candidate>) {
        assert!(lower.len().is_multiple_of(8));
        match self {
            Isa::Portable => {
                for (j, &l) in lower.iter().enumerate() {
                    if l <= threshold {
                        out.push(Candidate {
                            index: (c0 + j) as u32,
                            lower: l,
                        });
                    }
                }
            }
            // SAFETY: AVX2 was detected; the length was checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { avx2::below(lower, c0, threshold, out) },
            // SAFETY: AVX-512 F was detected; the length was checked.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { avx512::below(lower, c0, threshold, out) },
        }
    }

    /// [`dist2`] from `a` to centroids `columns` (at most four; the rest of the result is
    /// unspecified), each bit for bit [`dist2`]'s (the same operations in the same order, wider
    /// registers, four chains interleaved).
    fn dists(self, a: &[f32], centroids: &Centroids, columns: &[u32]) -> [f32; 4] {
        assert!((1..=4).contains(&columns.len()), "one to four columns");
        // Missing columns repeat the first (their results are not read).
        let row = |q: usize| centroids.row(columns.get(q).copied().unwrap_or(columns[0]) as usize);
        let rows = [row(0), row(1), row(2), row(3)];
        match self {
            Isa::Portable => dist2_4(a, rows),
            // SAFETY: AVX2 was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 | Isa::Avx512 => unsafe { avx2::dist2_4(a, rows) },
        }
    }
}

fn products_portable(x: &[u8], width: usize, panel: &[u8], out: &mut [i32]) {
    for r in 0..MR {
        let row = &x[r * width..][..width];
        for j in 0..NR {
            let mut acc = 0i32;
            for (quad, four) in row.chunks_exact(4).enumerate() {
                let codes = &panel[quad * NR * 4 + j * 4..][..4];
                for (&a, &b) in four.iter().zip(codes) {
                    acc += i32::from(a) * i32::from(b as i8);
                }
            }
            out[r * CENTROID_BLOCK + j] = acc;
        }
    }
}

/// `(v, e)` of centroid `j` for one row: the approximate `||c||^2 - 2 x.c` and its error bound
/// (without the row's own slack, which the threshold carries).
#[inline(always)]
fn bounds(dot: i32, cq: &QuantCentroids, j: usize, row: RowTerms) -> (f32, f32) {
    let base = (-row.lo).mul_add(cq.offset[j], cq.norm[j]);
    let v = (-row.step).mul_add(cq.scale[j] * dot as f32, base);
    let e = row
        .length
        .mul_add(cq.error[j], row.error.mul_add(cq.length[j], cq.slack[j]));
    (v, e)
}

fn bounds_portable(
    dots: &[i32],
    cq: &QuantCentroids,
    c0: usize,
    row: RowTerms,
    lower: &mut [f32],
) -> f32 {
    let mut least = f32::INFINITY;
    for (j, (&dot, l)) in dots.iter().zip(lower).enumerate() {
        let (v, e) = bounds(dot, cq, c0 + j, row);
        let u = 2f32.mul_add(e, v);
        least = least.min(u);
        *l = (-2f32).mul_add(e, v);
    }
    least
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! The AVX2 kernel and scan. Callers check the CPU features and the slice lengths.

    use std::arch::x86_64::*;

    use super::{CENTROID_BLOCK, Candidate, MR, NR, QuantCentroids, RowTerms};

    /// # Safety
    /// AVX2 must be available; `x` must hold `MR * width` codes, `panel` `NR * width`, and `out`
    /// `(MR - 1) * CENTROID_BLOCK + NR` values.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn products(x: &[u8], width: usize, panel: &[u8], out: &mut [i32]) {
        let ones = _mm256_set1_epi16(1);
        let mut acc = [[_mm256_setzero_si256(); 2]; MR];
        let (x, panel) = (x.as_ptr(), panel.as_ptr());
        for quad in 0..width / 4 {
            // SAFETY (whole loop): quad < width / 4, so every read lies in the checked lengths.
            unsafe {
                let lo = _mm256_loadu_si256(panel.add(quad * 64).cast());
                let hi = _mm256_loadu_si256(panel.add(quad * 64 + 32).cast());
                for (r, acc) in acc.iter_mut().enumerate() {
                    let four = x.add(r * width + quad * 4).cast::<i32>().read_unaligned();
                    let b = _mm256_set1_epi32(four);
                    let plo = _mm256_madd_epi16(_mm256_maddubs_epi16(b, lo), ones);
                    let phi = _mm256_madd_epi16(_mm256_maddubs_epi16(b, hi), ones);
                    acc[0] = _mm256_add_epi32(acc[0], plo);
                    acc[1] = _mm256_add_epi32(acc[1], phi);
                }
            }
        }
        let out = out.as_mut_ptr();
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: r * CENTROID_BLOCK + 16 <= out's checked length.
            unsafe {
                _mm256_storeu_si256(out.add(r * CENTROID_BLOCK).cast(), acc[0]);
                _mm256_storeu_si256(out.add(r * CENTROID_BLOCK + 8).cast(), acc[1]);
            }
        }
        debug_assert_eq!(NR, 16);
    }

    /// Eight lanes of `(v, e)` from centroid `j` on, as [`super::bounds`] computes them.
    ///
    /// # Safety
    /// AVX2 and FMA; `dots[at..at + 8]` and the centroid terms `[j..j + 8]` must exist.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lanes(
        dots: &[i32],
        at: usize,
        cq: &QuantCentroids,
        j: usize,
        row: RowTerms,
    ) -> (__m256, __m256) {
        debug_assert!(at + 8 <= dots.len() && j + 8 <= cq.norm.len());
        // SAFETY: the ranges are in bounds (caller).
        unsafe {
            let load = |v: &[f32]| _mm256_loadu_ps(v.as_ptr().add(j));
            let dot = _mm256_cvtepi32_ps(_mm256_loadu_si256(dots.as_ptr().add(at).cast()));
            let base = _mm256_fnmadd_ps(_mm256_set1_ps(row.lo), load(&cq.offset), load(&cq.norm));
            let scaled = _mm256_mul_ps(load(&cq.scale), dot);
            let v = _mm256_fnmadd_ps(_mm256_set1_ps(row.step), scaled, base);
            let inner =
                _mm256_fmadd_ps(_mm256_set1_ps(row.error), load(&cq.length), load(&cq.slack));
            let e = _mm256_fmadd_ps(_mm256_set1_ps(row.length), load(&cq.error), inner);
            (v, e)
        }
    }

    /// # Safety
    /// AVX2 and FMA; `dots.len()` a multiple of 8, `lower` as long, and `c0 + dots.len()` within
    /// the padded centroids.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn bounds(
        dots: &[i32],
        cq: &QuantCentroids,
        c0: usize,
        row: RowTerms,
        lower: &mut [f32],
    ) -> f32 {
        let (two, minus_two) = (_mm256_set1_ps(2.0), _mm256_set1_ps(-2.0));
        let mut least = _mm256_set1_ps(f32::INFINITY);
        for at in (0..dots.len()).step_by(8) {
            // SAFETY: in bounds by the caller's contract.
            unsafe {
                let (v, e) = lanes(dots, at, cq, c0 + at, row);
                let u = _mm256_fmadd_ps(two, e, v);
                least = _mm256_min_ps(least, u);
                _mm256_storeu_ps(lower.as_mut_ptr().add(at), _mm256_fmadd_ps(minus_two, e, v));
            }
        }
        let mut out = [0f32; 8];
        // SAFETY: `out` holds eight f32.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), least) };
        out.iter().copied().fold(f32::INFINITY, f32::min)
    }

    /// # Safety
    /// AVX2; `lower.len()` a multiple of 8.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn below(lower: &[f32], c0: usize, threshold: f32, out: &mut Vec<Candidate>) {
        let limit = _mm256_set1_ps(threshold);
        for at in (0..lower.len()).step_by(8) {
            // SAFETY: at + 8 <= lower.len() by the caller's contract.
            let l = unsafe { _mm256_loadu_ps(lower.as_ptr().add(at)) };
            let mut mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(l, limit));
            while mask != 0 {
                let lane = mask.trailing_zeros() as usize;
                out.push(Candidate {
                    index: (c0 + at + lane) as u32,
                    lower: lower[at + lane],
                });
                mask &= mask - 1;
            }
        }
    }

    /// As [`super::Isa::few_bounds`].
    ///
    /// # Safety
    /// AVX2 and FMA; `dots.len()` a multiple of 8, `lower` as long, `c0 + dots.len()` within
    /// the padded centroids, `least` not empty.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn few_bounds(
        dots: &[i32],
        cq: &QuantCentroids,
        c0: usize,
        row: RowTerms,
        lower: &mut [f32],
        least: &mut [f32],
    ) {
        let (two, minus_two) = (_mm256_set1_ps(2.0), _mm256_set1_ps(-2.0));
        let last = least.len() - 1;
        let mut worst = _mm256_set1_ps(least[last]);
        for at in (0..dots.len()).step_by(8) {
            // SAFETY: in bounds by the caller's contract.
            let (v, e) = unsafe { lanes(dots, at, cq, c0 + at, row) };
            // SAFETY: at + 8 <= lower.len().
            unsafe {
                _mm256_storeu_ps(lower.as_mut_ptr().add(at), _mm256_fmadd_ps(minus_two, e, v))
            };
            let u = _mm256_fmadd_ps(two, e, v);
            // Lanes below the current r-th least are rare once it has settled.
            let mut mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(u, worst));
            if mask != 0 {
                let mut values = [0f32; 8];
                // SAFETY: `values` holds eight f32.
                unsafe { _mm256_storeu_ps(values.as_mut_ptr(), u) };
                while mask != 0 {
                    super::insert_least(least, values[mask.trailing_zeros() as usize]);
                    mask &= mask - 1;
                }
                worst = _mm256_set1_ps(least[last]);
            }
        }
    }

    /// [`super::dist2_4`] in AVX2: per row the same operations in the same order (a separate
    /// multiply and add per lane, the lanes summed in order, then the tail), so the same bits.
    ///
    /// # Safety
    /// AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dist2_4(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
        assert!(
            b.iter().all(|b| b.len() == a.len()),
            "rows of other lengths"
        );
        let whole = a.len() / 8 * 8;
        let mut acc = [_mm256_setzero_ps(); 4];
        for at in (0..whole).step_by(8) {
            // SAFETY: at + 8 <= whole <= every row's length.
            unsafe {
                let x = _mm256_loadu_ps(a.as_ptr().add(at));
                for (acc, b) in acc.iter_mut().zip(&b) {
                    let d = _mm256_sub_ps(x, _mm256_loadu_ps(b.as_ptr().add(at)));
                    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(d, d));
                }
            }
        }
        let mut out = [0f32; 4];
        for ((out, acc), b) in out.iter_mut().zip(acc).zip(&b) {
            let mut lanes = [0f32; 8];
            // SAFETY: `lanes` holds eight f32.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
            *out = super::super::assign::dist2_finish(&lanes, &a[whole..], &b[whole..]);
        }
        out
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! The VNNI kernel: `vpdpbusd` multiplies 64 `u8 x i8` pairs and adds each four into an `i32`
    //! lane in one instruction (no `i16` step), so one 512-bit register holds a whole panel's
    //! [`NR`] sums. The products are the exact integers the other builds compute.

    use std::arch::x86_64::*;

    use super::{CENTROID_BLOCK, Candidate, MR, NR, QuantCentroids, QuantRows, RowTerms};

    /// The most nearest centroids [`few_bounds`] keeps in registers.
    pub(super) const MAX_FEW: usize = 8;

    /// Sixteen lanes of `(v, e)` from centroid `j` on, as [`super::bounds`] computes them.
    ///
    /// # Safety
    /// AVX-512 F; `dots[at..at + 16]` and the centroid terms `[j..j + 16]` must exist.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn lanes(
        dots: &[i32],
        at: usize,
        cq: &QuantCentroids,
        j: usize,
        row: RowTerms,
    ) -> (__m512, __m512) {
        debug_assert!(at + 16 <= dots.len());
        // SAFETY: the ranges are in bounds (caller).
        unsafe {
            let dot = _mm512_loadu_si512(dots.as_ptr().add(at).cast());
            lanes_of(dot, cq, j, row)
        }
    }

    /// [`lanes`] of sixteen products in a register.
    ///
    /// # Safety
    /// AVX-512 F; the centroid terms `[j..j + 16]` must exist.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn lanes_of(
        dot: __m512i,
        cq: &QuantCentroids,
        j: usize,
        row: RowTerms,
    ) -> (__m512, __m512) {
        debug_assert!(j + 16 <= cq.norm.len());
        // SAFETY: the range is in bounds (caller).
        unsafe {
            let load = |v: &[f32]| _mm512_loadu_ps(v.as_ptr().add(j));
            let dot = _mm512_cvtepi32_ps(dot);
            let base = _mm512_fnmadd_ps(_mm512_set1_ps(row.lo), load(&cq.offset), load(&cq.norm));
            let scaled = _mm512_mul_ps(load(&cq.scale), dot);
            let v = _mm512_fnmadd_ps(_mm512_set1_ps(row.step), scaled, base);
            let inner =
                _mm512_fmadd_ps(_mm512_set1_ps(row.error), load(&cq.length), load(&cq.slack));
            let e = _mm512_fmadd_ps(_mm512_set1_ps(row.length), load(&cq.error), inner);
            (v, e)
        }
    }

    /// As [`super::avx2::bounds`], sixteen centroids at a time.
    ///
    /// # Safety
    /// AVX-512 F; `dots.len()` a multiple of 16, `lower` as long, `c0 + dots.len()` within the
    /// padded centroids.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn bounds(
        dots: &[i32],
        cq: &QuantCentroids,
        c0: usize,
        row: RowTerms,
        lower: &mut [f32],
    ) -> f32 {
        debug_assert!(dots.len().is_multiple_of(16) && lower.len() == dots.len());
        let (two, minus_two) = (_mm512_set1_ps(2.0), _mm512_set1_ps(-2.0));
        let mut least = _mm512_set1_ps(f32::INFINITY);
        for at in (0..dots.len()).step_by(16) {
            // SAFETY: in bounds by the caller's contract.
            let (v, e) = unsafe { lanes(dots, at, cq, c0 + at, row) };
            // SAFETY: at + 16 <= lower.len().
            unsafe {
                _mm512_storeu_ps(lower.as_mut_ptr().add(at), _mm512_fmadd_ps(minus_two, e, v))
            };
            // A NaN upper bound (never from finite data) is passed over, as `f32::min` does.
            least = _mm512_min_ps(_mm512_fmadd_ps(two, e, v), least);
        }
        _mm512_reduce_min_ps(least)
    }

    /// As [`super::Isa::panel_minima`]: one horizontal minimum per panel.
    ///
    /// # Safety
    /// AVX-512 F; `lower.len() == out.len() * 16`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn panel_minima(lower: &[f32], out: &mut [f32]) {
        debug_assert_eq!(lower.len(), out.len() * 16);
        for (p, out) in out.iter_mut().enumerate() {
            // SAFETY: p * 16 + 16 <= lower.len() by the caller's contract.
            *out = _mm512_reduce_min_ps(unsafe { _mm512_loadu_ps(lower.as_ptr().add(p * 16)) });
        }
    }

    /// As [`super::Isa::few_bounds`], branch-free for up to [`MAX_FEW`] nearest: every lane
    /// keeps its own `r` least upper bounds in `r` registers (a min/max insertion network), seeded
    /// with `least` in lane 0; the `r` least of their union, the block's and `least`'s, are then
    /// taken from the lanes' heads one at a time.
    ///
    /// # Safety
    /// AVX-512 F; `dots.len()` a multiple of 16, `lower` as long, `c0 + dots.len()` within the
    /// padded centroids, `1 <= least.len() <= MAX_FEW`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn few_bounds(
        dots: &[i32],
        cq: &QuantCentroids,
        c0: usize,
        row: RowTerms,
        lower: &mut [f32],
        least: &mut [f32],
    ) {
        let r = least.len();
        debug_assert!((1..=MAX_FEW).contains(&r) && dots.len().is_multiple_of(16));
        let (two, minus_two) = (_mm512_set1_ps(2.0), _mm512_set1_ps(-2.0));
        let infinity = _mm512_set1_ps(f32::INFINITY);
        let mut stack = [infinity; MAX_FEW];
        for (slot, &value) in stack.iter_mut().zip(least.iter()) {
            *slot = _mm512_mask_mov_ps(infinity, 1, _mm512_set1_ps(value));
        }
        for at in (0..dots.len()).step_by(16) {
            // SAFETY: in bounds by the caller's contract.
            let (v, e) = unsafe { lanes(dots, at, cq, c0 + at, row) };
            // SAFETY: at + 16 <= lower.len().
            unsafe {
                _mm512_storeu_ps(lower.as_mut_ptr().add(at), _mm512_fmadd_ps(minus_two, e, v))
            };
            // A NaN bound (never from finite data) becomes infinity, so it enters no stack,
            // as the portable code's `u < least` lets none in.
            let mut carry = _mm512_min_ps(_mm512_fmadd_ps(two, e, v), infinity);
            for slot in &mut stack[..r] {
                let low = _mm512_min_ps(*slot, carry);
                carry = _mm512_max_ps(*slot, carry);
                *slot = low;
            }
        }
        for value in least.iter_mut() {
            let head = _mm512_reduce_min_ps(stack[0]);
            *value = head;
            // Pop one lane holding it (the lowest): its next value moves up.
            let hits = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(stack[0], _mm512_set1_ps(head));
            let lane: __mmask16 = hits & hits.wrapping_neg();
            for s in 0..r {
                let next = if s + 1 < r { stack[s + 1] } else { infinity };
                stack[s] = _mm512_mask_mov_ps(stack[s], lane, next);
            }
        }
    }

    /// As [`super::avx2::below`], without branches: every block of 16 lanes packs those at or
    /// under `threshold` into [`Candidate`] pairs and stores them, however many there are.
    ///
    /// # Safety
    /// AVX-512 F; `lower.len()` a multiple of 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn below(lower: &[f32], c0: usize, threshold: f32, out: &mut Vec<Candidate>) {
        let limit = _mm512_set1_ps(threshold);
        let step = _mm512_set1_epi32(16);
        let mut index = _mm512_add_epi32(
            _mm512_set1_epi32(c0 as i32),
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        );
        // (index, lower) pairs of lanes 0..8 and of lanes 8..16, as 64-bit lanes.
        let first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let second =
            _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        // Room for every lane, plus a whole register's store past the last.
        out.reserve(lower.len() + 16);
        for at in (0..lower.len()).step_by(16) {
            // SAFETY: at + 16 <= lower.len() by the caller's contract.
            let l = unsafe { _mm512_loadu_ps(lower.as_ptr().add(at)) };
            let mask = _mm512_cmp_ps_mask::<_CMP_LE_OQ>(l, limit);
            let bits = _mm512_castps_si512(l);
            for (half, order) in [
                ((mask & 0xff) as __mmask8, first),
                ((mask >> 8) as __mmask8, second),
            ] {
                let packed = _mm512_maskz_compress_epi64(
                    half,
                    _mm512_permutex2var_epi32(index, order, bits),
                );
                let len = out.len();
                // SAFETY: the reserve above leaves room for a full register (8 pairs) past any
                // length this loop reaches; `Candidate` is `repr(C)` (index, lower), the pairs'
                // layout; only the packed pairs become part of the vector.
                unsafe {
                    _mm512_storeu_si512(out.as_mut_ptr().add(len).cast(), packed);
                    out.set_len(len + half.count_ones() as usize);
                }
            }
            index = _mm512_add_epi32(index, step);
        }
    }

    /// The [`MR`] x `P` panel sums of [`products`], for rows read in place (`rows`, each at
    /// least `width` codes), with `S` sets of accumulators over alternate quads of dims (summed
    /// at the end: exact integers in any order), so that one panel still feeds `MR * S`
    /// independent chains.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI must be available; `panels` must hold `P * NR * width` codes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn sums<const P: usize, const S: usize>(
        rows: [&[u8]; MR],
        width: usize,
        panels: &[u8],
    ) -> [[__m512i; P]; MR] {
        debug_assert!(rows.iter().all(|r| r.len() >= width) && panels.len() >= P * NR * width);
        let mut acc = [[[_mm512_setzero_si512(); P]; MR]; S];
        let rows = rows.map(<[u8]>::as_ptr);
        let panels = panels.as_ptr();
        let quads = width / 4;
        // SAFETY (whole block): every quad read is below width / 4 and every panel below P, by
        // the caller's lengths.
        unsafe {
            let step = |acc: &mut [[__m512i; P]; MR], quad: usize| {
                let mut codes = [_mm512_setzero_si512(); P];
                for (p, codes) in codes.iter_mut().enumerate() {
                    *codes = _mm512_loadu_si512(panels.add((p * quads + quad) * 64).cast());
                }
                for (acc, &row) in acc.iter_mut().zip(&rows) {
                    let four = row.add(quad * 4).cast::<i32>().read_unaligned();
                    let row = _mm512_set1_epi32(four);
                    for (acc, &codes) in acc.iter_mut().zip(&codes) {
                        *acc = _mm512_dpbusd_epi32(*acc, row, codes);
                    }
                }
            };
            let whole = quads / S * S;
            for quad in (0..whole).step_by(S) {
                for (s, acc) in acc.iter_mut().enumerate() {
                    step(acc, quad + s);
                }
            }
            for quad in whole..quads {
                step(&mut acc[0], quad);
            }
        }
        let mut out = acc[0];
        for set in &acc[1..] {
            for (out, set) in out.iter_mut().zip(set) {
                for (out, &sum) in out.iter_mut().zip(set) {
                    *out = _mm512_add_epi32(*out, sum);
                }
            }
        }
        out
    }

    /// The search's products and bounds at once: for the [`MR`] rows `rows` of `xq` and the `P`
    /// panels of centroids from `c0` on, row `r`'s lower bounds `v - 2e` (as [`super::bounds`])
    /// go to `lower[at[r]..][..P * NR]`; returns each row's least upper bound `v + 2e`. The
    /// products never leave their registers.
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI must be available; `panels` must hold `P * NR * width` codes, the
    /// centroid terms `[c0..c0 + P * NR]` must exist, and every `at[r] + P * NR <= lower.len()`
    /// with the rows' ranges disjoint.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn search_panels<const P: usize, const S: usize>(
        xq: &QuantRows,
        rows: [usize; MR],
        panels: &[u8],
        cq: &QuantCentroids,
        c0: usize,
        lower: &mut [f32],
        at: [usize; MR],
    ) -> [f32; MR] {
        debug_assert!(at.iter().all(|&a| a + P * NR <= lower.len()));
        let width = xq.width;
        let codes = rows.map(|g| &xq.codes[g * width..][..width]);
        // SAFETY: the caller's lengths.
        let sums = unsafe { sums::<P, S>(codes, width, panels) };
        let (two, minus_two) = (_mm512_set1_ps(2.0), _mm512_set1_ps(-2.0));
        let mut out = [f32::INFINITY; MR];
        let base = lower.as_mut_ptr();
        for (r, sums) in sums.iter().enumerate() {
            let mut least = _mm512_set1_ps(f32::INFINITY);
            for (p, &sum) in sums.iter().enumerate() {
                // SAFETY: the terms and `lower` ranges are in bounds (caller).
                unsafe {
                    let (v, e) = lanes_of(sum, cq, c0 + p * NR, xq.terms(rows[r]));
                    let at = base.add(at[r] + p * NR);
                    _mm512_storeu_ps(at, _mm512_fmadd_ps(minus_two, e, v));
                    // A NaN upper bound (never from finite data) is passed over, as in
                    // [`bounds`].
                    least = _mm512_min_ps(_mm512_fmadd_ps(two, e, v), least);
                }
            }
            out[r] = _mm512_reduce_min_ps(least);
        }
        out
    }

    /// Panels per call of [`products`].
    pub(super) const PANELS: usize = 4;

    /// As [`super::avx2::products`], for `P` panels side by side: per quad of dims, `P` panel
    /// loads and [`MR`] row broadcasts feed `MR * P` independent accumulators (16 at four
    /// panels: enough chains to cover the instruction's latency, and a quarter of a broadcast
    /// per product instruction).
    ///
    /// # Safety
    /// AVX-512 F, BW and VNNI must be available; `x` must hold `MR * width` codes, `panels`
    /// `P * NR * width`, and `out` `(MR - 1) * CENTROID_BLOCK + P * NR` values.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn products<const P: usize>(
        x: &[u8],
        width: usize,
        panels: &[u8],
        out: &mut [i32],
    ) {
        debug_assert_eq!(NR, 16);
        let mut acc = [[_mm512_setzero_si512(); P]; MR];
        let (x, panels) = (x.as_ptr(), panels.as_ptr());
        // SAFETY (whole block): every quad read is below width / 4, every panel below P, and
        // every store within `out`, by the caller's lengths.
        unsafe {
            for quad in 0..width / 4 {
                let mut codes = [_mm512_setzero_si512(); P];
                for (p, codes) in codes.iter_mut().enumerate() {
                    *codes = _mm512_loadu_si512(panels.add((p * width / 4 + quad) * 64).cast());
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let four = x.add(r * width + quad * 4).cast::<i32>().read_unaligned();
                    let row = _mm512_set1_epi32(four);
                    for (acc, &codes) in acc.iter_mut().zip(&codes) {
                        *acc = _mm512_dpbusd_epi32(*acc, row, codes);
                    }
                }
            }
            let out = out.as_mut_ptr();
            for (r, acc) in acc.iter().enumerate() {
                for (p, &sum) in acc.iter().enumerate() {
                    _mm512_storeu_si512(out.add(r * CENTROID_BLOCK + p * NR).cast(), sum);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::assign::{dist2, dot};
    use super::*;

    /// Values in `[-0.5, 0.5) + shift`.
    fn values(n: usize, seed: u64, shift: f32) -> Vec<f32> {
        let mut v = super::super::assign::tests::values(n, seed);
        v.iter_mut().for_each(|x| *x += shift);
        v
    }

    /// Brute force: the first arg-min of `dist2` and its value.
    fn brute(x: &[f32], c: &Centroids) -> (u32, f32) {
        (0..c.k()).fold((0, f32::INFINITY), |(bl, bd), j| {
            let d = dist2(x, c.row(j));
            if d < bd { (j as u32, d) } else { (bl, bd) }
        })
    }

    fn check(x: Matrix<'_>, centroids: &Centroids, kernel: Isa) {
        let n = x.rows();
        let xq = QuantRows::new(x);
        let mut cq = QuantCentroids::new(centroids);
        // The portable code is forced through the same walk.
        cq.isa = kernel;
        let (mut labels, mut dist) = (vec![u32::MAX; n], vec![0f32; n]);
        assign_quantized(
            x,
            xq.slice(0, n),
            &cq,
            centroids,
            &mut QuantScratch::default(),
            &mut labels,
            &mut dist,
        );
        for i in 0..n {
            let (label, d) = brute(x.row(i), centroids);
            assert_eq!(
                (labels[i], dist[i]),
                (label, d),
                "row {i} of {n}, k = {}, dims = {}, {kernel:?}",
                centroids.k(),
                x.dims()
            );
        }
    }

    /// Every build this CPU can run, whatever `VOCAB_MAX_ISA` says.
    fn kernels() -> Vec<Isa> {
        use crate::isa::{Level, detected};
        [Level::Portable, Level::Avx2, Level::Avx512]
            .into_iter()
            .filter(|&level| level <= detected())
            .map(Isa::at)
            .collect()
    }

    #[test]
    fn searched_runs_give_the_brute_force_nearest_and_the_full_pass_bounds() {
        // Runs of one, two, four and five panels (the last two calls apart), a short last run,
        // ids in reverse so ties go to the higher column, rows equal to centroids and centroids
        // repeated (exact ties), odd and even quads of dims; every build this CPU has.
        for kernel in kernels() {
            for (n, k, d, size) in [(40, 100, 20, 16), (33, 150, 45, 32), (21, 200, 512, 64)] {
                for size in [size, 80] {
                    let mut raw = values(k * d, 3, 0.0);
                    // Centroid 1 repeats centroid 0, centroid 17 repeats centroid 5.
                    raw.copy_within(0..d, d);
                    raw.copy_within(5 * d..6 * d, 17 * d);
                    let centroids = Centroids::new(raw, d);
                    let mut rows = values(n * d, 4, 0.0);
                    rows[..d].copy_from_slice(centroids.row(0));
                    rows[2 * d..3 * d].copy_from_slice(centroids.row(5));
                    let x = Matrix::dense(&rows, d);
                    let xq = QuantRows::new(x);
                    let mut cq = QuantCentroids::new(&centroids);
                    cq.isa = kernel;
                    let start: Vec<usize> =
                        (0..k.div_ceil(size)).map(|g| g * size).chain([k]).collect();
                    let ids: Vec<u32> = (0..k as u32).rev().collect();
                    let runs = Runs::new(&start, &ids);
                    let count = start.len() - 1;
                    // The full pass's bounds of every run, to compare with.
                    let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
                    let mut full = vec![0f32; n * count];
                    assign_quantized_runs(
                        x,
                        xq.slice(0, n),
                        &cq,
                        &centroids,
                        runs,
                        &mut QuantScratch::default(),
                        &mut labels,
                        &mut dist,
                        &mut full,
                    );
                    // Every other row, each with a pseudo-random set of runs (some with none),
                    // starting from column `row % k`.
                    let chosen: Vec<usize> = (0..n).step_by(2).collect();
                    let mut pairs = Vec::new();
                    for r in 0..chosen.len() {
                        pairs.extend(
                            (0..count)
                                .filter(|&g| (r * 7 + g * 3) % 5 < 2 + r % 2)
                                .filter(|_| r % 6 != 5)
                                .map(|g| (r as u32, g as u32)),
                        );
                    }
                    let mut best: Vec<(u32, f32)> = chosen
                        .iter()
                        .map(|&i| ((i % k) as u32, dist2(x.row(i), centroids.row(i % k))))
                        .collect();
                    let entry = best.clone();
                    let mut least = vec![0f32; pairs.len()];
                    search_runs(
                        x,
                        xq.slice(0, n),
                        &cq,
                        &centroids,
                        runs,
                        &chosen,
                        &pairs,
                        &mut SearchScratch::default(),
                        &mut best,
                        &mut least,
                    );
                    let case = format!("n {n} k {k} d {d} runs of {size}, {kernel:?}");
                    for (r, &i) in chosen.iter().enumerate() {
                        let xi = x.row(i);
                        let mine: Vec<u32> = pairs
                            .iter()
                            .filter(|p| p.0 == r as u32)
                            .map(|p| p.1)
                            .collect();
                        let columns = mine
                            .iter()
                            .flat_map(|&g| start[g as usize]..start[g as usize + 1])
                            .chain([entry[r].0 as usize]);
                        let want = columns
                            .map(|j| (dist2(xi, centroids.row(j)), ids[j], j as u32))
                            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                            .map(|(d, _, j)| (j, d));
                        assert_eq!(Some(best[r]), want, "{case} row {i}");
                        let own = dot(xi, xi);
                        for (&(_, g), &l) in
                            pairs.iter().zip(&least).filter(|(p, _)| p.0 == r as u32)
                        {
                            let (lo, hi) = (start[g as usize], start[g as usize + 1]);
                            let others = (lo..hi).filter(|&j| j != best[r].0 as usize);
                            let truth = others
                                .clone()
                                .map(|j| dist2(xi, centroids.row(j)) - own)
                                .fold(f32::INFINITY, f32::min);
                            let slack = 1e-4
                                * (own
                                    + centroids.norms()[lo..hi]
                                        .iter()
                                        .copied()
                                        .fold(0.0, f32::max));
                            assert!(
                                l <= truth + slack,
                                "{case} row {i} run {g}: {l} above {truth}"
                            );
                            let whole = full[i * count + g as usize];
                            if (lo..hi).contains(&(best[r].0 as usize)) {
                                assert!(l >= whole, "{case} row {i} run {g}: {l} below {whole}");
                            } else {
                                assert_eq!(l.to_bits(), whole.to_bits(), "{case} row {i} run {g}");
                            }
                        }
                    }
                    assert!(
                        best.iter().zip(&entry).any(|(b, e)| b.0 != e.0),
                        "{case}: no row found a nearer centroid"
                    );
                }
            }
        }
    }

    #[test]
    fn labels_are_the_brute_force_arg_min_across_block_edges() {
        for kernel in kernels() {
            for (n, k, d, stride, shift) in [
                (1, 1, 3, 3, 0.0),
                (7, 3, 5, 7, 0.0),
                (130, 530, 16, 18, 0.3),
                (67, 40, 512, 514, 0.0),
                (20, 1100, 9, 9, -2.0),
                // Far from the origin, where the f32 expansion misranks near-ties.
                (65, 33, 64, 64, 50.0),
            ] {
                let raw = values(n * stride, 1, shift);
                let x = Matrix::new(&raw, n, d, stride);
                let centroids = Centroids::new(values(k * d, 2, shift), d);
                check(x, &centroids, kernel);
            }
        }
    }

    #[test]
    fn centroids_drawn_from_the_rows_and_exact_ties_resolve_to_the_lowest_index() {
        for kernel in kernels() {
            let d = 24;
            let raw = values(90 * d, 5, 0.1);
            // Every row is also a centroid (distance 0), some twice (exact ties), plus a
            // constant row and an all-zero centroid (degenerate quantisation steps).
            let mut cents: Vec<f32> = raw[..40 * d].to_vec();
            cents.extend_from_slice(&raw[..10 * d]);
            cents.extend(std::iter::repeat_n(0.0, d));
            let mut rows = raw.clone();
            rows.extend(std::iter::repeat_n(0.25, d));
            let centroids = Centroids::new(cents, d);
            check(Matrix::dense(&rows, d), &centroids, kernel);
        }
    }

    /// [`nearest_few_quantized`] against the first `r` of all centroids sorted by (`dist2`,
    /// index), for several `r` (including `r > k`).
    fn check_few(x: Matrix<'_>, centroids: &Centroids, kernel: Isa) {
        let n = x.rows();
        let xq = QuantRows::new(x);
        let mut cq = QuantCentroids::new(centroids);
        cq.isa = kernel;
        let mut scratch = FewScratch::default();
        for r in [1, 2, 5, 8, 9, centroids.k() + 2] {
            let (mut words, mut dists) = (vec![7u32; n * r], vec![0f32; n * r]);
            let xs = xq.slice(0, n);
            nearest_few_quantized(
                x,
                xs,
                &cq,
                centroids,
                &mut scratch,
                r,
                &mut words,
                &mut dists,
            );
            for i in 0..n {
                let mut all: Vec<(f32, u32)> = (0..centroids.k())
                    .map(|j| (dist2(x.row(i), centroids.row(j)), j as u32))
                    .collect();
                all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                all.resize(r.max(all.len()), (f32::INFINITY, u32::MAX));
                let want: Vec<(f32, u32)> = all[..r].to_vec();
                let got: Vec<(f32, u32)> = (0..r)
                    .map(|s| (dists[i * r + s], words[i * r + s]))
                    .collect();
                assert_eq!(
                    got,
                    want,
                    "row {i}, r = {r}, k = {}, {kernel:?}",
                    centroids.k()
                );
            }
        }
    }

    #[test]
    fn nearest_few_are_the_brute_force_first_r_with_ties_to_the_lower_index() {
        for kernel in kernels() {
            for (n, k, d, shift) in [
                (1, 1, 3, 0.0),
                (7, 3, 5, 0.0),
                (130, 530, 16, 0.3),
                (67, 1100, 512, 0.0),
                (65, 33, 64, 50.0),
            ] {
                let x = values(n * d, 1, shift);
                let centroids = Centroids::new(values(k * d, 2, shift), d);
                check_few(Matrix::dense(&x, d), &centroids, kernel);
            }
            // Rows that are centroids, duplicated centroids (exact ties) and a zero centroid.
            let d = 24;
            let raw = values(90 * d, 5, 0.1);
            let mut cents: Vec<f32> = raw[..40 * d].to_vec();
            cents.extend_from_slice(&raw[..10 * d]);
            cents.extend(std::iter::repeat_n(0.0, d));
            check_few(Matrix::dense(&raw, d), &Centroids::new(cents, d), kernel);
        }
    }

    #[test]
    fn each_error_term_is_needed_and_enough() {
        // One side exactly on its code grid (no quantisation error), the other with a coarse
        // step (values of -5 and 5 widen its range): only that side's error term separates
        // the candidates, so dropping either term fails one of the two cases.
        let d = 32;
        // Rows: codes 0..=127 with lo = 0 and step 1/127; centroids: -127..=127 with t = 1/127.
        let on_grid = |n: usize, seed: u64, signed: bool| -> Vec<f32> {
            let mut v: Vec<f32> = values(n * d, seed, 0.0)
                .iter()
                .map(|x| {
                    let q = (x * 254.0).round();
                    (if signed { q } else { q.abs().min(127.0) }) / 127.0
                })
                .collect();
            for row in v.chunks_exact_mut(d) {
                (row[0], row[1]) = (if signed { -1.0 } else { 0.0 }, 1.0);
            }
            v
        };
        let coarse = |n: usize, seed: u64| -> Vec<f32> {
            let mut v: Vec<f32> = values(n * d, seed, 0.0).iter().map(|x| x * 0.4).collect();
            for row in v.chunks_exact_mut(d) {
                (row[0], row[1]) = (5.0, -5.0);
            }
            v
        };
        for kernel in kernels() {
            for (rows, cents) in [
                (coarse(300, 7), on_grid(800, 8, true)),
                (on_grid(300, 7, false), coarse(800, 8)),
            ] {
                let centroids = Centroids::new(cents, d);
                check(Matrix::dense(&rows, d), &centroids, kernel);
            }
        }
    }

    #[test]
    fn slices_of_the_quantised_rows_match_their_rows() {
        let d = 40;
        let raw = values(101 * d, 3, 0.0);
        let x = Matrix::dense(&raw, d);
        let centroids = Centroids::new(values(70 * d, 4, 0.0), d);
        let xq = QuantRows::new(x);
        let cq = QuantCentroids::new(&centroids);
        let (start, end) = (37, 101);
        let n = end - start;
        let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
        assign_quantized(
            x.slice(start, end),
            xq.slice(start, end),
            &cq,
            &centroids,
            &mut QuantScratch::default(),
            &mut labels,
            &mut dist,
        );
        for (i, &label) in labels.iter().enumerate() {
            assert_eq!(label, brute(x.row(start + i), &centroids).0, "row {i}");
        }
    }

    #[test]
    fn the_avx2_build_of_row_quantisation_gives_the_same_codes_and_terms() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut rows: Vec<Vec<f32>> = [(512, 3, 0.0), (37, 4, 9.0), (8, 5, -1.0), (5, 6, 0.0)]
                .into_iter()
                .map(|(dims, seed, shift)| values(dims, seed, shift))
                .collect();
            // Constant, huge, tiny and non-finite values follow the scalar code's rules too.
            rows.push(vec![0.25; 24]);
            rows.push(
                (0..40)
                    .map(|i| if i % 3 == 0 { 1e30 } else { -1e-30 })
                    .collect(),
            );
            let mut odd = values(29, 7, 0.0);
            (odd[3], odd[11], odd[20]) = (f32::NAN, f32::INFINITY, f32::NEG_INFINITY);
            rows.push(odd);
            for row in rows {
                let dims = row.len();
                let (mut a, mut b) = (vec![0u8; width(dims)], vec![0u8; width(dims)]);
                let slack = rounding(dims);
                let plain = quantise_row_body(&row, slack, &mut a);
                // SAFETY: AVX2 was detected.
                let simd = unsafe { quantise_row_avx2(&row, slack, &mut b) };
                assert_eq!((plain.map(f32::to_bits), &a), (simd.map(f32::to_bits), &b));
            }
        }
    }

    #[test]
    fn least_of_is_the_minimum_at_every_length() {
        let v: Vec<f32> = (0..40)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.5)
            .collect();
        for start in 0..5 {
            for end in start..v.len() {
                let want = v[start..end].iter().copied().fold(f32::INFINITY, f32::min);
                assert_eq!(least_of(&v[start..end]), want, "{start}..{end}");
            }
        }
    }

    #[test]
    fn every_build_of_the_direct_distances_is_dist2_bit_for_bit() {
        for kernel in kernels() {
            for dims in [1, 7, 8, 13, 512, 515] {
                let a = values(dims, 1, 0.0);
                let centroids = Centroids::new(values(5 * dims, 2, 0.3), dims);
                for columns in [&[0u32, 1, 2, 3][..], &[4, 2], &[3]] {
                    let got = kernel.dists(&a, &centroids, columns);
                    for (&j, got) in columns.iter().zip(got) {
                        let want = dist2(&a, centroids.row(j as usize));
                        assert_eq!(got.to_bits(), want.to_bits(), "{kernel:?}, {dims} dims");
                    }
                }
            }
        }
    }

    #[test]
    fn portable_and_simd_products_agree() {
        for kernel in kernels() {
            // Odd and even quad counts, every number of panels a call takes.
            for (width, count) in [(64, 1), (60, 2), (4, 3), (512, 4)] {
                let count = count.min(kernel.panels_per_call());
                let x: Vec<u8> = (0..MR * width).map(|i| (i * 37 % 128) as u8).collect();
                let panels: Vec<u8> = (0..count * NR * width)
                    .map(|i| ((i * 53 % 255) as i32 - 127) as i8 as u8)
                    .collect();
                let mut want = vec![0i32; (MR - 1) * CENTROID_BLOCK + count * NR];
                for p in 0..count {
                    let panel = &panels[p * NR * width..];
                    products_portable(&x, width, panel, &mut want[p * NR..]);
                }
                let mut got = vec![0i32; want.len()];
                kernel.products(&x, width, &panels, count, &mut got);
                assert_eq!(got, want, "{kernel:?}, width {width}, {count} panels");
            }
            // The extremes of the codes do not saturate the i16 pair sums.
            let width = 64;
            let mut got = vec![0i32; (MR - 1) * CENTROID_BLOCK + NR];
            let x = vec![127u8; MR * width];
            for code in [127i8, -127] {
                let panel = vec![code as u8; NR * width];
                kernel.products(&x, width, &panel, 1, &mut got);
                assert_eq!(got[0], 127 * i32::from(code) * width as i32, "{kernel:?}");
            }
        }
    }
}
