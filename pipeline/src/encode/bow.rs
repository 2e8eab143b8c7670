//! Bag of words: a photo's patches counted toward their words (or, soft, their few nearest
//! words, weighted), per cell of the spatial pyramid, then normalised.

use crate::hog::PATCH_SIDE;

/// Histogram normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Norm {
    /// Rows sum to 1.
    #[default]
    L1,
    /// Square root of the L1-normalised histogram.
    Hellinger,
}

impl Norm {
    /// The name on the command line and in files.
    pub fn name(self) -> &'static str {
        match self {
            Self::L1 => "l1",
            Self::Hellinger => "hellinger",
        }
    }

    /// The normalisation called `name`.
    pub fn named(name: &str) -> Option<Self> {
        [Self::L1, Self::Hellinger]
            .into_iter()
            .find(|n| n.name() == name)
    }
}

/// Length of an encoded vector: `k` values per cell, `sum 4^l` cells over the levels.
pub fn encoded_len(k: usize, levels: usize) -> usize {
    Pyramid::plain(levels).len(k)
}

/// Most horizontal strips after a pyramid's levels.
pub const MAX_STRIPS: usize = 8;

/// Where a photo's patches are pooled, each by its centre: a spatial pyramid of `levels` levels
/// (level `l` cuts the photo into `2^l x 2^l` cells, row-major), then, with `strips > 0`, a
/// group of `strips` horizontal strips of the photo, top to bottom, weighted as the pyramid's
/// finest level. Chatfield et al.'s (BMVC 2011) 1x1 + 2x2 + 3x1 is `levels = 2, strips = 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pyramid {
    /// Pyramid levels (1: the whole photo alone).
    pub levels: usize,
    /// Horizontal strips after the pyramid (0: none).
    pub strips: usize,
}

/// One group of a [`Pyramid`]'s cells: a pyramid level or the strips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Group {
    /// Pyramid level `l`: `2^l x 2^l` cells.
    Level(usize),
    /// This many horizontal strips.
    Strips(usize),
}

impl Pyramid {
    /// A spatial pyramid of `levels` levels and no strips.
    pub fn plain(levels: usize) -> Self {
        Self { levels, strips: 0 }
    }

    /// Cells over the levels and the strips.
    pub fn cells(self) -> usize {
        self.groups().map(|g| g.cells()).sum()
    }

    /// Values of a vector of `k` a cell.
    pub fn len(self, k: usize) -> usize {
        k * self.cells()
    }

    /// The groups of cells in the vector's order: the levels, coarsest first, then the strips.
    pub(super) fn groups(self) -> impl Iterator<Item = Group> {
        let strips = (self.strips > 0).then_some(Group::Strips(self.strips));
        (0..self.levels.max(1)).map(Group::Level).chain(strips)
    }

    /// A group's weight: a level's by [`level_weight`], the strips' the finest level's.
    pub(super) fn weight(self, group: Group) -> f64 {
        let levels = self.levels.max(1);
        match group {
            Group::Level(l) => level_weight(l, levels),
            Group::Strips(_) => level_weight(levels - 1, levels),
        }
    }
}

impl Group {
    /// Cells in the group.
    pub(super) fn cells(self) -> usize {
        match self {
            Self::Level(l) => 1usize << (2 * l),
            Self::Strips(n) => n,
        }
    }

    /// The cell of the group that holds the patch whose top-left corner is `place`, by its
    /// centre, in a `width x height` photo.
    pub(super) fn cell_of(self, place: (usize, usize), width: usize, height: usize) -> usize {
        match self {
            Self::Level(l) => cell_of(place, 1usize << l, width, height),
            Self::Strips(n) => ((place.0 + PATCH_SIDE / 2) * n / height.max(1)).min(n - 1),
        }
    }
}

/// Soft assignment: each patch counts toward its `words` nearest words, word `j` with weight
/// `exp(-sharpness (d_j / d_1 - 1))` (`d` squared distances, `d_1` the nearest's), the weights
/// of a patch normalised to sum 1 (van Gemert et al.'s kernel codebook, localised to the
/// nearest words as Liu et al. do). A patch on its word (`d_1 = 0`) counts toward it alone.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Soft {
    /// Nearest words a patch counts toward (at least 2).
    pub words: usize,
    /// How fast the weight falls with distance.
    pub sharpness: f32,
}

