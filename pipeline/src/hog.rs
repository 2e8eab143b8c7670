//! The `dalal-triggs-512` HOG descriptor of a 40x40 luminance patch.
//!
//! The definition is scikit-image's `hog(patch, orientations=8, pixels_per_cell=(8, 8),
//! cells_per_block=(2, 2), block_norm='L2-Hys')`, reproduced operation for operation where it
//! matters for the result:
//!
//! * gradients are plain central differences `I[r+1] - I[r-1]` (no division by two), zero on the
//!   first and last row (for the row gradient) and column (for the column gradient) of the
//!   described region;
//! * the orientation is `rad2deg(atan2(g_row, g_col)) % 180` with numpy's remainder semantics, and a
//!   pixel falls in bin `i` when `22.5 i <= angle < 22.5 (i + 1)`. A negative angle a hair below zero
//!   becomes exactly `180.0` after the remainder and then falls in no bin at all, as in scikit-image;
//! * a cell's value is the mean magnitude of its 64 pixels per bin, summed in `f32` as scikit-image's
//!   Cython kernel does;
//! * blocks of 2x2 cells overlap with a stride of one cell and are normalised with L2-Hys
//!   (`eps = 1e-5`, clip at `0.2`, renormalise);
//! * the layout is C order: 4x4 blocks x 2x2 cells x 8 bins = 512 values.
//!
//! Three ways to describe patches are offered. [`PatchDescriber`] computes gradients inside the
//! patch only (the patch is the whole "image" given to `hog`): this is the definition of random
//! patches. [`PatchPlanes`] gives the same descriptors, bit for bit, for many overlapping patches
//! of one image: every pixel's gradient is binned once (the three ways a patch can see it) and a
//! patch only adds its pixels into its cells; dense grids that are not cell-aligned (stride 4) use
//! it. [`BlockGrid`] computes gradients and blocks once over a whole image; the window of 4x4
//! blocks at block `(r, c)` then equals `hog(image, feature_vector=False)[r:r+4, c:c+4].ravel()`.
//! Dense sampling on a cell-aligned grid uses it, which is much cheaper than describing every
//! patch anew.
//!
//! Speed: the exact orientation needs `atan2` in `f64`. Instead, each pixel is first binned with
//! seven `f32` half-plane tests against the bin boundaries; only a pixel whose gradient lies within
//! a relative margin of `1e-5` of a boundary (far wider than any rounding difference between the
//! two computations) is re-binned with the exact `f64` formula. Exact ties such as purely
//! horizontal, vertical or diagonal gradients always take the exact path, so the bins are the
//! reference's bins, not an approximation of them.

use std::f64::consts::PI;

/// Side of a patch in pixels.
pub const PATCH_SIDE: usize = 40;
/// Side of a cell in pixels.
pub const CELL_SIDE: usize = 8;
/// Orientation bins per cell.
pub const N_BINS: usize = 8;
/// Cells per patch side.
pub const CELLS_PER_PATCH: usize = PATCH_SIDE / CELL_SIDE;
/// Blocks per patch side (2x2-cell blocks with a one-cell stride).
pub const BLOCKS_PER_PATCH: usize = CELLS_PER_PATCH - 1;
/// Values in one normalised block: 2x2 cells x 8 bins.
pub const BLOCK_LEN: usize = 2 * 2 * N_BINS;
/// Dimensionality of the descriptor.
pub const DIMS: usize = BLOCKS_PER_PATCH * BLOCKS_PER_PATCH * BLOCK_LEN;
/// Name of the descriptor, as recorded in outputs.
pub const DESCRIPTOR_NAME: &str = "dalal-triggs-512";

const L2HYS_EPS: f64 = 1e-5;
const L2HYS_CLIP: f64 = 0.2;
/// Relative margin (of `|g_row| + |g_col|`) inside which the fast binning defers to the exact one.
const BOUNDARY_MARGIN: f32 = 1e-5;
/// Marker for "this pixel falls in no bin" (the `180.0` corner case of the reference).
const NO_BIN: u8 = N_BINS as u8;

/// Bin of a gradient, computed exactly as scikit-image does in `f64`.
///
/// Returns [`N_BINS`] (as `u8`) when the reference puts the pixel in no bin.
pub fn exact_bin(g_row: f64, g_col: f64) -> u8 {
    // numpy: rad2deg(x) = x * (180 / pi); remainder(a, b) = fmod, then shifted by b when the signs of
    // the result and of b differ.
    let deg = g_row.atan2(g_col) * (180.0 / PI);
    let mut angle = deg % 180.0;
    if angle != 0.0 && angle < 0.0 {
        angle += 180.0;
    }
    let width = 180.0 / N_BINS as f64;
    // Compare against the bin edges the way the reference does (`angle >= start` excludes), rather
    // than dividing, so that values just below an edge are not rounded up into the next bin.
    for bin in 0..N_BINS {
        let lo = width * bin as f64;
        let hi = width * (bin + 1) as f64;
        if angle >= lo && angle < hi {
            return bin as u8;
        }
    }
    NO_BIN
}

