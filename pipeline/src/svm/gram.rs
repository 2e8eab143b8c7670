//! The rows' inner products, `Q_ij = x_i . x_j + 1` (the rows with the solver's constant feature
//! appended): what dual coordinate descent needs of the rows when there are far fewer rows than
//! values a row. With `Q` at hand a coordinate step reads one number (the row's decision value,
//! kept up to date) and a move adds one row of `Q` (n values) to the decision values, instead of
//! a dot product and an update over every value of the row; one `Q` serves every one-vs-rest
//! model, every C of the grid and every fold (its rows and columns picked out).
//!
//! `Q` is computed once, column chunk by column chunk: the chunk of every row made dense in f64
//! (rows of any layout), then a register tile of 4 x 2 outputs at a time, each summed over the
//! chunk in four lanes (value `k` into lane `k mod 4`) added pairwise at the chunk's end. The sums
//! run in that fixed order, without fused multiply-adds, so the portable and AVX2 builds give the
//! same bits; the lower triangle is computed (in parallel over blocks of rows) and mirrored.

/// Values of a column chunk.
const CHUNK: usize = 128;
/// Lanes of the partial sums.
const LANES: usize = 4;
/// Rows of a register tile.
const TILE_I: usize = 4;
/// Columns of a register tile.
const TILE_J: usize = 2;

/// `Q = X X^T + 1`, row-major, `n x n`.
#[derive(Debug, Clone)]
pub(super) struct Gram {
    n: usize,
    q: Vec<f64>,
}

impl Gram {
    /// The inner products of `n` rows of `dims` values, which `fill(i, cursor, from, out)` writes
    /// into `out` (row `i`'s values at `from..from + out.len()`, zeros elsewhere; the chunks come
    /// in increasing order, and `cursor`, 0 at first, is the row's own to keep its place),
    /// saying whether the row has any value there (a chunk no row has is skipped). Memory: `Q`
    /// and one chunk of every row.
    pub(super) fn of(
        n: usize,
        dims: usize,
        fill: impl Fn(usize, &mut usize, usize, &mut [f64]) -> bool + Sync,
    ) -> Self {
        use rayon::prelude::*;
        let mut q = vec![0f64; n * n];
        if n == 0 {
            return Self { n, q };
        }
        // The chunk's rows padded to whole tiles (the padding rows stay zeros).
        let padded = n.div_ceil(TILE_I) * TILE_I;
        let mut chunk = vec![0f64; padded * CHUNK];
        let mut cursor = vec![0usize; n];
        let mut from = 0;
        while from < dims {
            // Every row filled (a reduction, not `any`, which would stop early).
            let held = (chunk.par_chunks_mut(CHUNK).zip(cursor.par_iter_mut()))
                .enumerate()
                .map(|(i, (out, at))| fill(i, at, from, out))
                .reduce(|| false, |a, b| a || b);
            if held {
                let chunk = &chunk;
                (q.par_chunks_mut(TILE_I * n))
                    .enumerate()
                    .for_each(|(block, out)| tile_row(chunk, n, block * TILE_I, out));
            }
            from += CHUNK;
        }
        // The constant feature's 1, then the lower triangle mirrored, a block at a time.
        const BLOCK: usize = 64;
        for i in 0..n {
            for v in &mut q[i * n..=i * n + i] {
                *v += 1.0;
            }
        }
        for bi in (0..n).step_by(BLOCK) {
            for bj in (0..=bi).step_by(BLOCK) {
                for i in bi..(bi + BLOCK).min(n) {
                    for j in bj..(bj + BLOCK).min(i) {
                        q[j * n + i] = q[i * n + j];
                    }
                }
            }
        }
        Self { n, q }
    }

    /// Rows.
    pub(super) fn len(&self) -> usize {
        self.n
    }

    /// All of `Q`, row-major.
    pub(super) fn all(&self) -> &[f64] {
        &self.q
    }

    /// `Q` over rows `a` and columns `b`, row-major `a.len() x b.len()`.
    pub(super) fn block(&self, a: &[usize], b: &[usize]) -> Vec<f64> {
        let mut out = Vec::with_capacity(a.len() * b.len());
        for &i in a {
            let row = &self.q[i * self.n..(i + 1) * self.n];
            out.extend(b.iter().map(|&j| row[j]));
        }
        out
    }
}

