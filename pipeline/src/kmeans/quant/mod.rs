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
//!    `-127..=127`, `c~ = t p` (`127 * 127 * 2` fits the `i16` pair sums of `vpmaddubsw`); on
//!    the AVX2 build in `-64..=64`, so that two quads' pair sums add in `i16` before widening.
//! 2. The integer dot `q . p` is exact, and `x~ . c~ = t (lo sum(p) + s (q . p))`, so
//!    `v = ||c||^2 - 2 x~ . c~` approximates `||x - c||^2 - ||x||^2` with a rigorous bound:
//!    `|x . c - x~ . c~| = |x . (c - c~) + (x - x~) . c~| <= ||x|| ||c - c~|| + ||x - x~|| ||c~||`
//!    (Cauchy-Schwarz; on HOG it leaves 2-3x fewer candidates than the `L1 x Linf` form, see
//!    `eval/kmeans_bench`), widened by a float slack relative to `||x||^2 + ||c||^2` (about 2e-5
//!    at 512 dims: four times the rounding bound of [`dist2`](crate::kmeans::assign::dist2), far above the scan's own), every
//!    factor rounded up.
//! 3. Every centroid whose lower bound `v - 2e` is at most the least upper bound `v + 2e` over all
//!    centroids is a **candidate**; candidates get a direct distance ([`dist2`](crate::kmeans::assign::dist2)) and the least
//!    wins, the lowest index on ties.
//!
//! So the labels are exactly those of a brute-force arg-min of [`dist2`](crate::kmeans::assign::dist2) over all centroids
//! (tested), on every machine: the integer products are exact and the final choice is made by
//! `dist2` alone, and the slack keeps every centroid that `dist2`'s rounding could rank first
//! among the candidates, so rounding in the scan can only add or drop ones that cannot win. The
//! distance returned is the direct one, not the expansion's. Candidates are a few per vector on
//! clustered data (measured in `eval/kmeans_bench`); on degenerate data (many equidistant
//! centroids) they can grow to all `k`, which stays correct but costs direct distances.
//!
//! The build runs at the level [`crate::isa::level`] chooses (VNNI, AVX2 or portable code); the
//! labels are the same at every level. The integer products are the same for the same codes;
//! the AVX2 build's coarser centroid codes give other products and more candidates, never
//! other labels.
//!
//! Files: `codes` (the quantised rows and centroids, shapes), `rows` (row quantisation),
//! `search` (the passes), `lists` (the approximate search's lists: rows quantised as they are
//! searched, a batch at a time, not kept), `isa` (the dispatch), and one file per build of the
//! kernels: `portable`, `avx2`, `avx512`.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod codes;
mod isa;
mod lists;
mod portable;
mod rows;
mod search;

#[cfg(test)]
mod tests;

pub use self::codes::{CENTROID_BLOCK, PANEL, QuantCentroids, QuantRows, QuantSlice, ROW_BLOCK};
pub use self::lists::{ListScratch, Lists, rows_by_list, search_lists};
pub use self::search::{
    FewScratch, QuantScratch, Runs, SearchScratch, assign_quantized, assign_quantized_runs,
    least_dist2, nearest_few_quantized, search_runs,
};
