//! Which instruction set runs the kernel and the scan, chosen once by [`crate::isa::level`]:
//! the dispatch to the portable, AVX2 and AVX-512 builds (each in its own file).

use super::codes::*;
use super::portable::{bounds, bounds_portable, products_portable};
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512};
#[cfg(doc)]
use crate::kmeans::assign::dist2;
use crate::kmeans::assign::{Centroids, dist2_4};

impl Isa {
    /// `out[r * CENTROID_BLOCK + j] = q_r . p_j` for the [`MR`] rows of `x` and the
    /// `count * NR` centroids of `count` consecutive panels (at most [`Isa::panels_per_call`]).
    pub(super) fn products(
        self,
        x: &[u8],
        width: usize,
        panels: &[u8],
        count: usize,
        out: &mut [i32],
    ) {
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
            // and writes. (The panels are codes of a `QuantCentroids` made for this build, its
            // `isa` the kernel that runs, so in the kernel's range.)
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
    pub(super) fn search_panels(
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
                gather_rows(xq, rows, buffer);
                let terms = rows.map(|g| xq.terms(g));
                self.gathered_panels((buffer, terms), cq, (c0, count), dots, lower, at)
            }
        }
    }

    /// Whether [`Isa::search_panels`] reads the rows in place (else a caller searching many
    /// panels for the same rows gathers them once, [`gather_rows`], and calls
    /// [`Isa::gathered_panels`]).
    pub(super) fn reads_rows_in_place(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => true,
            _ => false,
        }
    }

    /// [`Isa::search_panels`] for [`MR`] rows whose codes lie side by side in `codes` (as
    /// [`gather_rows`] puts them), with their `terms`.
    pub(super) fn gathered_panels(
        self,
        (codes, terms): (&[u8], [RowTerms; MR]),
        cq: &QuantCentroids,
        (c0, count): (usize, usize),
        dots: &mut [i32],
        lower: &mut [f32],
        at: [usize; MR],
    ) -> [f32; MR] {
        let (len, width) = (count * NR, cq.width);
        assert!(
            c0.is_multiple_of(NR)
                && at.iter().all(|&a| a + len <= lower.len())
                && (0..MR).all(|r| (r + 1..MR).all(|q| at[r].abs_diff(at[q]) >= len)),
            "whole panels, disjoint outputs within `lower`"
        );
        let panels = &cq.panels[c0 * width..][..len * width];
        self.products(codes, width, panels, count, dots);
        let mut out = [0f32; MR];
        for (r, out) in out.iter_mut().enumerate() {
            let dots = &dots[r * CENTROID_BLOCK..][..len];
            let lower = &mut lower[at[r]..][..len];
            *out = self.bounds(dots, cq, c0, terms[r], lower);
        }
        out
    }

    /// Panels [`Isa::products`] takes at once.
    pub(super) fn panels_per_call(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => avx512::PANELS,
            _ => 1,
        }
    }

    /// Writes the lower bounds `v - 2e` of the block's centroids to `lower` and returns the
    /// least upper bound `v + 2e`.
    pub(super) fn bounds(
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
    pub(super) fn few_bounds(
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
    pub(super) fn panel_minima(self, lower: &[f32], out: &mut [f32]) {
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
    pub(super) fn below(self, lower: &[f32], c0: usize, threshold: f32, out: &mut Vec<Candidate>) {
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
    pub(super) fn dists(self, a: &[f32], centroids: &Centroids, columns: &[u32]) -> [f32; 4] {
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

/// The codes of rows `rows` of `xq` side by side in `buffer` ([`MR`] x the row width).
pub(super) fn gather_rows(xq: &QuantRows, rows: [usize; MR], buffer: &mut Vec<u8>) {
    let width = xq.width;
    buffer.resize(MR * width, 0);
    for (slot, &g) in buffer.chunks_exact_mut(width).zip(&rows) {
        slot.copy_from_slice(&xq.codes[g * width..][..width]);
    }
}