/// Cosines and sines of the interior bin boundaries 22.5, 45, ..., 157.5 degrees.
struct Boundaries {
    cos: [f32; N_BINS - 1],
    sin: [f32; N_BINS - 1],
}

const BOUNDARIES: Boundaries = {
    // Written out because `cos`/`sin` are not const; checked against the formula in a test.
    Boundaries {
        cos: [
            0.923_879_5,
            0.707_106_77,
            0.382_683_43,
            0.0,
            -0.382_683_43,
            -0.707_106_77,
            -0.923_879_5,
        ],
        sin: [
            0.382_683_43,
            0.707_106_77,
            0.923_879_5,
            1.0,
            0.923_879_5,
            0.707_106_77,
            0.382_683_43,
        ],
    }
};

/// Marker returned by [`fast_bin`]: decide with the exact formula.
const DEFER: u8 = u8::MAX;

/// Fast bin of one gradient, or [`DEFER`] when it is too close to a boundary to decide in `f32`.
///
/// Branch-free so that a loop over a row vectorises.
#[inline(always)]
fn fast_bin(g_row: f32, g_col: f32) -> u8 {
    // Fold into the upper half plane: the orientation is unsigned.
    let y = g_row.abs();
    let x = if g_row < 0.0 { -g_col } else { g_col };
    let margin = BOUNDARY_MARGIN * (x.abs() + y);
    // y near 0 is the 0/180 degree edge, where the reference's remainder decides.
    let mut ambiguous = y <= margin;
    let mut bin = 0u8;
    for k in 0..N_BINS - 1 {
        // Sign of sin(angle - boundary_k): positive when the angle is past the boundary.
        let d = y * BOUNDARIES.cos[k] - x * BOUNDARIES.sin[k];
        ambiguous |= d.abs() <= margin;
        bin += u8::from(d > 0.0);
    }
    if ambiguous { DEFER } else { bin }
}

/// Gradients and bins of a rectangular region, reused across calls to avoid allocation.
#[derive(Debug, Default, Clone)]
struct Scratch {
    g_row: Vec<f32>,
    g_col: Vec<f32>,
    magnitude: Vec<f32>,
    bins: Vec<u8>,
    memo: ExactMemo,
}

/// A direct-mapped cache of [`exact_bin`], keyed by the full bit patterns of both gradients.
///
/// The exact bin is a pure function of the two `f64` differences, so a hit returns exactly what
/// the computation would. 8-bit photos produce the same integer gradient pairs over and over (and
/// most deferred pixels are such ties), so this removes most `atan2` calls.
#[derive(Debug, Clone)]
struct ExactMemo {
    keys: Vec<(u64, u64)>,
    bins: Vec<u8>,
}

const MEMO_BITS: u32 = 12;

impl Default for ExactMemo {
    fn default() -> Self {
        // NaN bit patterns never occur as differences of finite pixels: a safe empty marker.
        Self {
            keys: vec![(u64::MAX, u64::MAX); 1 << MEMO_BITS],
            bins: vec![0; 1 << MEMO_BITS],
        }
    }
}

impl ExactMemo {
    #[inline(always)]
    fn bin(&mut self, g_row: f64, g_col: f64) -> u8 {
        let key = (g_row.to_bits(), g_col.to_bits());
        let hash =
            key.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.1.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        let slot = (hash >> (64 - MEMO_BITS)) as usize;
        if self.keys[slot] != key {
            self.keys[slot] = key;
            self.bins[slot] = exact_bin(g_row, g_col);
        }
        self.bins[slot]
    }
}

