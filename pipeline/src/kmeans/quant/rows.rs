//! Rows quantised: per row an offset and a step, codes in `0..=127`, and the terms of the
//! error bound; compiled twice (generic and AVX2, the same codes and terms). A row of u8 codes
//! none above 127 keeps its own bytes as its codes, on the values' own grid: its codes then
//! carry no rounding, and the bounds that verify candidates are tighter.

use rayon::prelude::*;

use super::codes::{MR, QuantRows, QuantSlice, ROW_LEVELS, rounding, up, width};
use crate::partition::Rows;

impl QuantRows {
    /// Quantises every row of `x`, the rows in parallel.
    pub fn new(x: Rows<'_>) -> Self {
        let mut out = Self::empty(x.rows(), x.dims());
        let slack = rounding(out.dims);
        let terms: Vec<[f32; 5]> = out
            .codes
            .par_chunks_mut(out.width)
            .take(out.rows)
            .enumerate()
            .map_init(Vec::new, |buf, (i, codes)| {
                quantise_any(x, i, buf, slack, codes)
            })
            .collect();
        out.push_terms(terms);
        out
    }

    /// Quantises the rows of `pieces`, one after another, as one set of rows, each as
    /// [`QuantRows::new`] quantises it; in the calling thread (for a map task's batch: the
    /// tasks are the parallelism, and rows quantised in parallel inside them took twice the
    /// time on 2 threads).
    ///
    /// # Panics
    /// If the pieces' dims differ.
    pub fn stacked(pieces: &[Rows<'_>]) -> Self {
        let dims = pieces.first().map_or(0, Rows::dims);
        assert!(
            pieces.iter().all(|p| p.dims() == dims),
            "pieces of different dims"
        );
        let mut out = Self::empty(pieces.iter().map(Rows::rows).sum(), dims);
        let slack = rounding(dims);
        let mut chunks = out.codes.chunks_exact_mut(out.width);
        let mut buf = Vec::new();
        let mut terms = Vec::with_capacity(out.rows);
        for &piece in pieces {
            for (i, codes) in (0..piece.rows()).zip(chunks.by_ref()) {
                terms.push(quantise_any(piece, i, &mut buf, slack, codes));
            }
        }
        out.push_terms(terms);
        out
    }

    /// `rows` rows of `dims` values, their codes zero and no terms yet.
    fn empty(rows: usize, dims: usize) -> Self {
        let width = width(dims);
        Self {
            rows,
            dims,
            width,
            codes: vec![0; (rows + MR - 1) * width],
            lo: Vec::with_capacity(rows),
            step: Vec::with_capacity(rows),
            length: Vec::with_capacity(rows),
            error: Vec::with_capacity(rows),
            slack: Vec::with_capacity(rows),
        }
    }

    /// Appends each row's terms (lo, step, length, error, slack).
    fn push_terms(&mut self, terms: Vec<[f32; 5]>) {
        for [lo, step, length, error, slack] in terms {
            self.lo.push(lo);
            self.step.push(step);
            self.length.push(length);
            self.error.push(error);
            self.slack.push(slack);
        }
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

/// Quantises row `i` of `x` into `codes` (`buf` holds a u8 row's values); returns its terms.
fn quantise_any(
    x: Rows<'_>,
    i: usize,
    buf: &mut Vec<f32>,
    slack: f64,
    codes: &mut [u8],
) -> [f32; 5] {
    match x {
        Rows::F32(m) => quantise_row(m.row(i), slack, codes),
        Rows::U8(c) => quantise_bytes(c.row(i), buf, slack, codes),
    }
}

/// Quantises `row` into `codes`; returns its terms (`lo`, `step`, `length`, `error`, `slack`,
/// as in [`QuantRows`]).
pub(super) fn quantise_row(row: &[f32], slack: f64, codes: &mut [u8]) -> [f32; 5] {
    quantise_in(row, row_range(row), slack, codes)
}

/// Quantises a row of u8 codes ([`crate::store::u8_value`] gives their values), decoded into
/// `buf`: when no byte is above [`ROW_LEVELS`] the codes are the bytes themselves, on the grid
/// of the values (`lo = 0`, `step = 1 / 255`), so the row's error term is only the floats'
/// rounding; otherwise as [`quantise_row`] quantises the decoded values.
pub(super) fn quantise_bytes(
    bytes: &[u8],
    buf: &mut Vec<f32>,
    slack: f64,
    codes: &mut [u8],
) -> [f32; 5] {
    buf.clear();
    buf.extend(bytes.iter().map(|&b| crate::store::u8_value(b)));
    if bytes.iter().any(|&b| f32::from(b) > ROW_LEVELS) {
        return quantise_row(buf, slack, codes);
    }
    // `(v - 0) * 255 + 0.5` truncates to the byte: `v` is within an ulp of `byte / 255`.
    let terms = quantise_in(buf, (0.0, crate::store::u8_value(1), 255.0), slack, codes);
    debug_assert_eq!(&codes[..bytes.len()], bytes);
    terms
}

/// Quantises `row` into `codes` on the grid `range` (`lo`, step, its inverse).
fn quantise_in(row: &[f32], range: (f32, f32, f32), slack: f64, codes: &mut [u8]) -> [f32; 5] {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        // SAFETY: AVX2 was detected.
        return unsafe { quantise_row_avx2(row, range, slack, codes) };
    }
    quantise_row_body(row, range, slack, codes)
}

/// Per-lane sums of a row's quantisation: lane `l` takes the elements at `l` modulo 8, in order
/// (a fixed order, so the bound is reproducible whichever code computes it).
#[derive(Clone, Copy)]
pub(super) struct RowSums {
    norm: [f64; 8],
    error: [f64; 8],
    peak: f32,
}

/// The row's code range: `lo`, the step and its inverse.
pub(super) fn row_range(row: &[f32]) -> (f32, f32, f32) {
    let lo = row.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let step = if hi > lo { (hi - lo) / ROW_LEVELS } else { 1.0 };
    (lo, step, 1.0 / step)
}

/// Codes and sums of the elements from `from` on (`from` a multiple of 8).
pub(super) fn quantise_from(
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
pub(super) fn row_terms(
    len: usize,
    range: (f32, f32, f32),
    sums: &RowSums,
    slack: f64,
) -> [f32; 5] {
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

pub(super) fn quantise_row_body(
    row: &[f32],
    range: (f32, f32, f32),
    slack: f64,
    codes: &mut [u8],
) -> [f32; 5] {
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
pub(super) unsafe fn quantise_row_avx2(
    row: &[f32],
    range: (f32, f32, f32),
    slack: f64,
    codes: &mut [u8],
) -> [f32; 5] {
    use std::arch::x86_64::*;

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
