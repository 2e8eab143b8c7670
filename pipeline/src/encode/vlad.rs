//! VLAD, the vector of locally aggregated descriptors (Jégou et al. 2010), with Arandjelović and
//! Zisserman's intra-normalisation (2013): a photo's patches as the sums of their residuals to
//! their nearest words, each residual weighted as soft assignment weights the word (hard
//! assignment: one word, weight 1), per cell of the spatial pyramid.
//!
//! For cell `c` and word `j`, `v[c, j] = sum over the cell's patches x and their words j of
//! w(x, j) (x - mu_j)`, summed in `f64` in patch order. Then:
//! 1. intra-normalisation: each `v[c, j]` (a block of `dims` values) divided by its L2 norm
//!    (a block with no patch, or of norm 0, stays 0);
//! 2. the pyramid: level `l`'s blocks times the level's weight ([`super::bow`]'s, Lazebnik et
//!    al.'s);
//! 3. the signed square root of every value (`sign(v) sqrt(|v|)`, power normalisation);
//! 4. the whole vector divided by its L2 norm.
//!
//! The pyramid is level 0 first, cells row-major, words in order, `dims` values each: `cells x k x
//! dims` values in all.

use super::bow::{Pyramid, slots};

/// What a VLAD vector is laid out over.
#[derive(Debug, Clone, Copy)]
pub struct VladShape {
    /// Words.
    pub k: usize,
    /// Values per descriptor (and per word).
    pub dims: usize,
    /// Photo width (pixels).
    pub width: usize,
    /// Photo height (pixels).
    pub height: usize,
    /// Pyramid levels and strips.
    pub pyramid: Pyramid,
}

impl VladShape {
    /// Values of the vector: `k x dims` per cell, over the pyramid's cells.
    pub fn len(&self) -> usize {
        self.pyramid.len(self.k * self.dims)
    }

    /// Whether the vector is empty (never for a vocabulary of descriptors).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A photo's VLAD sums, patches added a strip at a time (in any strips, the same sums: each value
/// receives its patches' residuals in patch order).
#[derive(Debug, Clone)]
pub struct VladSums {
    shape: VladShape,
    v: Vec<f64>,
}

impl VladSums {
    /// No patches yet.
    pub fn new(shape: VladShape) -> Self {
        Self {
            shape,
            v: vec![0f64; shape.len()],
        }
    }

    /// Bytes the sums hold (for the memory plan).
    pub fn bytes(shape: VladShape) -> u64 {
        shape.len() as u64 * 8
    }

    /// Adds patches: patch `i` has the descriptor `descriptors[i * dims..][..dims]`, lies at
    /// `positions[i]` and goes to words `words[i * per..][..per]` with `weights` likewise (none:
    /// weight 1 each, `per = 1`); words past the vocabulary (`u32::MAX`) are skipped.
    /// `centroids` holds the `k` words, `dims` values each.
    ///
    /// # Panics
    /// If the slices do not hold what the shape and `per` say.
    pub fn add(
        &mut self,
        descriptors: &[f32],
        (words, weights, per): (&[u32], Option<&[f32]>, usize),
        positions: &[(usize, usize)],
        centroids: &[f32],
    ) {
        let VladShape {
            k,
            dims,
            width,
            height,
            pyramid,
        } = self.shape;
        let per = per.max(1);
        assert_eq!(descriptors.len(), positions.len() * dims, "descriptors");
        assert_eq!(words.len(), positions.len() * per, "words");
        assert_eq!(centroids.len(), k * dims, "centroids");
        let block = k * dims;
        let mut base = 0;
        for group in pyramid.groups() {
            for (i, &place) in positions.iter().enumerate() {
                let cell = group.cell_of(place, width, height);
                let x = &descriptors[i * dims..(i + 1) * dims];
                for (word, w) in slots(words, weights, per, i, k) {
                    let mu = &centroids[word * dims..(word + 1) * dims];
                    let out = &mut self.v[base + cell * block + word * dims..][..dims];
                    for ((o, &xv), &m) in out.iter_mut().zip(x).zip(mu) {
                        *o += w * (f64::from(xv) - f64::from(m));
                    }
                }
            }
            base += group.cells() * block;
        }
    }