/// Accumulates the cell histograms (cell means, unnormalised) of a region of `img`.
///
/// The region is `height x width` pixels starting at `(top, left)` of an image with row stride
/// `stride`; gradients are zero on the region's border as if the region were the whole image.
/// Only the `n_cell_rows x n_cell_cols` full cells from the region's origin are described; `cells`
/// receives them in C order (cell row, cell col, bin).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn region_cells(
    img: &[f32],
    stride: usize,
    top: usize,
    left: usize,
    height: usize,
    width: usize,
    n_cell_rows: usize,
    n_cell_cols: usize,
    scratch: &mut Scratch,
    cells: &mut Vec<f32>,
) {
    cells.clear();
    cells.resize(n_cell_rows * n_cell_cols * N_BINS, 0.0);
    // Sums are f32 as in the reference; the mean divides at the end.
    let used_rows = n_cell_rows * CELL_SIDE;
    let used_cols = n_cell_cols * CELL_SIDE;
    scratch.g_row.resize(used_cols, 0.0);
    scratch.g_col.resize(used_cols, 0.0);
    scratch.magnitude.resize(used_cols, 0.0);
    scratch.bins.resize(used_cols, 0);
    for r in 0..used_rows {
        let row = &img[(top + r) * stride + left..(top + r) * stride + left + width];
        let (up, down) = if r == 0 || r + 1 == height {
            (None, None)
        } else {
            let up = &img[(top + r - 1) * stride + left..][..used_cols];
            let down = &img[(top + r + 1) * stride + left..][..used_cols];
            (Some(up), Some(down))
        };
        gradients_row(
            row,
            up,
            down,
            used_cols,
            &mut scratch.g_row,
            &mut scratch.g_col,
        );
        let cell_row = r / CELL_SIDE;
        let hist_row = &mut cells[cell_row * n_cell_cols * N_BINS..][..n_cell_cols * N_BINS];
        accumulate_row(
            &scratch.g_row,
            &scratch.g_col,
            &mut scratch.magnitude,
            &mut scratch.bins,
            hist_row,
            &mut scratch.memo,
            |memo, c| {
                // Exact path: recompute the differences in f64 from the pixels, as the reference does.
                let g_row = match (up, down) {
                    (Some(u), Some(d)) => f64::from(d[c]) - f64::from(u[c]),
                    _ => 0.0,
                };
                let g_col = if c == 0 || c + 1 == width {
                    0.0
                } else {
                    f64::from(row[c + 1]) - f64::from(row[c - 1])
                };
                memo.bin(g_row, g_col)
            },
        );
    }
    let scale = 1.0 / (CELL_SIDE * CELL_SIDE) as f32;
    for v in cells.iter_mut() {
        *v *= scale;
    }
}

/// Row and column gradients of one row of a region (`width` pixels wide in `row`).
#[inline(always)]
fn gradients_row(
    row: &[f32],
    up: Option<&[f32]>,
    down: Option<&[f32]>,
    used_cols: usize,
    g_row: &mut [f32],
    g_col: &mut [f32],
) {
    match (up, down) {
        (Some(u), Some(d)) => {
            for ((g, &a), &b) in g_row[..used_cols].iter_mut().zip(d).zip(u) {
                *g = a - b;
            }
        }
        _ => g_row[..used_cols].fill(0.0),
    }
    let width = row.len();
    g_col[0] = 0.0;
    let interior = used_cols.min(width - 1);
    for c in 1..interior {
        g_col[c] = row[c + 1] - row[c - 1];
    }
    if used_cols == width {
        g_col[width - 1] = 0.0;
    }
}

/// Adds the magnitudes of one row into its cell-row histograms.
///
/// Two passes: a branch-free one over the whole row (magnitude, the seven half-plane tests of
/// [`fast_bin`], and the ambiguity mask) that the compiler vectorises, then a scalar scatter into
/// the histograms that calls `exact` only for the deferred pixels.
#[inline(always)]
fn accumulate_row(
    g_row: &[f32],
    g_col: &[f32],
    magnitude: &mut [f32],
    bins: &mut [u8],
    hist_row: &mut [f32],
    memo: &mut ExactMemo,
    exact: impl Fn(&mut ExactMemo, usize) -> u8,
) {
    let n = g_row.len();
    let (g_col, magnitude, bins) = (&g_col[..n], &mut magnitude[..n], &mut bins[..n]);
    for c in 0..n {
        let (gy, gx) = (g_row[c], g_col[c]);
        magnitude[c] = (gy * gy + gx * gx).sqrt();
        bins[c] = fast_bin(gy, gx);
    }
    for c in 0..n {
        let m = magnitude[c];
        if m == 0.0 {
            continue;
        }
        let bin = match bins[c] {
            DEFER => exact(memo, c),
            bin => bin,
        };
        if bin != NO_BIN {
            hist_row[(c / CELL_SIDE) * N_BINS + bin as usize] += m;
        }
    }
}

