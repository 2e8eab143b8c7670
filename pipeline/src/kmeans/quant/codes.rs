//! The codes: rows and centroids quantised, their terms, the candidates a scan keeps, and the
//! kernel's shapes (rows per call, centroids per panel, block sizes).

use crate::kmeans::assign::Centroids;
use rayon::prelude::*;

/// Highest row code.
pub(super) const ROW_LEVELS: f32 = 127.0;
/// Float slack of the bounds, relative to `||x||^2` and `||c||^2`: four times the rounding
/// bound of [`dist2`] (`(dims / 8 + 16)` roundings of `2^-24` per lane sum and the final sum),
/// and at least 1e-5; 1.9e-5 at 512 dims. It also covers the scan's own few roundings.
pub(super) fn rounding(dims: usize) -> f64 {
    (4.0 * (dims as f64 / 8.0 + 16.0) * f64::from(f32::EPSILON) / 2.0).max(1e-5)
}
/// Rows per kernel call.
pub(super) const MR: usize = 4;
/// Centroids per packed panel (two AVX2 vectors of eight `i32`).
pub(super) const NR: usize = 16;
/// Rows per block (their codes stay in L1 while a panel is swept over them).
pub const ROW_BLOCK: usize = 64;
/// Centroids per block (the block's `i32` products are scanned before the next block).
pub const CENTROID_BLOCK: usize = 512;
/// A row's candidate list is pruned to the current bound when it grows past this.
pub(super) const COMPACT_AT: usize = 1024;

/// `v` in f64 rounded up to the next `f32` at or above it (for bounds).
pub(super) fn up(v: f64) -> f32 {
    (v * (1.0 + 1e-6)) as f32
}

/// Dims rounded up to whole groups of four (the kernel's unit).
pub(super) fn width(dims: usize) -> usize {
    dims.div_ceil(4) * 4
}

/// Quantised rows of one partition: built once, kept across iterations.
#[derive(Debug, Clone)]
pub struct QuantRows {
    pub(super) rows: usize,
    pub(super) dims: usize,
    pub(super) width: usize,
    /// `(rows + MR - 1) x width` codes; the extra zero rows let any slice be read in whole
    /// kernel groups.
    pub(super) codes: Vec<u8>,
    pub(super) lo: Vec<f32>,
    pub(super) step: Vec<f32>,
    /// `||x||`, rounded up.
    pub(super) length: Vec<f32>,
    /// `||x - x~||` plus the scan's slack (`rounding(dims) sqrt(dims) max |x|`), rounded up.
    pub(super) error: Vec<f32>,
    /// `rounding(dims) * ||x||^2`.
    pub(super) slack: Vec<f32>,
}

impl QuantRows {
    /// Row `g`'s constants of the scan.
    pub(super) fn terms(&self, g: usize) -> RowTerms {
        RowTerms {
            lo: self.lo[g],
            step: self.step[g],
            length: self.length[g],
            error: self.error[g],
        }
    }
}

/// Rows `start..start + len` of a [`QuantRows`].
#[derive(Debug, Clone, Copy)]
pub struct QuantSlice<'a> {
    pub(super) rows: &'a QuantRows,
    pub(super) start: usize,
    pub(super) len: usize,
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
    /// The instruction set the kernel and scan run on, chosen when the set is made (detected, or
    /// a test's [`QuantCentroids::for_isa`]); the codes are made for it.
    pub(super) isa: Isa,
    pub(super) k: usize,
    pub(super) dims: usize,
    pub(super) width: usize,
    /// Panels of [`NR`] centroids: `[panel][quad][NR][4]` codes (as bytes).
    pub(super) panels: Vec<u8>,
    /// Per centroid, padded to whole panels (padding never wins: `norm = inf`):
    /// `||c||^2`, `2 t sum(p)`, `2 t`, `||c - c~||`, `||c~||`, `rounding(dims) ||c||^2` (with a
    /// bias, [`QuantCentroids::biased`]: `||c||^2 + b` and `rounding(dims) (||c||^2 + |b|)`).
    pub(super) norm: Vec<f32>,
    pub(super) offset: Vec<f32>,
    pub(super) scale: Vec<f32>,
    pub(super) error: Vec<f32>,
    pub(super) length: Vec<f32>,
    pub(super) slack: Vec<f32>,
    /// Per centroid, a bias added to its squared distance ([`QuantCentroids::biased`]; empty
    /// when there is none): already in `norm`, added again to each direct distance verified.
    pub(super) bias: Vec<f32>,
}

impl QuantCentroids {
    /// Quantises and packs `centroids` for the widest build [`crate::isa::level`] allows.
    pub fn new(centroids: &Centroids) -> Self {
        Self::for_isa(centroids, Isa::detect())
    }

