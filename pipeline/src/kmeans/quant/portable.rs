//! The portable build of the kernel and the bounds: plain Rust, the reference the others equal.

use super::codes::{CENTROID_BLOCK, MR, NR, QuantCentroids, RowTerms};

pub(super) fn products_portable(x: &[u8], width: usize, panel: &[u8], out: &mut [i32]) {
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
pub(super) fn bounds(dot: i32, cq: &QuantCentroids, j: usize, row: RowTerms) -> (f32, f32) {
    let base = (-row.lo).mul_add(cq.offset[j], cq.norm[j]);
    let v = (-row.step).mul_add(cq.scale[j] * dot as f32, base);
    let e = row
        .length
        .mul_add(cq.error[j], row.error.mul_add(cq.length[j], cq.slack[j]));
    (v, e)
}

pub(super) fn bounds_portable(
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