/// L2-Hys normalisation of one block of 2x2 cells taken from a cell grid, written to `out`.
#[inline(always)]
fn normalize_block(
    cells: &[f32],
    n_cell_cols: usize,
    cell_row: usize,
    cell_col: usize,
    out: &mut [f32],
) {
    let mut block = [0f64; BLOCK_LEN];
    for dr in 0..2 {
        for dc in 0..2 {
            let src = &cells[((cell_row + dr) * n_cell_cols + cell_col + dc) * N_BINS..][..N_BINS];
            for (dst, &v) in block[(dr * 2 + dc) * N_BINS..][..N_BINS]
                .iter_mut()
                .zip(src)
            {
                *dst = f64::from(v);
            }
        }
    }
    let eps2 = L2HYS_EPS * L2HYS_EPS;
    let norm = (block.iter().map(|v| v * v).sum::<f64>() + eps2).sqrt();
    for v in block.iter_mut() {
        *v = (*v / norm).min(L2HYS_CLIP);
    }
    let norm = (block.iter().map(|v| v * v).sum::<f64>() + eps2).sqrt();
    for (dst, v) in out.iter_mut().zip(block) {
        *dst = (v / norm) as f32;
    }
}

/// Describes 40x40 patches with gradients computed inside each patch (`hog(patch)`).
#[derive(Debug, Default, Clone)]
pub struct PatchDescriber {
    scratch: Scratch,
    cells: Vec<f32>,
}

impl PatchDescriber {
    /// Describes the patch whose top-left pixel is `(row, col)` of a `width`-wide image.
    ///
    /// # Panics
    /// If the patch does not lie inside `img` or `out` is not [`DIMS`] long; callers sample
    /// positions from the image's size, so this is a programming error.
    pub fn describe(&mut self, img: &[f32], width: usize, row: usize, col: usize, out: &mut [f32]) {
        assert!(
            col + PATCH_SIDE <= width,
            "patch column {col} outside width {width}"
        );
        assert!(
            (row + PATCH_SIDE) * width <= img.len(),
            "patch row {row} outside image"
        );
        assert_eq!(out.len(), DIMS, "descriptor buffer must hold {DIMS} values");
        if let Some(run) = avx2_dispatch() {
            // SAFETY: `avx2_dispatch` returned `Some` only after detecting AVX2 and FMA.
            unsafe { run.describe_patch(self, img, width, row, col, out) }
        } else {
            self.describe_generic(img, width, row, col, out);
        }
    }

    #[inline(always)]
    fn describe_generic(
        &mut self,
        img: &[f32],
        width: usize,
        row: usize,
        col: usize,
        out: &mut [f32],
    ) {
        region_cells(
            img,
            width,
            row,
            col,
            PATCH_SIDE,
            PATCH_SIDE,
            CELLS_PER_PATCH,
            CELLS_PER_PATCH,
            &mut self.scratch,
            &mut self.cells,
        );
        for br in 0..BLOCKS_PER_PATCH {
            for bc in 0..BLOCKS_PER_PATCH {
                let dst = &mut out[(br * BLOCKS_PER_PATCH + bc) * BLOCK_LEN..][..BLOCK_LEN];
                normalize_block(&self.cells, CELLS_PER_PATCH, br, bc, dst);
            }
        }
    }
}

/// Image rows whose gradients [`PatchPlanes`] holds at a time: a band serves every patch whose
/// 40 rows lie in it (the patch rows of its first 89 rows), so at stride 4 each image row is
/// binned about 128 / 92 times.
const BAND_ROWS: usize = 128;

/// Dense grids of a smaller stride than this (and off the cell grid) are described from
/// [`PatchPlanes`]; coarser ones patch by patch. A band bins `3 x 128` rows for the patches of
/// its first 89, so per patch it bins about `384 s / (88 / s + 1)` pixels at stride `s`, against
/// the 1,600 a patch described alone bins: the planes pay below about 20 px.
pub const PLANES_BELOW_STRIDE: usize = 16;

/// One way of seeing a band's pixels: each pixel's gradient magnitude and its bin (exact, or
/// [`NO_BIN`]), row-major.
#[derive(Debug, Default, Clone)]
struct Plane {
    magnitude: Vec<f32>,
    bins: Vec<u8>,
}