/// Adds one chunk's products into rows `i0..` of `Q` (`out`: up to `TILE_I` rows of `n` values),
/// columns up to the tile's last row (the lower triangle and the diagonal tile). `chunk` holds
/// `CHUNK` values of each row, its rows padded with zeros to whole tiles.
fn tile_row(chunk: &[f64], n: usize, i0: usize, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::level() >= crate::isa::Level::Avx2 {
        // SAFETY: the CPU has AVX2 (`isa::level` never exceeds what it detected).
        return unsafe { tile_row_avx2(chunk, n, i0, out) };
    }
    tile_row_body(chunk, n, i0, out);
}

/// [`tile_row`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn tile_row_avx2(chunk: &[f64], n: usize, i0: usize, out: &mut [f64]) {
    tile_row_body(chunk, n, i0, out);
}

/// The tiles themselves (inlined into both builds of [`tile_row`]).
#[inline(always)]
fn tile_row_body(chunk: &[f64], n: usize, i0: usize, out: &mut [f64]) {
    let rows = out.len() / n.max(1);
    let row = |i: usize| &chunk[i * CHUNK..(i + 1) * CHUNK];
    let xi: [&[f64]; TILE_I] = std::array::from_fn(|a| row(i0 + a));
    let mut j0 = 0;
    while j0 < i0 + TILE_I {
        let xj: [&[f64]; TILE_J] = std::array::from_fn(|b| row(j0 + b));
        let mut acc = [[[0f64; LANES]; TILE_J]; TILE_I];
        for k in (0..CHUNK).step_by(LANES) {
            for a in 0..TILE_I {
                for b in 0..TILE_J {
                    for l in 0..LANES {
                        acc[a][b][l] += xi[a][k + l] * xj[b][k + l];
                    }
                }
            }
        }
        // The padding rows' and columns' sums (zeros) are dropped.
        for (a, acc) in acc.iter().enumerate().take(rows) {
            for (b, s) in acc.iter().enumerate().filter(|(b, _)| j0 + b < n) {
                out[a * n + j0 + b] += (s[0] + s[1]) + (s[2] + s[3]);
            }
        }
        j0 += TILE_J;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Q` is the rows' inner products plus one (to rounding) and symmetric, for row counts
    /// that fill no whole tile and values that fill no whole chunk.
    #[test]
    fn q_is_the_inner_products_plus_one() {
        for (n, d) in [(1, 3), (5, 130), (8, 256), (9, 300)] {
            let x: Vec<Vec<f64>> = (0..n)
                .map(|r| {
                    (0..d)
                        .map(|c| ((r * 31 + c * 7) % 13) as f64 * 0.1 - 0.6)
                        .collect()
                })
                .collect();
            let gram = Gram::of(n, d, |i, _, from, out| {
                for (p, o) in out.iter_mut().enumerate() {
                    *o = x[i].get(from + p).copied().unwrap_or(0.0);
                }
                true
            });
            assert_eq!(gram.len(), n);
            for i in 0..n {
                for j in 0..n {
                    let want: f64 = x[i].iter().zip(&x[j]).map(|(a, b)| a * b).sum::<f64>() + 1.0;
                    let got = gram.all()[i * n + j];
                    assert!(
                        (got - want).abs() < 1e-12 * want.abs().max(1.0),
                        "{got} {want}"
                    );
                    assert_eq!(got.to_bits(), gram.all()[j * n + i].to_bits());
                }
            }
            let picked = gram.block(&[n - 1, 0], &[0]);
            assert_eq!(picked, vec![gram.all()[(n - 1) * n], gram.all()[0]]);
        }
    }

    /// No rows: no products (and no panic).
    #[test]
    fn no_rows_no_products() {
        assert_eq!(Gram::of(0, 10, |_, _, _, _| true).all(), &[] as &[f64]);
    }

    /// The AVX2 build of the tiles gives the portable build's bits.
    #[test]
    fn both_builds_of_the_tiles_give_the_same_bits() {
        let (n, padded) = (7, 8);
        let chunk: Vec<f64> = (0..padded * CHUNK)
            .map(|v| ((v * 37 % 101) as f64 * 0.013).sin())
            .collect();
        for (i0, rows) in [(0, 4), (4, 3)] {
            let mut fast = vec![0.25f64; rows * n];
            let mut plain = fast.clone();
            tile_row(&chunk, n, i0, &mut fast);
            tile_row_body(&chunk, n, i0, &mut plain);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fast), bits(&plain));
        }
    }
}
