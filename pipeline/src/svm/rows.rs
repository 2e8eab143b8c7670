//! Training rows as the coordinate descent sweeps them: each row as the blocks of `width` values
//! that hold a non-zero, with the block's index, in increasing order. Zeros add nothing to a dot
//! product or an update, so the solver gives the dense result while touching only these blocks.
//!
//! The width follows the data's structure: 1 for sparse histograms (compressed sparse rows); a
//! kernel map's `2 n + 1` for mapped histograms, built from the histograms' non-zero bins
//! without the dense mapped vectors ever existing (one index per bin, a bin's mapped values and
//! their weights side by side in memory); the whole row for dense vectors (VLAD, Fisher
//! vectors), swept as one contiguous block with no index at all. One contiguous index and value
//! array keeps an epoch a single forward sweep through memory. Sums run in a fixed order, so a
//! fit is deterministic.

use std::sync::{Arc, OnceLock};

use super::gram::Gram;
use crate::kernel_map::KernelMap;

/// Rows of a training set, a row's non-zero blocks side by side.
#[derive(Debug, Clone)]
pub struct Rows {
    dims: usize,
    width: usize,
    /// Row `i` is blocks `start[i]..start[i + 1]`.
    start: Vec<usize>,
    /// Block index of each block (its values are `dims` positions `index * width..`).
    index: Vec<u32>,
    /// `width` values a block.
    value: Vec<f32>,
    /// The rows' inner products, once a solve has needed them (shared by the fits that follow:
    /// a cross-validation's and the final fit's).
    gram: OnceLock<Arc<Gram>>,
}

impl Rows {
    /// Rows of `x` as given: dense (one block a row) when more than half the values are non-zero,
    /// else one value a block.
    ///
    /// # Panics
    /// If the rows differ in length.
    pub fn from_dense(x: &[&[f32]]) -> Self {
        let dims = x.first().map_or(0, |r| r.len());
        assert!(
            x.iter().all(|r| r.len() == dims),
            "rows of different lengths"
        );
        let nonzero: usize = x
            .iter()
            .map(|r| r.iter().filter(|v| **v != 0.0).count())
            .sum();
        let dense = dims > 0 && 2 * nonzero > x.len() * dims;
        let width = if dense { dims } else { 1 };
        let mut rows = Self::empty(dims, width, x.len());
        for r in x {
            for (b, block) in r.chunks_exact(width.max(1)).enumerate() {
                if block.iter().any(|&v| v != 0.0) {
                    rows.index.push(b as u32);
                    rows.value.extend_from_slice(block);
                }
            }
            rows.start.push(rows.index.len());
        }
        rows
    }

    /// Rows of the histograms `x` mapped by `map`: the values [`KernelMap::apply`] gives, a
    /// bin's `2 n + 1` a block, only the bins that are not zero.
    ///
    /// # Panics
    /// If the rows differ in length.
    pub fn mapped(x: &[&[f32]], map: &KernelMap) -> Self {
        let bins = x.first().map_or(0, |r| r.len());
        assert!(
            x.iter().all(|r| r.len() == bins),
            "rows of different lengths"
        );
        // Each row mapped on its own (sines and cosines of every non-zero bin: in parallel),
        // then laid end to end in row order.
        use rayon::prelude::*;
        let mapped: Vec<(Vec<u32>, Vec<f32>)> = x
            .par_iter()
            .map(|r| {
                let (mut index, mut value) = (Vec::new(), Vec::new());
                map.apply_sparse(r, |bin, values| {
                    index.push(bin as u32);
                    value.extend_from_slice(values);
                });
                (index, value)
            })
            .collect();
        let mut rows = Self::empty(map.mapped_len(bins), map.width(), x.len());
        for (index, value) in mapped {
            rows.index.extend(index);
            rows.value.extend(value);
            rows.start.push(rows.index.len());
        }
        rows
    }

    fn empty(dims: usize, width: usize, rows: usize) -> Self {
        let mut start = Vec::with_capacity(rows + 1);
        start.push(0);
        Self {
            dims,
            width: width.max(1),
            start,
            index: Vec::new(),
            value: Vec::new(),
            gram: OnceLock::new(),
        }
    }

    /// The rows' inner products (computed on the first call).
    pub(super) fn gram(&self) -> Arc<Gram> {
        Arc::clone(self.gram.get_or_init(|| {
            Arc::new(Gram::of(self.len(), self.dims(), |i, cursor, from, out| {
                self.fill(i, cursor, from, out)
            }))
        }))
    }

    /// Whether [`Rows::gram`] has been computed.
    pub(super) fn has_gram(&self) -> bool {
        self.gram.get().is_some()
    }

    /// The rows `which`, in that order.
    pub fn select(&self, which: &[usize]) -> Self {
        let mut rows = Self::empty(self.dims, self.width, which.len());
        for &i in which {
            let (idx, val) = self.row(i);
            rows.index.extend_from_slice(idx);
            rows.value.extend_from_slice(val);
            rows.start.push(rows.index.len());
        }
        rows
    }

    /// Rows.
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values a row (mapped, for mapped rows).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Values a block.
    pub fn width(&self) -> usize {
        self.width
    }