/// Describes many overlapping 40x40 patches of one image, each exactly as [`PatchDescriber`]
/// does (`hog(patch)`), with every pixel's gradient binned once rather than once per patch.
///
/// A patch sees a pixel in one of four ways: inside the patch (both central differences), on
/// its first or last row (the row difference is zero), on its first or last column (the column
/// difference is zero), or in a corner (no gradient). The first three are computed once for a
/// band of [`BAND_ROWS`] image rows, by the same formulas (`f32` differences, magnitude, the fast
/// bin deferring to the exact `f64` one); a patch then adds its pixels' magnitudes into its cells
/// in the same order as [`PatchDescriber`], so the descriptors are the same bits. Dense grids that
/// are not cell-aligned (stride 4: every pixel in 100 patches) are what this is for.
///
/// Call [`PatchPlanes::forget`] before describing another image.
#[derive(Debug, Default, Clone)]
pub struct PatchPlanes {
    /// First image row of the band, and its rows (0: no band).
    top: usize,
    rows: usize,
    width: usize,
    inner: Plane,
    row_edge: Plane,
    col_edge: Plane,
    scratch: Scratch,
    cells: Vec<f32>,
}

impl PatchPlanes {
    /// Drops the band: the next patch is of another image.
    pub fn forget(&mut self) {
        self.rows = 0;
    }

    /// Describes the patch whose top-left pixel is `(row, col)` of the `width x height` image
    /// `img` (the same image since the last [`PatchPlanes::forget`]).
    ///
    /// # Panics
    /// If the patch does not lie inside the image or `out` is not [`DIMS`] long (callers lay
    /// patches out from the image's size: a programming error).
    pub fn describe(
        &mut self,
        img: &[f32],
        (width, height): (usize, usize),
        (row, col): (usize, usize),
        out: &mut [f32],
    ) {
        assert!(
            col + PATCH_SIDE <= width && row + PATCH_SIDE <= height && img.len() == width * height,
            "patch ({row}, {col}) outside the {width}x{height} image"
        );
        assert_eq!(out.len(), DIMS, "descriptor buffer must hold {DIMS} values");
        if self.rows == 0
            || self.width != width
            || row < self.top
            || row + PATCH_SIDE > self.top + self.rows
        {
            self.band(img, width, height, row);
        }
        self.cells.clear();
        self.cells
            .resize(CELLS_PER_PATCH * CELLS_PER_PATCH * N_BINS, 0.0);
        let last = PATCH_SIDE - 1;
        for r in 0..PATCH_SIDE {
            let at = (row + r - self.top) * width + col;
            let hist_row = &mut self.cells[(r / CELL_SIDE) * CELLS_PER_PATCH * N_BINS..]
                [..CELLS_PER_PATCH * N_BINS];
            let edge_row = r == 0 || r == last;
            for c in 0..PATCH_SIDE {
                let edge_col = c == 0 || c == last;
                let plane = match (edge_row, edge_col) {
                    (true, true) => continue, // no gradient at all
                    (true, false) => &self.row_edge,
                    (false, true) => &self.col_edge,
                    (false, false) => &self.inner,
                };
                let m = plane.magnitude[at + c];
                if m == 0.0 {
                    continue;
                }
                let bin = plane.bins[at + c];
                if bin != NO_BIN {
                    hist_row[(c / CELL_SIDE) * N_BINS + bin as usize] += m;
                }
            }
        }
        let scale = 1.0 / (CELL_SIDE * CELL_SIDE) as f32;
        for v in self.cells.iter_mut() {
            *v *= scale;
        }
        for br in 0..BLOCKS_PER_PATCH {
            for bc in 0..BLOCKS_PER_PATCH {
                let dst = &mut out[(br * BLOCKS_PER_PATCH + bc) * BLOCK_LEN..][..BLOCK_LEN];
                normalize_block(&self.cells, CELLS_PER_PATCH, br, bc, dst);
            }
        }
    }

