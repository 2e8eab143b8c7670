//! The AVX2 kernel and scan. Callers check the CPU features and the slice lengths.

use std::arch::x86_64::*;

use super::codes::{CENTROID_BLOCK, Candidate, MR, NR, QuantCentroids, RowTerms, insert_least};

/// The products of [`super::Isa::products`] for one panel: per quad of dims, `vpmaddubsw`
/// multiplies a row's four codes (broadcast) with the panel's and adds them in pairs into
/// `i16` lanes; two quads' lanes are added in `i16` before `vpmaddwd` widens them into the
/// `i32` sums, one widening per two quads. No `i16` step saturates or wraps: row codes are at
/// most [`ROW_LEVELS`](super::codes::ROW_LEVELS) = 127 and this build's centroid codes at most
/// 64 in magnitude ([`super::Isa::centroid_levels`]), so a lane of one quad is at most
/// `2 x 127 x 64 = 16,256` in magnitude and of two quads 32,512 (`i16::MAX` is 32,767). The sums are the exact
/// integers the other builds compute from the same codes.
///
/// Codes of larger magnitude give wrong sums (wrapped lanes), which the debug build checks.
///
/// # Safety
/// AVX2 must be available; `x` must hold `MR * width` codes, `panel` `NR * width`, and `out`
/// `(MR - 1) * CENTROID_BLOCK + NR` values.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn products(x: &[u8], width: usize, panel: &[u8], out: &mut [i32]) {
    debug_assert!(
        panel[..NR * width]
            .iter()
            .all(|&p| (p as i8).unsigned_abs() <= 64)
    );
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_si256(); 2]; MR];
    let (x, panel) = (x.as_ptr(), panel.as_ptr());
    let quads = width / 4;
    // SAFETY (whole block): every quad read is below width / 4, so every read lies in the
    // checked lengths.
    unsafe {
        let codes = |quad: usize| {
            let lo = _mm256_loadu_si256(panel.add(quad * 64).cast());
            let hi = _mm256_loadu_si256(panel.add(quad * 64 + 32).cast());
            (lo, hi)
        };
        let row = |r: usize, quad: usize| {
            _mm256_set1_epi32(x.add(r * width + quad * 4).cast::<i32>().read_unaligned())
        };
        for quad in (0..quads / 2 * 2).step_by(2) {
            let ((lo0, hi0), (lo1, hi1)) = (codes(quad), codes(quad + 1));
            for (r, acc) in acc.iter_mut().enumerate() {
                let (b0, b1) = (row(r, quad), row(r, quad + 1));
                let lo =
                    _mm256_add_epi16(_mm256_maddubs_epi16(b0, lo0), _mm256_maddubs_epi16(b1, lo1));
                let hi =
                    _mm256_add_epi16(_mm256_maddubs_epi16(b0, hi0), _mm256_maddubs_epi16(b1, hi1));
                acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(lo, ones));
                acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(hi, ones));
            }
        }
        if quads % 2 == 1 {
            let (lo, hi) = codes(quads - 1);
            for (r, acc) in acc.iter_mut().enumerate() {
                let b = row(r, quads - 1);
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
        let inner = _mm256_fmadd_ps(_mm256_set1_ps(row.error), load(&cq.length), load(&cq.slack));
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
        unsafe { _mm256_storeu_ps(lower.as_mut_ptr().add(at), _mm256_fmadd_ps(minus_two, e, v)) };
        let u = _mm256_fmadd_ps(two, e, v);
        // Lanes below the current r-th least are rare once it has settled.
        let mut mask = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(u, worst));
        if mask != 0 {
            let mut values = [0f32; 8];
            // SAFETY: `values` holds eight f32.
            unsafe { _mm256_storeu_ps(values.as_mut_ptr(), u) };
            while mask != 0 {
                insert_least(least, values[mask.trailing_zeros() as usize]);
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
        *out = crate::kmeans::assign::dist2_finish(&lanes, &a[whole..], &b[whole..]);
    }
    out
}
