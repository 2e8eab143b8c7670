//! Where patches are cut: seeded random positions for the vocabulary, a dense grid for encoding.
//!
//! Random positions come from a ChaCha8 generator seeded with the run's seed and switched to the
//! stream of the picture id, so a photo's patches depend only on `(seed, picture_id, size)`: not on
//! thread scheduling, on the order photos are processed, or on which other photos decoded.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::hog::{CELL_SIDE, PATCH_SIDE};

/// Most random patches per photo a run may ask for: far above any use (the paper takes 5; a
/// dense 8-px grid on a 12-Mpix photo has about 190,000), and it keeps a mistyped count from
/// asking for terabytes.
pub const MAX_PER_IMAGE: usize = 100_000;

/// How patches are placed, without their numbers (the command line's and configs' choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mode {
    /// N random patches per photo (the vocabulary's sample).
    Random,
    /// Every patch on a grid (encoding).
    Dense,
}

/// How patches are placed in an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Sampling {
    /// `per_image` top-left corners drawn uniformly (with replacement) over all valid positions.
    Random {
        /// Patches per image.
        per_image: usize,
        /// Seed of the run.
        seed: u64,
    },
    /// Every patch on a grid starting at (0, 0) with the given stride.
    Dense {
        /// Grid step in pixels (rows and columns).
        stride: usize,
    },
}

impl Default for Sampling {
    fn default() -> Self {
        Self::Random {
            per_image: 5,
            seed: 0,
        }
    }
}

impl Sampling {
    /// Whether dense patches fall on the HOG cell grid, so they can be cut from one block grid.
    pub fn is_cell_aligned(&self) -> bool {
        matches!(self, Self::Dense { stride } if stride % CELL_SIDE == 0)
    }

    /// Top-left `(row, col)` positions of the patches of one image, in a deterministic order
    /// (draw order for random sampling, row-major for dense sampling). Empty when the image is
    /// smaller than a patch.
    pub fn positions(&self, picture_id: u32, width: usize, height: usize) -> Vec<(usize, usize)> {
        if width < PATCH_SIDE || height < PATCH_SIDE {
            return Vec::new();
        }
        let (max_row, max_col) = (height - PATCH_SIDE, width - PATCH_SIDE);
        match *self {
            Self::Random { per_image, seed } => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(u64::from(picture_id));
                (0..per_image)
                    .map(|_| (rng.random_range(0..=max_row), rng.random_range(0..=max_col)))
                    .collect()
            }
            Self::Dense { stride } => {
                let stride = stride.max(1);
                let cols: Vec<usize> = (0..=max_col).step_by(stride).collect();
                (0..=max_row)
                    .step_by(stride)
                    .flat_map(|r| cols.iter().map(move |&c| (r, c)))
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_positions_are_reproducible_and_in_bounds() {
        let sampling = Sampling::Random {
            per_image: 50,
            seed: 7,
        };
        let a = sampling.positions(3, 100, 60);
        assert_eq!(a, sampling.positions(3, 100, 60));
        assert_eq!(a.len(), 50);
        assert!(a.iter().all(|&(r, c)| r <= 20 && c <= 60));
        assert_ne!(
            a,
            sampling.positions(4, 100, 60),
            "streams differ per picture"
        );
        let other_seed = Sampling::Random {
            per_image: 50,
            seed: 8,
        };
        assert_ne!(a, other_seed.positions(3, 100, 60));
    }

    #[test]
    fn random_positions_reach_both_extremes() {
        let sampling = Sampling::Random {
            per_image: 2000,
            seed: 1,
        };
        let pos = sampling.positions(0, 45, 43);
        assert!(pos.iter().any(|&(r, _)| r == 0) && pos.iter().any(|&(r, _)| r == 3));
        assert!(pos.iter().any(|&(_, c)| c == 0) && pos.iter().any(|&(_, c)| c == 5));
    }

    #[test]
    fn dense_grid_covers_every_fitting_position() {
        let sampling = Sampling::Dense { stride: 8 };
        let pos = sampling.positions(0, 57, 48);
        // rows 0, 8 (8 + 40 = 48 fits); cols 0, 8, 16 (16 + 40 = 56 <= 57)
        assert_eq!(pos, vec![(0, 0), (0, 8), (0, 16), (8, 0), (8, 8), (8, 16)]);
        assert!(sampling.is_cell_aligned());
        assert!(!Sampling::Dense { stride: 12 }.is_cell_aligned());
    }

    #[test]
    fn too_small_images_have_no_patches() {
        assert!(Sampling::default().positions(0, 39, 100).is_empty());
        assert!(
            Sampling::Dense { stride: 8 }
                .positions(0, 100, 39)
                .is_empty()
        );
    }
}