    /// Bins the band of rows from `top` (at most [`BAND_ROWS`], to the image's end) the three
    /// ways. Pixels on the image's border get what no patch reads.
    fn band(&mut self, img: &[f32], width: usize, height: usize, top: usize) {
        let rows = BAND_ROWS.max(PATCH_SIDE).min(height - top);
        (self.top, self.rows, self.width) = (top, rows, width);
        for plane in [&mut self.inner, &mut self.row_edge, &mut self.col_edge] {
            plane.magnitude.resize(rows * width, 0.0);
            plane.bins.resize(rows * width, NO_BIN);
        }
        let scratch = &mut self.scratch;
        scratch.g_row.resize(width, 0.0);
        scratch.g_col.resize(width, 0.0);
        scratch.magnitude.resize(width, 0.0);
        scratch.bins.resize(width, 0);
        let zeros = vec![0f32; width];
        for r in 0..rows {
            let y = top + r;
            let line = &img[y * width..][..width];
            // The image's first and last rows and columns: no patch pixel sees a difference
            // across them (those are the patch's own edges), so zeros stand in.
            let (up, down) = if y == 0 || y + 1 == height {
                (None, None)
            } else {
                (
                    Some(&img[(y - 1) * width..][..width]),
                    Some(&img[(y + 1) * width..][..width]),
                )
            };
            gradients_row(
                line,
                up,
                down,
                width,
                &mut scratch.g_row,
                &mut scratch.g_col,
            );
            let exact = |memo: &mut ExactMemo, c: usize, rows: bool, cols: bool| {
                let g_row = match (up, down) {
                    (Some(u), Some(d)) if rows => f64::from(d[c]) - f64::from(u[c]),
                    _ => 0.0,
                };
                let g_col = if !cols || c == 0 || c + 1 == width {
                    0.0
                } else {
                    f64::from(line[c + 1]) - f64::from(line[c - 1])
                };
                memo.bin(g_row, g_col)
            };
            let at = r * width;
            for (plane, rows_diff, cols_diff) in [
                (&mut self.inner, true, true),
                (&mut self.row_edge, false, true),
                (&mut self.col_edge, true, false),
            ] {
                let g_row = if rows_diff { &scratch.g_row } else { &zeros };
                let g_col = if cols_diff { &scratch.g_col } else { &zeros };
                let magnitude = &mut plane.magnitude[at..][..width];
                let bins = &mut plane.bins[at..][..width];
                for c in 0..width {
                    let (gy, gx) = (g_row[c], g_col[c]);
                    magnitude[c] = (gy * gy + gx * gx).sqrt();
                    bins[c] = fast_bin(gy, gx);
                }
                // (A pixel without magnitude adds nothing: its bin is never read.)
                for c in 0..width {
                    if bins[c] == DEFER && magnitude[c] != 0.0 {
                        bins[c] = exact(&mut scratch.memo, c, rows_diff, cols_diff);
                    }
                }
            }
        }
    }
}

/// The normalised blocks of a whole image (`hog(image, feature_vector=False)`).
#[derive(Debug, Default, Clone)]
pub struct BlockGrid {
    n_block_rows: usize,
    n_block_cols: usize,
    blocks: Vec<f32>,
    scratch: Scratch,
    cells: Vec<f32>,
}

impl BlockGrid {
    /// Recomputes the grid for a `width x height` image, reusing this grid's buffers.
    ///
    /// # Panics
    /// If `img.len() != width * height`.
    pub fn compute(&mut self, img: &[f32], width: usize, height: usize) {
        assert_eq!(
            img.len(),
            width * height,
            "image buffer does not match {width}x{height}"
        );
        if let Some(run) = avx2_dispatch() {
            // SAFETY: `avx2_dispatch` returned `Some` only after detecting AVX2 and FMA.
            unsafe { run.compute_grid(self, img, width, height) }
        } else {
            self.compute_generic(img, width, height);
        }
    }

    #[inline(always)]
    fn compute_generic(&mut self, img: &[f32], width: usize, height: usize) {
        let n_cell_rows = height / CELL_SIDE;
        let n_cell_cols = width / CELL_SIDE;
        self.n_block_rows = n_cell_rows.saturating_sub(1);
        self.n_block_cols = n_cell_cols.saturating_sub(1);
        self.blocks.clear();
        if self.n_block_rows == 0 || self.n_block_cols == 0 {
            return;
        }
        region_cells(
            img,
            width,
            0,
            0,
            height,
            width,
            n_cell_rows,
            n_cell_cols,
            &mut self.scratch,
            &mut self.cells,
        );
        self.blocks
            .resize(self.n_block_rows * self.n_block_cols * BLOCK_LEN, 0.0);
        for br in 0..self.n_block_rows {
            for bc in 0..self.n_block_cols {
                let dst =
                    &mut self.blocks[(br * self.n_block_cols + bc) * BLOCK_LEN..][..BLOCK_LEN];
                normalize_block(&self.cells, n_cell_cols, br, bc, dst);
            }
        }
    }

    /// Number of block rows and columns.
    pub fn shape(&self) -> (usize, usize) {
        (self.n_block_rows, self.n_block_cols)
    }

    /// The normalised block at `(block_row, block_col)`: 2x2 cells x 8 bins.
    pub fn block(&self, block_row: usize, block_col: usize) -> &[f32] {
        &self.blocks[(block_row * self.n_block_cols + block_col) * BLOCK_LEN..][..BLOCK_LEN]
    }