    fn row(&self, i: usize) -> (&[u32], &[f32]) {
        let (a, b) = (self.start[i], self.start[i + 1]);
        (
            &self.index[a..b],
            &self.value[a * self.width..b * self.width],
        )
    }

    /// Row `i` with its zeros (for solvers that take dense rows).
    pub fn dense(&self, i: usize) -> Vec<f32> {
        let mut out = vec![0f32; self.dims];
        let (idx, val) = self.row(i);
        let b = self.width;
        for (&j, vs) in idx.iter().zip(val.chunks_exact(b)) {
            out[j as usize * b..(j as usize + 1) * b].copy_from_slice(vs);
        }
        out
    }

    /// Row `i`'s values at positions `from..from + out.len()` into `out` (zeros elsewhere), for
    /// chunks visited in increasing order: `cursor` (0 before the first chunk) keeps the first
    /// block not yet wholly copied. Whether a block of the row lies there.
    pub(super) fn fill(&self, i: usize, cursor: &mut usize, from: usize, out: &mut [f64]) -> bool {
        out.fill(0.0);
        let mut held = false;
        let to = from + out.len();
        let (idx, val) = self.row(i);
        let b = self.width;
        while let Some(&j) = idx.get(*cursor) {
            let start = j as usize * b;
            if start >= to {
                break;
            }
            let end = start + b;
            let values = &val[*cursor * b..(*cursor + 1) * b];
            for p in start.max(from)..end.min(to) {
                out[p - from] = f64::from(values[p - start]);
                held = true;
            }
            if end > to {
                // The block goes on into the next chunk.
                break;
            }
            *cursor += 1;
        }
        held
    }

    /// Values stored (the non-zero blocks' values, all rows).
    pub(super) fn stored(&self) -> usize {
        self.value.len()
    }

    /// `x_i . x_i`.
    pub(super) fn sum_squares(&self, i: usize) -> f64 {
        self.row(i).1.iter().map(|&v| f64::from(v).powi(2)).sum()
    }

    /// `w[..dims] . x_i`: one value a block with four independent accumulators, a kernel
    /// map's blocks with an accumulator per position in the block (the width known when
    /// compiled, so the block is a few vector instructions), wider blocks eight lanes at a time.
    /// The order of the sums is fixed whatever the instruction set (no fused multiply-add, each
    /// lane summed alone), so a fit gives the same bits on every CPU. Inlined into the solver's
    /// sweep, which is compiled once portable and once for AVX2.
    #[inline(always)]
    pub(super) fn dot(&self, i: usize, w: &[f64]) -> f64 {
        let (idx, val) = self.row(i);
        match self.width {
            1 => dot_single(idx, val, w),
            3 => dot_blocks::<3>(idx, val, w),
            5 => dot_blocks::<5>(idx, val, w),
            7 => dot_blocks::<7>(idx, val, w),
            9 => dot_blocks::<9>(idx, val, w),
            b => {
                let mut acc = [0f64; 8];
                for (&j, vs) in idx.iter().zip(val.chunks_exact(b)) {
                    let at = j as usize * b;
                    lanes(vs, &w[at..at + b], &mut acc);
                }
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
            }
        }
    }

    /// `w[..dims] += step * x_i`.
    #[inline(always)]
    pub(super) fn add_to(&self, i: usize, step: f64, w: &mut [f64]) {
        let (idx, val) = self.row(i);
        match self.width {
            1 => {
                for (&j, &v) in idx.iter().zip(val) {
                    w[j as usize] += step * f64::from(v);
                }
            }
            3 => add_blocks::<3>(idx, val, step, w),
            5 => add_blocks::<5>(idx, val, step, w),
            7 => add_blocks::<7>(idx, val, step, w),
            9 => add_blocks::<9>(idx, val, step, w),
            b => {
                for (&j, vs) in idx.iter().zip(val.chunks_exact(b)) {
                    let at = j as usize * b;
                    for (wv, &v) in w[at..at + b].iter_mut().zip(vs) {
                        *wv += step * f64::from(v);
                    }
                }
            }
        }
    }

    /// The decision value of row `i` under a model's weights `w` and `bias` (as stored, `f32`).
    pub fn decision(&self, i: usize, w: &[f32], bias: f32) -> f64 {
        let (idx, val) = self.row(i);
        let b = self.width;
        let mut sum = 0f64;
        for (&j, vs) in idx.iter().zip(val.chunks_exact(b)) {
            let at = j as usize * b;
            for (&wv, &v) in w[at..at + b].iter().zip(vs) {
                sum += f64::from(wv) * f64::from(v);
            }
        }
        sum + f64::from(bias)
    }
}

