//! Improved Fisher vectors (Perronnin, Sánchez and Mensink 2010; Sánchez et al. 2013): a photo's
//! patches, projected by the mixture's PCA, as the gradients of their log-likelihood under a
//! diagonal Gaussian mixture with respect to its means and variances, per cell of the spatial
//! pyramid.
//!
//! For a cell of `T` patches `y_t` with posteriors `γ_t(k)`, component `k` (weight `w`, mean
//! `m`, standard deviations `s`) gives
//!
//! ```text
//! u_k = 1 / (T sqrt(w))   Σ_t γ_t(k) (y_t - m) / s
//! v_k = 1 / (T sqrt(2 w)) Σ_t γ_t(k) ((y_t - m)² / s² - 1)
//! ```
//!
//! laid out as every `u_k`, then every `v_k` (`2 k d` values a cell, VLFeat's `vl_fisher`
//! order); a cell without patches is zeros. Each level's cells are multiplied by the level's
//! weight ([`super::bow`]'s, Lazebnik et al.'s), then every value takes its signed square root
//! and the whole vector is divided by its L2 norm (the "improved" normalisations). Levels go
//! first to last, cells row-major.
//!
//! The sums `Σγ`, `Σγy`, `Σγy²` are kept in `f64` per piece (each cell of the finest level, cut
//! by the horizontal strips when the pyramid has some), each patch added in order, and a
//! coarser cell's or a strip's are the sums of its pieces in piece order: strips of patches
//! added one after another give the same bits as the whole photo at once. The posteriors are the mixture's own
//! ([`crate::mixture::gmm::Prepared::posteriors`], the EM step's); components a patch's
//! posterior is exactly 0 for add nothing.

use super::bow::{Group, Pyramid, cell_of};
use crate::mixture::gmm::Prepared;
use crate::mixture::{Gmm, MixtureError, MixtureFile, Pca};

/// A mixture ready to encode with: its projection, its components, their log-density terms
/// and standard deviations.
#[derive(Debug, Clone)]
pub struct FisherModel {
    pca: Pca,
    gmm: Gmm,
    prepared: Prepared,
    sigma: Vec<f64>,
}

impl FisherModel {
    /// The model of a projection and a mixture over its outputs (checked).
    pub fn new(pca: Pca, gmm: Gmm) -> Result<Self, MixtureError> {
        pca.check()?;
        gmm.check()?;
        if gmm.dims() != pca.output_dims() {
            return Err(MixtureError::Parts {
                dims: pca.input_dims(),
                pca: (pca.input_dims(), pca.output_dims()),
                gmm: (gmm.components(), gmm.dims()),
            });
        }
        let sigma = gmm.variances.iter().map(|v| v.sqrt()).collect();
        Ok(Self {
            prepared: gmm.prepared(),
            pca,
            gmm,
            sigma,
        })
    }

    /// The model of a mixture file.
    pub fn of(file: &MixtureFile) -> Result<Self, MixtureError> {
        Self::new(file.pca.clone(), file.gmm.clone())
    }

    /// Components.
    pub fn components(&self) -> usize {
        self.gmm.components()
    }

    /// Values per projected patch.
    pub fn dims(&self) -> usize {
        self.pca.output_dims()
    }

    /// Values per patch descriptor.
    pub fn input_dims(&self) -> usize {
        self.pca.input_dims()
    }

    /// The mixture's values in one list (what the photo job ships to its members):
    /// [`crate::mixture::Statistic::values`]' order.
    pub fn values(&self) -> Vec<f64> {
        crate::mixture::Statistic::Mixture {
            pca: self.pca.clone(),
            gmm: self.gmm.clone(),
        }
        .values()
    }

    /// The model of [`FisherModel::values`] for descriptors of `dims` values projected onto
    /// `projected`, with `components` components.
    pub fn from_values(
        (dims, projected, components): (usize, usize, usize),
        values: &[f64],
    ) -> Result<Self, MixtureError> {
        let head = crate::mixture::moments::Head {
            dims: dims as u64,
            projected: projected as u64,
            components: components as u64,
        };
        match crate::mixture::Statistic::from_values(head, values)? {
            crate::mixture::Statistic::Mixture { pca, gmm } => Self::new(pca, gmm),
            crate::mixture::Statistic::Covariance { .. } => Err(MixtureError::Empty),
        }
    }
}