    /// Writes the descriptor of the cell-aligned patch whose top-left block is
    /// `(block_row, block_col)`, i.e. the patch at pixel `(8 block_row, 8 block_col)`.
    ///
    /// # Panics
    /// If the 4x4 window does not fit in the grid or `out` is not [`DIMS`] long.
    pub fn window(&self, block_row: usize, block_col: usize, out: &mut [f32]) {
        assert!(
            block_row + BLOCKS_PER_PATCH <= self.n_block_rows,
            "window row outside grid"
        );
        assert!(
            block_col + BLOCKS_PER_PATCH <= self.n_block_cols,
            "window col outside grid"
        );
        assert_eq!(out.len(), DIMS, "descriptor buffer must hold {DIMS} values");
        for br in 0..BLOCKS_PER_PATCH {
            let src = &self.blocks
                [((block_row + br) * self.n_block_cols + block_col) * BLOCK_LEN..]
                [..BLOCKS_PER_PATCH * BLOCK_LEN];
            out[br * BLOCKS_PER_PATCH * BLOCK_LEN..][..BLOCKS_PER_PATCH * BLOCK_LEN]
                .copy_from_slice(src);
        }
    }
}

/// Token proving that AVX2 and FMA are available; its methods run the generic code compiled for
/// them (the same arithmetic: no fused operation changes a result the tests compare).
#[derive(Clone, Copy)]
struct Avx2;