    /// The normalised vector (see the module docs).
    pub fn finish(self) -> Vec<f32> {
        let Self { shape, mut v } = self;
        let (k, dims, pyramid) = (shape.k, shape.dims.max(1), shape.pyramid);
        // 1-2. Intra-normalisation and the level weights, block by block.
        let mut blocks = v.chunks_exact_mut(dims);
        for group in pyramid.groups() {
            for b in blocks.by_ref().take(group.cells() * k) {
                let norm = b.iter().map(|x| x * x).sum::<f64>().sqrt();
                let scale = if norm > 0.0 {
                    pyramid.weight(group) / norm
                } else {
                    0.0
                };
                b.iter_mut().for_each(|x| *x *= scale);
            }
        }
        // 3-4. Signed square root, then L2.
        v.iter_mut().for_each(|x| *x = x.signum() * x.abs().sqrt());
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        v.iter().map(|&x| (x * scale) as f32).collect()
    }
}

/// The VLAD vector of one photo's patches at once ([`VladSums::add`], [`VladSums::finish`]).
pub fn vlad(
    descriptors: &[f32],
    words: &[u32],
    weights: Option<&[f32]>,
    per: usize,
    positions: &[(usize, usize)],
    centroids: &[f32],
    shape: VladShape,
) -> Vec<f32> {
    let mut sums = VladSums::new(shape);
    sums.add(descriptors, (words, weights, per), positions, centroids);
    sums.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `eval/vlad/fixture.json`, written by `eval/vlad/make_fixture.py` (numpy formulas).
    #[derive(serde::Deserialize)]
    struct Fixture {
        k: usize,
        dims: usize,
        per: usize,
        width: usize,
        height: usize,
        levels: usize,
        descriptors: Vec<f32>,
        centroids: Vec<f32>,
        words: Vec<u32>,
        weights: Vec<f32>,
        positions: Vec<(usize, usize)>,
        expected: Vec<f64>,
        expected_hard: Vec<f64>,
    }

    /// The fixture, its shape, and the soft VLAD vocab computes of it at once.
    fn fixture() -> (Fixture, VladShape, Vec<f32>) {
        let text = include_str!("../../../eval/vlad/fixture.json");
        let f: Fixture = serde_json::from_str(text).expect("fixture");
        let shape = VladShape {
            k: f.k,
            dims: f.dims,
            width: f.width,
            height: f.height,
            pyramid: Pyramid::plain(f.levels),
        };
        let weights = Some(f.weights.as_slice());
        let soft = vlad(
            &f.descriptors,
            &f.words,
            weights,
            f.per,
            &f.positions,
            &f.centroids,
            shape,
        );
        (f, shape, soft)
    }

    #[test]
    fn vlad_equals_the_numpy_formulas() {
        let (f, shape, soft) = fixture();
        // Hard: each patch's first word, weight 1.
        let first: Vec<u32> = f.words.chunks_exact(f.per).map(|w| w[0]).collect();
        let hard = vlad(
            &f.descriptors,
            &first,
            None,
            1,
            &f.positions,
            &f.centroids,
            shape,
        );
        for (got, want) in [(soft, &f.expected), (hard, &f.expected_hard)] {
            assert_eq!(got.len(), want.len());
            for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
                assert!((f64::from(g) - w).abs() < 1e-6, "value {i}: {g} vs {w}");
            }
            let norm: f64 = got.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
            assert!((norm - 1.0).abs() < 1e-5, "unit length: {norm}");
        }
    }

    #[test]
    fn strips_of_patches_sum_to_the_whole_photo_bit_for_bit() {
        let (f, shape, whole) = fixture();
        let mut sums = VladSums::new(shape);
        for (start, end) in [(0, 5), (5, 6), (6, 14)] {
            sums.add(
                &f.descriptors[start * f.dims..end * f.dims],
                (
                    &f.words[start * f.per..end * f.per],
                    Some(&f.weights[start * f.per..end * f.per]),
                    f.per,
                ),
                &f.positions[start..end],
                &f.centroids,
            );
        }
        let strips = sums.finish();
        assert_eq!(
            whole.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            strips.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_photo_without_patches_is_all_zeros() {
        let shape = VladShape {
            k: 2,
            dims: 3,
            width: 50,
            height: 50,
            pyramid: Pyramid::plain(2),
        };
        let v = vlad(&[], &[], None, 1, &[], &[0.0; 6], shape);
        assert_eq!(v, vec![0.0; 5 * 2 * 3]);
    }
}