/// What a Fisher vector is laid out over.
#[derive(Debug, Clone, Copy)]
pub struct FisherShape {
    /// Components.
    pub k: usize,
    /// Projected values per patch.
    pub d: usize,
    /// Photo width (pixels).
    pub width: usize,
    /// Photo height (pixels).
    pub height: usize,
    /// Pyramid levels and strips.
    pub pyramid: Pyramid,
}

impl FisherShape {
    /// Values of the vector: `2 k d` per cell, over the pyramid's cells.
    pub fn len(&self) -> usize {
        self.pyramid.len(2 * self.k * self.d)
    }

    /// Whether the vector is empty (never for a mixture).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cells on a side of the pyramid's finest level.
    fn fine_side(&self) -> usize {
        1usize << (self.pyramid.levels.max(1) - 1)
    }

    /// Pieces each finest cell is cut into by the strips (1 without strips).
    fn bands(&self) -> usize {
        self.pyramid.strips.max(1)
    }

    /// The pieces the sums are kept for: each cell of the finest level (row-major) cut by the
    /// strips (top to bottom), so that every cell of the pyramid is a union of pieces.
    fn fine(&self) -> usize {
        self.fine_side() * self.fine_side() * self.bands()
    }

    /// The piece of the patch whose top-left corner is `place`.
    fn piece_of(&self, place: (usize, usize)) -> usize {
        let (width, height) = (self.width, self.height);
        let cell = cell_of(place, self.fine_side(), width, height);
        let band = match self.pyramid.strips {
            0 => 0,
            n => Group::Strips(n).cell_of(place, width, height),
        };
        cell * self.bands() + band
    }

    /// The pieces inside `cell` of `group`, in piece order.
    fn pieces_in(&self, group: Group, cell: usize) -> Vec<usize> {
        let (side, bands) = (self.fine_side(), self.bands());
        (0..self.fine())
            .filter(|&p| match group {
                Group::Level(level) => {
                    let (fine, cells) = (p / bands, 1usize << level);
                    let shift = self.pyramid.levels.max(1) - 1 - level;
                    (fine / side) >> shift == cell / cells && (fine % side) >> shift == cell % cells
                }
                Group::Strips(_) => p % bands == cell,
            })
            .collect()
    }
}

/// A strip of patches, projected: values `y` (`d` a patch), their squares `y2`, the posteriors
/// `gamma` (`k` a patch) and the patches' places.
#[derive(Clone, Copy)]
struct Patches<'a> {
    y: &'a [f64],
    y2: &'a [f64],
    gamma: &'a [f64],
    positions: &'a [(usize, usize)],
}

/// A photo's sums per finest pyramid cell, patches added a strip at a time.
#[derive(Debug, Clone)]
pub struct FisherSums {
    shape: FisherShape,
    counts: Vec<u64>,
    s0: Vec<f64>,
    s1: Vec<f64>,
    s2: Vec<f64>,
}

impl FisherSums {
    /// No patches yet.
    pub fn new(shape: FisherShape) -> Self {
        let (fine, k, d) = (shape.fine(), shape.k, shape.d);
        Self {
            shape,
            counts: vec![0; fine],
            s0: vec![0.0; fine * k],
            s1: vec![0.0; fine * k * d],
            s2: vec![0.0; fine * k * d],
        }
    }

    /// Bytes the sums hold (for the memory plan).
    pub fn bytes(shape: FisherShape) -> u64 {
        let (fine, k, d) = (shape.fine() as u64, shape.k as u64, shape.d as u64);
        fine.saturating_mul(8 + k * 8 + 2 * k * d * 8)
    }