#[cfg(target_arch = "x86_64")]
fn avx2_dispatch() -> Option<Avx2> {
    // `level` is at least AVX2 only when AVX2 and FMA were detected.
    (crate::isa::level() >= crate::isa::Level::Avx2).then_some(Avx2)
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_dispatch() -> Option<Avx2> {
    None
}

impl Avx2 {
    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
    unsafe fn describe_patch(
        self,
        describer: &mut PatchDescriber,
        img: &[f32],
        width: usize,
        row: usize,
        col: usize,
        out: &mut [f32],
    ) {
        describer.describe_generic(img, width, row, col, out);
    }

    #[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2,fma"))]
    unsafe fn compute_grid(self, grid: &mut BlockGrid, img: &[f32], width: usize, height: usize) {
        grid.compute_generic(img, width, height);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_table_matches_the_formula() {
        for k in 0..N_BINS - 1 {
            let b = (k + 1) as f64 * PI / N_BINS as f64;
            assert!(
                (f64::from(BOUNDARIES.cos[k]) - b.cos()).abs() < 1e-7,
                "cos {k}"
            );
            assert!(
                (f64::from(BOUNDARIES.sin[k]) - b.sin()).abs() < 1e-7,
                "sin {k}"
            );
        }
    }

    #[test]
    fn exact_bin_on_axes_and_diagonals() {
        // (g_row, g_col, expected bin)
        let cases = [
            (0.0, 1.0, 0),
            (0.0, -1.0, 0),
            (1.0, 0.0, 4),
            (-1.0, 0.0, 4),
            (1.0, 1.0, 2),
            (-1.0, -1.0, 2),
            (1.0, -1.0, 6),
            (-1.0, 1.0, 6),
            (1.0, 10.0, 0),
            (10.0, 1.0, 3),
        ];
        for (gy, gx, expected) in cases {
            assert_eq!(exact_bin(gy, gx), expected, "gradient ({gy}, {gx})");
        }
    }

    #[test]
    fn exact_bin_drops_angles_that_round_to_180() {
        // atan2 of a tiny negative row gradient is a tiny negative angle; + 180 rounds to 180.
        assert_eq!(exact_bin(-1e-20, 1.0), NO_BIN);
    }

    #[test]
    fn fast_bin_agrees_with_exact_bin_or_defers() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Integer-valued gradients (ties) and arbitrary ones, both signs.
            let v = (state >> 11) as f64 / (1u64 << 53) as f64 * 510.0 - 255.0;
            if state.is_multiple_of(3) {
                v.round()
            } else {
                v
            }
        };
        let mut deferred = 0;
        for _ in 0..200_000 {
            let (gy, gx) = (next() as f32, next() as f32);
            let exact = exact_bin(f64::from(gy), f64::from(gx));
            match fast_bin(gy, gx) {
                DEFER => deferred += 1,
                bin => assert_eq!(bin, exact, "gradient ({gy}, {gx})"),
            }
        }
        // Only near-boundary gradients may defer; integer ties make up most of them.
        assert!(deferred < 20_000, "{deferred} deferred");
    }

    #[test]
    fn memo_returns_what_the_exact_formula_returns() {
        let mut memo = ExactMemo::default();
        for round in 0..3 {
            for gy in -40..40 {
                for gx in -40..40 {
                    let (gy, gx) = (f64::from(gy) * 0.5, f64::from(gx) + f64::from(round) * 0.25);
                    assert_eq!(memo.bin(gy, gx), exact_bin(gy, gx), "({gy}, {gx})");
                }
            }
        }
    }

    /// Patches described from the image's binned planes are `PatchDescriber`'s bits, on images
    /// of 8-bit values (ties, flat runs) and of fractional ones, across bands, in any order, and
    /// after forgetting one image for another of another size.
    #[test]
    fn planes_describe_every_patch_as_the_patch_describer_does() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut planes = PatchPlanes::default();
        let mut patch = PatchDescriber::default();
        let (mut a, mut b) = (vec![0f32; DIMS], vec![0f32; DIMS]);
        let mut first_done = false;
        // The first two are the same size: forgetting the first is what keeps its band out.
        for (width, height, fractional, stride) in [
            (131, 300, false, 4),
            (131, 300, false, 4),
            (97, 61, true, 3),
            (40, 40, false, 1),
            (88, 173, true, 4),
        ] {
            let img: Vec<f32> = (0..width * height)
                .map(|i| {
                    let v = next();
                    match (fractional, v % 4) {
                        // Flat runs and repeated values: zero gradients and exact ties.
                        (_, 0) => ((i / 7) % 3) as f32 * 64.0,
                        (false, _) => (v >> 56) as f32,
                        (true, _) => (v >> 40) as f32 / 65_536.0 * 0.7 + 3.25,
                    }
                })
                .collect();
            let mut positions: Vec<(usize, usize)> = (0..=height - PATCH_SIDE)
                .step_by(stride)
                .flat_map(|r| {
                    (0..=width - PATCH_SIDE)
                        .step_by(stride)
                        .map(move |c| (r, c))
                })
                .collect();
            // Out of order too (the second image and the fractional ones): bands are made
            // again wherever a patch needs one.
            if fractional || first_done {
                positions.reverse();
            }
            first_done = true;
            planes.forget();
            for &(r, c) in &positions {
                planes.describe(&img, (width, height), (r, c), &mut a);
                patch.describe(&img, width, r, c, &mut b);
                let (a, b): (Vec<u32>, Vec<u32>) = (
                    a.iter().map(|v| v.to_bits()).collect(),
                    b.iter().map(|v| v.to_bits()).collect(),
                );
                assert_eq!(a, b, "{width}x{height} patch ({r}, {c})");
            }
        }
    }

    #[test]
    fn flat_patch_is_all_zero() {
        let img = vec![7.0f32; PATCH_SIDE * PATCH_SIDE];
        let mut out = vec![1.0f32; DIMS];
        PatchDescriber::default().describe(&img, PATCH_SIDE, 0, 0, &mut out);
        assert!(out.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn blocks_are_unit_norm_and_clipped_once() {
        let width = 64;
        let img: Vec<f32> = (0..width * 48)
            .map(|i| ((i * 7919) % 251) as f32 + ((i / width) as f32 * 0.37).sin() * 30.0)
            .collect();
        let mut out = vec![0f32; DIMS];
        PatchDescriber::default().describe(&img, width, 5, 11, &mut out);
        for block in out.chunks(BLOCK_LEN) {
            let norm: f32 = block.iter().map(|v| v * v).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "block norm {norm}");
            // Renormalisation after the clip lifts values above 0.2 (up to 1 for a block with one
            // orientation), never outside [0, 1].
            assert!(block.iter().all(|&v| (0.0..=1.0).contains(&v)));
        }
    }

    #[test]
    fn grid_window_equals_patch_descriptor_away_from_the_border_only_in_shape() {
        // The two definitions differ (image vs patch gradients) but share layout: a window over an
        // image that is exactly one patch equals the patch descriptor.
        let img: Vec<f32> = (0..PATCH_SIDE * PATCH_SIDE)
            .map(|i| ((i * 31) % 97) as f32)
            .collect();
        let mut grid = BlockGrid::default();
        grid.compute(&img, PATCH_SIDE, PATCH_SIDE);
        assert_eq!(grid.shape(), (BLOCKS_PER_PATCH, BLOCKS_PER_PATCH));
        let mut from_grid = vec![0f32; DIMS];
        grid.window(0, 0, &mut from_grid);
        let mut from_patch = vec![0f32; DIMS];
        PatchDescriber::default().describe(&img, PATCH_SIDE, 0, 0, &mut from_patch);
        assert_eq!(from_grid, from_patch);
    }

    #[test]
    fn image_smaller_than_two_cells_has_no_blocks() {
        let mut grid = BlockGrid::default();
        grid.compute(&[0.0; 15 * 30], 30, 15);
        assert_eq!(grid.shape(), (0, 2));
    }
}