/// The dot product of single values at their indices, four accumulators.
#[inline(always)]
fn dot_single(idx: &[u32], val: &[f32], w: &[f64]) -> f64 {
    let mut acc = [0f64; 4];
    let (ci, cv) = (idx.chunks_exact(4), val.chunks_exact(4));
    let (ri, rv) = (ci.remainder(), cv.remainder());
    for (j, v) in ci.zip(cv) {
        for l in 0..4 {
            acc[l] += f64::from(v[l]) * w[j[l] as usize];
        }
    }
    let tail: f64 = (ri.iter().zip(rv))
        .map(|(&j, &v)| f64::from(v) * w[j as usize])
        .sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// The dot product of blocks of `B` values, an accumulator per position in the block.
#[inline(always)]
fn dot_blocks<const B: usize>(idx: &[u32], val: &[f32], w: &[f64]) -> f64 {
    let mut acc = [0f64; B];
    for (&j, vs) in idx.iter().zip(val.chunks_exact(B)) {
        let at = j as usize * B;
        let ws = &w[at..at + B];
        for l in 0..B {
            acc[l] += f64::from(vs[l]) * ws[l];
        }
    }
    acc.iter().sum()
}

/// `w += step * x` over blocks of `B` values.
#[inline(always)]
fn add_blocks<const B: usize>(idx: &[u32], val: &[f32], step: f64, w: &mut [f64]) {
    for (&j, vs) in idx.iter().zip(val.chunks_exact(B)) {
        let at = j as usize * B;
        let ws = &mut w[at..at + B];
        for l in 0..B {
            ws[l] += step * f64::from(vs[l]);
        }
    }
}

/// `acc += v * w` lane by lane, eight values at a time (the rest into the first lanes).
#[inline(always)]
fn lanes(v: &[f32], w: &[f64], acc: &mut [f64; 8]) {
    let (cv, cw) = (v.chunks_exact(8), w.chunks_exact(8));
    let (rv, rw) = (cv.remainder(), cw.remainder());
    for (a, b) in cv.zip(cw) {
        for l in 0..8 {
            acc[l] += f64::from(a[l]) * b[l];
        }
    }
    for (l, (&a, &b)) in rv.iter().zip(rw).enumerate() {
        acc[l] += f64::from(a) * b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_map::Kernel;

    fn dense_dot(x: &[f32], w: &[f64]) -> f64 {
        x.iter().zip(w).map(|(&a, &b)| f64::from(a) * b).sum()
    }

    /// Every layout gives the dense products and updates (to rounding), and the mapped rows are
    /// the map's values.
    #[test]
    fn every_layout_is_the_dense_rows() {
        // Sparse rows over several chunks of the inner products, one chunk empty in every row.
        let sparse: Vec<Vec<f32>> = (0..5)
            .map(|r| {
                (0..300)
                    .map(|c| {
                        if (r * 7 + c) % 5 == 0 && !(100..260).contains(&c) {
                            (r + c) as f32 * 0.01
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect();
        let dense: Vec<Vec<f32>> = (0..5)
            .map(|r| (0..300).map(|c| (r * 3 + c) as f32 * 0.1 - 1.0).collect())
            .collect();
        let map = KernelMap::new(Kernel::Chi2, 3).expect("map");
        fn as_rows(x: &[Vec<f32>]) -> Vec<&[f32]> {
            x.iter().map(Vec::as_slice).collect()
        }
        let mapped_dense: Vec<Vec<f32>> = sparse.iter().map(|r| map.apply(r)).collect();
        for (rows, x, width) in [
            (Rows::from_dense(&as_rows(&sparse)), &sparse, 1),
            (Rows::from_dense(&as_rows(&dense)), &dense, 300),
            (Rows::mapped(&as_rows(&sparse), &map), &mapped_dense, 7),
        ] {
            assert_eq!(rows.width(), width);
            assert_eq!(rows.dims(), x[0].len());
            let w: Vec<f64> = (0..=rows.dims()).map(|j| (j as f64 * 0.37).sin()).collect();
            for (i, r) in x.iter().enumerate() {
                let (got, want) = (rows.dot(i, &w), dense_dot(r, &w));
                assert!(
                    (got - want).abs() < 1e-12 * want.abs().max(1.0),
                    "{got} {want}"
                );
                let squares: f64 = r.iter().map(|&v| f64::from(v).powi(2)).sum();
                assert!((rows.sum_squares(i) - squares).abs() < 1e-12);
                let mut a = w.clone();
                rows.add_to(i, 0.5, &mut a);
                for (j, (&got, &v)) in a.iter().zip(r).enumerate() {
                    assert!((got - (w[j] + 0.5 * f64::from(v))).abs() < 1e-12);
                }
            }
            // The inner products, through chunks of any layout's blocks.
            let gram = rows.gram();
            let n = x.len();
            for i in 0..n {
                for j in 0..n {
                    let want: f64 = (x[i].iter().zip(&x[j]))
                        .map(|(&a, &b)| f64::from(a) * f64::from(b))
                        .sum::<f64>()
                        + 1.0;
                    let got = gram.all()[i * n + j];
                    assert!(
                        (got - want).abs() < 1e-12 * want.abs().max(1.0),
                        "{got} {want}"
                    );
                }
            }
            // A selection holds the same rows.
            let picked = rows.select(&[3, 1]);
            assert_eq!(picked.len(), 2);
            assert_eq!(picked.dot(0, &w), rows.dot(3, &w));
            assert_eq!(picked.dot(1, &w), rows.dot(1, &w));
        }
    }
}