    /// Quantises and packs `centroids` for `isa`, which runs every search of them: the codes'
    /// range is the build's ([`Isa::centroid_levels`]).
    pub(super) fn for_isa(centroids: &Centroids, isa: Isa) -> Self {
        let (k, dims) = (centroids.k(), centroids.dims());
        let width = width(dims);
        let padded = k.div_ceil(NR) * NR;
        let slack = rounding(dims);
        let levels = isa.centroid_levels();
        let mut out = Self {
            isa,
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
            bias: Vec::new(),
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
                        let at = (lane, width, &mut *panel);
                        *terms = quantise_centroid(centroids, j, slack, levels, at);
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

    /// Quantises and packs `centroids`, each with `bias[j]` added to its squared distance from
    /// every row (as [`Centroids::biased`] adds it): the searches then rank centroid `j` by
    /// `dist2 + bias[j]` (the sum in `f32`). The bounds' slack grows by the bias's share, which
    /// covers the rounding of the sums.
    ///
    /// # Panics
    /// If there is not one bias per centroid.
    pub fn biased(centroids: &Centroids, bias: &[f32]) -> Self {
        Self::new(centroids).with_bias(bias)
    }

    /// These centroids with `bias` added, as [`QuantCentroids::biased`] (for any build).
    ///
    /// # Panics
    /// If there is not one bias per centroid, or the set has biases already.
    pub(super) fn with_bias(mut self, bias: &[f32]) -> Self {
        assert!(
            bias.len() == self.k && self.bias.is_empty(),
            "one bias per centroid, once"
        );
        let rounding = rounding(self.dims);
        for ((norm, slack), &b) in self.norm.iter_mut().zip(&mut self.slack).zip(bias) {
            *norm += b;
            *slack = up(f64::from(*slack) + rounding * f64::from(b.abs()));
        }
        self.bias = bias.to_vec();
        self
    }

    /// The biases of [`QuantCentroids::biased`] (empty without).
    #[cfg(test)]
    pub(crate) fn biases(&self) -> &[f32] {
        &self.bias
    }

    /// The bias of centroid `j` (zero unless [`QuantCentroids::biased`]).
    pub(super) fn bias(&self, j: usize) -> f32 {
        self.bias.get(j).copied().unwrap_or(0.0)
    }

    /// Number of (real) centroids.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Keeps centroids `columns` out of every search, as the padding past `k` is (their bounds
    /// are infinite): the padding of lists laid out in whole panels.
    ///
    /// # Panics
    /// If a column is not below `k`.
    pub fn never(&mut self, columns: impl IntoIterator<Item = usize>) {
        for j in columns {
            assert!(j < self.k, "column {j} of {}", self.k);
            self.norm[j] = f32::INFINITY;
        }
    }
}

/// Quantises centroid `j` into codes of magnitude at most `levels`, in lane `lane` of its
/// `panel` (`width` codes a centroid); returns its terms (`norm`, `offset`, `scale`, `error`,
/// `length`, `slack`, as in [`QuantCentroids`]).
pub(super) fn quantise_centroid(
    centroids: &Centroids,
    j: usize,
    slack: f64,
    levels: f32,
    (lane, width, panel): (usize, usize, &mut [u8]),
) -> [f32; 6] {
    let c = centroids.row(j);
    let peak = c.iter().fold(0f32, |m, v| m.max(v.abs()));
    let t = if peak > 0.0 { peak / levels } else { 1.0 };
    let (mut sum, mut squares, mut error) = (0i64, 0i64, 0f64);
    for (d, &v) in c.iter().enumerate() {
        let r = v / t;
        let p = ((r + 0.5f32.copysign(r)) as i32 as f32).clamp(-levels, levels);
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

/// A centroid that may be a row's nearest (or among its `r` nearest), with its lower bound.
/// `repr(C)`: the AVX-512 scan stores the pair as one 64-bit lane, index first.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(super) struct Candidate {
    pub(super) index: u32,
    pub(super) lower: f32,
}

/// Per-row constants of the scan.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowTerms {
    pub(super) lo: f32,
    pub(super) step: f32,
    pub(super) length: f32,
    pub(super) error: f32,
}

/// Centroids per panel: [`search_runs`](super::search::search_runs) needs every run to start at a multiple of this.
pub const PANEL: usize = NR;

/// The least value of `v` (infinity when empty; the bounds hold no NaN): eight independent
/// lanes, so the compiler keeps them in one vector register.
pub(super) fn least_of(v: &[f32]) -> f32 {
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

/// Inserts `u` into `least` (ascending) if it is below the last.
#[inline]
pub(super) fn insert_least(least: &mut [f32], u: f32) {
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
pub(super) enum Isa {
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
    pub(super) fn detect() -> Self {
        Self::at(crate::isa::level())
    }

    /// Highest centroid code magnitude of the build. The AVX2 kernel adds two quads' `i16`
    /// products (`vpmaddubsw`, row codes at most [`ROW_LEVELS`]) before widening them, which
    /// stays below `i16::MAX` with codes of magnitude 64 (`2 x 2 x 127 x 64 = 32,512`); the
    /// others widen each quad's (VNNI: no `i16` step) and take 127. The searches' results are
    /// exact whatever the range (the bounds are the codes' own); it sets how many candidates
    /// the direct distances verify.
    pub(super) fn centroid_levels(self) -> f32 {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => 64.0,
            _ => 127.0,
        }
    }

    /// The build for `level` (which the CPU must have).
    pub(super) fn at(level: crate::isa::Level) -> Self {
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
}
