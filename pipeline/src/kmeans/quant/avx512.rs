//! The VNNI kernel: `vpdpbusd` multiplies 64 `u8 x i8` pairs and adds each four into an `i32`
//! lane in one instruction (no `i16` step), so one 512-bit register holds a whole panel's
//! [`NR`] sums. The products are the exact integers the other builds compute.

use std::arch::x86_64::*;

use super::codes::{CENTROID_BLOCK, Candidate, MR, NR, QuantCentroids, QuantRows, RowTerms};

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
unsafe fn lanes_of(dot: __m512i, cq: &QuantCentroids, j: usize, row: RowTerms) -> (__m512, __m512) {
    debug_assert!(j + 16 <= cq.norm.len());
    // SAFETY: the range is in bounds (caller).
    unsafe {
        let load = |v: &[f32]| _mm512_loadu_ps(v.as_ptr().add(j));
        let dot = _mm512_cvtepi32_ps(dot);
        let base = _mm512_fnmadd_ps(_mm512_set1_ps(row.lo), load(&cq.offset), load(&cq.norm));
        let scaled = _mm512_mul_ps(load(&cq.scale), dot);
        let v = _mm512_fnmadd_ps(_mm512_set1_ps(row.step), scaled, base);
        let inner = _mm512_fmadd_ps(_mm512_set1_ps(row.error), load(&cq.length), load(&cq.slack));
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
        unsafe { _mm512_storeu_ps(lower.as_mut_ptr().add(at), _mm512_fmadd_ps(minus_two, e, v)) };
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
        unsafe { _mm512_storeu_ps(lower.as_mut_ptr().add(at), _mm512_fmadd_ps(minus_two, e, v)) };
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
    let second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
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
            let packed =
                _mm512_maskz_compress_epi64(half, _mm512_permutex2var_epi32(index, order, bits));
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