    /// Adds patches: patch `i` has the descriptor `descriptors[i * input..][..input]` and lies
    /// at `positions[i]`.
    ///
    /// # Panics
    /// If the descriptors are not the model's input dims per position.
    pub fn add(&mut self, model: &FisherModel, descriptors: &[f32], positions: &[(usize, usize)]) {
        let n = positions.len();
        let (k, d) = (self.shape.k, self.shape.d);
        assert_eq!(descriptors.len(), n * model.input_dims(), "descriptors");
        assert_eq!((k, d), (model.components(), model.dims()), "shape");
        if n == 0 {
            return;
        }
        let mut x: Vec<f64> = descriptors.iter().map(|&v| f64::from(v)).collect();
        let mut y = Vec::new();
        model.pca.project_into(&mut x, n, &mut y);
        let y2: Vec<f64> = y.iter().map(|v| v * v).collect();
        let mut gamma = Vec::new();
        model.prepared.posteriors(&y, &y2, n, &mut gamma);
        let patches = Patches {
            y: &y,
            y2: &y2,
            gamma: &gamma,
            positions,
        };
        // The same additions in the same order in every build (no fused multiply-adds): the
        // wider builds only add more values of a Gaussian's row at once.
        match crate::isa::level() {
            #[cfg(target_arch = "x86_64")]
            crate::isa::Level::Avx512 => {
                // SAFETY: the level is AVX-512 only when the CPU has AVX-512 F.
                unsafe { self.accumulate_avx512(&patches) }
            }
            #[cfg(target_arch = "x86_64")]
            crate::isa::Level::Avx2 => {
                // SAFETY: the level is AVX2 only when the CPU has AVX2.
                unsafe { self.accumulate_avx2(&patches) }
            }
            _ => self.accumulate(&patches),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn accumulate_avx512(&mut self, patches: &Patches<'_>) {
        self.accumulate(patches);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn accumulate_avx2(&mut self, patches: &Patches<'_>) {
        self.accumulate(patches);
    }

    /// Adds each patch's posteriors and their products with its projected values (and their
    /// squares) into its piece's sums.
    #[inline(always)]
    fn accumulate(&mut self, patches: &Patches<'_>) {
        let (k, d) = (self.shape.k, self.shape.d);
        let Patches {
            y,
            y2,
            gamma,
            positions,
        } = *patches;
        for (i, &place) in positions.iter().enumerate() {
            let cell = self.shape.piece_of(place);
            self.counts[cell] += 1;
            let (yi, y2i) = (&y[i * d..(i + 1) * d], &y2[i * d..(i + 1) * d]);
            for (j, &g) in gamma[i * k..(i + 1) * k].iter().enumerate() {
                if g == 0.0 {
                    continue;
                }
                let at = cell * k + j;
                self.s0[at] += g;
                for ((a, b), (&v, &v2)) in (self.s1[at * d..(at + 1) * d].iter_mut())
                    .zip(&mut self.s2[at * d..(at + 1) * d])
                    .zip(yi.iter().zip(y2i))
                {
                    *a += g * v;
                    *b += g * v2;
                }
            }
        }
    }

    /// One cell's gradients `u` and `v` (scaled by its group's `weight`), from the sums of the
    /// pieces `inside` it, added in piece order.
    fn cell(&self, model: &FisherModel, inside: &[usize], weight: f64) -> (Vec<f64>, Vec<f64>) {
        let (k, d) = (self.shape.k, self.shape.d);
        let t: u64 = inside.iter().map(|&f| self.counts[f]).sum();
        let (mut u, mut s) = (vec![0f64; k * d], vec![0f64; k * d]);
        if t == 0 {
            return (u, s);
        }
        for j in 0..k {
            let (mut n0, mut n1, mut n2) = (0.0, vec![0f64; d], vec![0f64; d]);
            for &f in inside {
                let at = f * k + j;
                n0 += self.s0[at];
                for e in 0..d {
                    n1[e] += self.s1[at * d + e];
                    n2[e] += self.s2[at * d + e];
                }
            }
            let w = model.gmm.weights[j];
            let (cu, cv) = (
                weight / (t as f64 * w.sqrt()),
                weight / (t as f64 * (2.0 * w).sqrt()),
            );
            for e in 0..d {
                let m = model.gmm.means[j * d + e];
                let sd = model.sigma[j * d + e];
                // Σγ(y - m) and Σγ(y - m)² from the raw sums.
                let first = n1[e] - m * n0;
                let second = n2[e] - 2.0 * m * n1[e] + m * m * n0;
                u[j * d + e] = cu * first / sd;
                s[j * d + e] = cv * (second / (sd * sd) - n0);
            }
        }
        (u, s)
    }

    /// The normalised vector (see the module docs).
    pub fn finish(self, model: &FisherModel) -> Vec<f32> {
        let pyramid = self.shape.pyramid;
        let mut v = Vec::with_capacity(self.shape.len());
        for group in pyramid.groups() {
            for cell in 0..group.cells() {
                let inside = self.shape.pieces_in(group, cell);
                let (u, s) = self.cell(model, &inside, pyramid.weight(group));
                v.extend(u);
                v.extend(s);
            }
        }
        v.iter_mut().for_each(|x| *x = x.signum() * x.abs().sqrt());
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        v.iter().map(|&x| (x * scale) as f32).collect()
    }
}

/// The Fisher vector of one photo's patches at once ([`FisherSums::add`],
/// [`FisherSums::finish`]).
pub fn fisher(
    model: &FisherModel,
    descriptors: &[f32],
    positions: &[(usize, usize)],
    shape: FisherShape,
) -> Vec<f32> {
    let mut sums = FisherSums::new(shape);
    sums.add(model, descriptors, positions);
    sums.finish(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `eval/fisher/fixture.json`, written by `eval/fisher/make_fixture.py` (scikit-learn's
    /// mixture and posteriors, numpy formulas).
    #[derive(serde::Deserialize)]
    struct Fixture {
        width: usize,
        height: usize,
        levels: usize,
        pca: Pca,
        gmm: Gmm,
        descriptors: Vec<f32>,
        positions: Vec<(usize, usize)>,
        posteriors: Vec<f64>,
        expected: Vec<f64>,
    }

    fn fixture() -> (Fixture, FisherModel, FisherShape) {
        let text = include_str!("../../../eval/fisher/fixture.json");
        let f: Fixture = serde_json::from_str(text).expect("fixture");
        let model = FisherModel::new(f.pca.clone(), f.gmm.clone()).expect("model");
        let shape = FisherShape {
            k: model.components(),
            d: model.dims(),
            width: f.width,
            height: f.height,
            pyramid: Pyramid::plain(f.levels),
        };
        (f, model, shape)
    }

    /// The fixture's patches projected (values and their squares) and their posteriors.
    fn projected(f: &Fixture, model: &FisherModel) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let n = f.positions.len();
        let mut x: Vec<f64> = f.descriptors.iter().map(|&v| f64::from(v)).collect();
        let mut y = Vec::new();
        model.pca.project_into(&mut x, n, &mut y);
        let y2: Vec<f64> = y.iter().map(|v| v * v).collect();
        let mut gamma = Vec::new();
        model.prepared.posteriors(&y, &y2, n, &mut gamma);
        (y, y2, gamma)
    }

    #[test]
    fn fisher_vectors_equal_the_numpy_formulas_on_scikit_learns_posteriors() {
        let (f, model, shape) = fixture();
        // The posteriors first: the mixture's own equal scikit-learn's predict_proba.
        let (_, _, gamma) = projected(&f, &model);
        for (g, w) in gamma.iter().zip(&f.posteriors) {
            assert!((g - w).abs() < 1e-9, "posterior {g} vs {w}");
        }
        let got = fisher(&model, &f.descriptors, &f.positions, shape);
        assert_eq!(got.len(), f.expected.len());
        assert_eq!(got.len(), shape.len());
        for (i, (&g, &w)) in got.iter().zip(&f.expected).enumerate() {
            assert!((f64::from(g) - w).abs() < 1e-6, "value {i}: {g} vs {w}");
        }
    }

    #[test]
    fn strips_of_patches_give_the_whole_photo_bit_for_bit() {
        let (f, model, shape) = fixture();
        let whole = fisher(&model, &f.descriptors, &f.positions, shape);
        let dims = model.input_dims();
        let mut sums = FisherSums::new(shape);
        for (start, end) in [(0, 7), (7, 8), (8, 24)] {
            sums.add(
                &model,
                &f.descriptors[start * dims..end * dims],
                &f.positions[start..end],
            );
        }
        let strips = sums.finish(&model);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&whole), bits(&strips));
    }

    /// With strips, the pyramid's cells are the plain pyramid's (the same values up to the
    /// vector's L2 scale), and each strip's are the Fisher vector of the patches whose centres
    /// lie in it (up to its scale).
    #[test]
    fn strips_pool_the_patches_of_each_horizontal_band() {
        let (f, model, shape) = fixture();
        let (k, d, dims) = (model.components(), model.dims(), model.input_dims());
        let levels = shape.pyramid.levels;
        let striped = FisherShape {
            pyramid: Pyramid { levels, strips: 3 },
            ..shape
        };
        let plain = fisher(&model, &f.descriptors, &f.positions, shape);
        let got = fisher(&model, &f.descriptors, &f.positions, striped);
        let cell = 2 * k * d;
        assert_eq!(got.len(), striped.len());
        assert_eq!(got.len(), plain.len() + 3 * cell);
        let unit = |v: &[f32]| {
            let n = v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
            assert!(n > 0.0, "an empty cell");
            v.iter().map(|&x| f64::from(x) / n).collect::<Vec<_>>()
        };
        let close = |a: &[f64], b: &[f64]| {
            assert_eq!(a.len(), b.len());
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert!((x - y).abs() < 1e-5, "value {i}: {x} vs {y}");
            }
        };
        close(&unit(&got[..plain.len()]), &unit(&plain));
        let mut filled = 0;
        for strip in 0..3 {
            let inside: Vec<usize> = (0..f.positions.len())
                .filter(|&i| Group::Strips(3).cell_of(f.positions[i], f.width, f.height) == strip)
                .collect();
            let at = plain.len() + strip * cell;
            if inside.is_empty() {
                assert!(got[at..at + cell].iter().all(|&v| v == 0.0));
                continue;
            }
            filled += 1;
            let descriptors: Vec<f32> = (inside.iter())
                .flat_map(|&i| f.descriptors[i * dims..(i + 1) * dims].iter().copied())
                .collect();
            let positions: Vec<_> = inside.iter().map(|&i| f.positions[i]).collect();
            let whole = FisherShape {
                pyramid: Pyramid::plain(1),
                ..shape
            };
            let alone = fisher(&model, &descriptors, &positions, whole);
            close(&unit(&got[at..at + cell]), &unit(&alone));
        }
        assert!(filled >= 2, "the fixture's patches fill {filled} strips");
    }

    /// Every build the CPU has adds the same sums, bit for bit.
    #[test]
    fn every_build_adds_the_same_sums() {
        let (f, model, shape) = fixture();
        let (y, y2, gamma) = projected(&f, &model);
        let patches = Patches {
            y: &y,
            y2: &y2,
            gamma: &gamma,
            positions: &f.positions,
        };
        let sums = |build: &dyn Fn(&mut FisherSums)| {
            let mut sums = FisherSums::new(shape);
            build(&mut sums);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            (sums.counts, bits(&sums.s0), bits(&sums.s1), bits(&sums.s2))
        };
        let portable = sums(&|s| s.accumulate(&patches));
        assert!(portable.2.iter().any(|&b| b != 0));
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: AVX2 was just detected.
                let avx2 = sums(&|s| unsafe { s.accumulate_avx2(&patches) });
                assert!(avx2 == portable, "avx2");
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: AVX-512 F was just detected.
                let avx512 = sums(&|s| unsafe { s.accumulate_avx512(&patches) });
                assert!(avx512 == portable, "avx512");
            }
        }
    }

    #[test]
    fn a_photo_without_patches_is_all_zeros_and_values_travel() {
        let (f, model, shape) = fixture();
        assert!(fisher(&model, &[], &[], shape).iter().all(|&v| v == 0.0));
        let back = FisherModel::from_values(
            (model.input_dims(), model.dims(), model.components()),
            &model.values(),
        )
        .expect("back");
        let (a, b) = (
            fisher(&model, &f.descriptors, &f.positions, shape),
            fisher(&back, &f.descriptors, &f.positions, shape),
        );
        assert_eq!(a, b);
    }
}