impl Soft {
    /// The weights of one patch's words from their squared distances, nearest first (entries
    /// past the vocabulary, infinite, weigh 0).
    pub fn weights(&self, dists: &[f32], out: &mut [f32]) {
        let nearest = dists.first().copied().unwrap_or(0.0);
        if nearest.is_nan() || nearest <= 0.0 {
            out.fill(0.0);
            if let Some(first) = out.first_mut() {
                *first = 1.0;
            }
            return;
        }
        let mut sum = 0f32;
        for (w, &d) in out.iter_mut().zip(dists) {
            *w = if d.is_finite() {
                (-self.sharpness * (d / nearest - 1.0)).exp()
            } else {
                0.0
            };
            sum += *w;
        }
        for w in out.iter_mut() {
            *w /= sum;
        }
    }
}

/// The histogram of one photo's patches (`labels[i]` is the word of the patch at `positions[i]`).
pub fn histogram(
    labels: &[u32],
    positions: &[(usize, usize)],
    k: usize,
    width: usize,
    height: usize,
    levels: usize,
    norm: Norm,
) -> Vec<f32> {
    let shape = Shape {
        k,
        width,
        height,
        pyramid: Pyramid::plain(levels),
        norm,
    };
    weighted_histogram(labels, None, 1, positions, shape)
}

/// What a histogram is laid out over.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Words.
    pub k: usize,
    /// Photo width (pixels).
    pub width: usize,
    /// Photo height (pixels).
    pub height: usize,
    /// Pyramid levels and strips.
    pub pyramid: Pyramid,
    /// Normalisation.
    pub norm: Norm,
}

/// The weight of pyramid level `level` of `levels` (Lazebnik et al.): `1 / 2^L` for level 0,
/// `1 / 2^(L - l + 1)` for level `l > 0`, `L = levels - 1`; 1 without a pyramid.
pub(super) fn level_weight(level: usize, levels: usize) -> f64 {
    let top = levels.max(1) - 1;
    if levels <= 1 {
        1.0
    } else if level == 0 {
        1.0 / (1u64 << top) as f64
    } else {
        1.0 / (1u64 << (top - level + 1)) as f64
    }
}

/// The cell (row-major, of `cells x cells`) of the patch whose top-left corner is `(r, c)`, by
/// its centre, in a `width x height` photo.
pub(super) fn cell_of((r, c): (usize, usize), cells: usize, width: usize, height: usize) -> usize {
    let (cy, cx) = (r + PATCH_SIDE / 2, c + PATCH_SIDE / 2);
    ((cy * cells / height.max(1)).min(cells - 1)) * cells
        + (cx * cells / width.max(1)).min(cells - 1)
}

/// Patch `i`'s words in a vocabulary of `k` and their weights: `words[i * per..][..per]` with
/// `weights` likewise (none: 1 each); words past the vocabulary (`u32::MAX`) skipped.
pub(super) fn slots<'a>(
    words: &'a [u32],
    weights: Option<&'a [f32]>,
    per: usize,
    i: usize,
    k: usize,
) -> impl Iterator<Item = (usize, f64)> + 'a {
    (i * per..(i + 1) * per).filter_map(move |slot| {
        let word = *words.get(slot).filter(|&&w| (w as usize) < k)?;
        let share = weights
            .and_then(|w| w.get(slot))
            .map_or(1.0, |&w| f64::from(w));
        Some((word as usize, share))
    })
}

/// The histogram of one photo's patches, patch `i` counting toward words
/// `words[i * per..][..per]` with `weights` likewise (none: weight 1 each, `per = 1`); words
/// past the vocabulary (`u32::MAX`) are skipped.
pub fn weighted_histogram(
    words: &[u32],
    weights: Option<&[f32]>,
    per: usize,
    positions: &[(usize, usize)],
    shape: Shape,
) -> Vec<f32> {
    let Shape {
        k,
        width,
        height,
        pyramid,
        norm,
    } = shape;
    let per = per.max(1);
    let mut out = vec![0f64; pyramid.len(k)];
    let n = positions.len().max(1) as f64;
    let mut base = 0;
    for group in pyramid.groups() {
        let weight = pyramid.weight(group);
        for (i, &place) in positions.iter().enumerate() {
            let cell = group.cell_of(place, width, height);
            for (word, share) in slots(words, weights, per, i, k) {
                out[base + cell * k + word] += weight * share / n;
            }
        }
        base += group.cells() * k;
    }
    let sum: f64 = out.iter().sum();
    let scale = if sum > 0.0 { 1.0 / sum } else { 0.0 };
    out.iter()
        .map(|&v| match norm {
            Norm::L1 => (v * scale) as f32,
            Norm::Hellinger => (v * scale).sqrt() as f32,
        })
        .collect()
}
