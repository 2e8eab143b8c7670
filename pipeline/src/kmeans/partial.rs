//! Partial sums of the map step, their aggregation, and the centroid update.
//!
//! [`Partial::merge`] is the one place partial sums are added together, so the single-node engine
//! and the cluster's aggregation stages reduce with the same arithmetic; the order in which
//! partials are merged is fixed by their callers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::assign::Centroids;
use crate::partition::Matrix;

/// Per-centroid sums (f64), counts and the inertia of a set of assigned vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    k: usize,
    dims: usize,
    /// `k x dims` sums of the vectors assigned to each centroid.
    pub sums: Vec<f64>,
    /// Vectors assigned to each centroid.
    pub counts: Vec<u64>,
    /// Sum of squared distances to the assigned centroids.
    pub inertia: f64,
}

impl Partial {
    /// An empty partial for `k` centroids of `dims` values.
    pub fn new(k: usize, dims: usize) -> Self {
        Self {
            k,
            dims,
            sums: vec![0.0; k * dims],
            counts: vec![0; k],
            inertia: 0.0,
        }
    }

    /// Number of centroids.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Values per centroid.
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Total vectors counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds assigned vectors: row `i` of `x` goes to centroid `labels[i]` at distance `dist[i]`.
    pub fn accumulate(&mut self, x: Matrix<'_>, labels: &[u32], dist: &[f32]) {
        for (i, (&label, &d)) in labels.iter().zip(dist).enumerate() {
            let label = label as usize;
            let sum = &mut self.sums[label * self.dims..][..self.dims];
            for (s, &v) in sum.iter_mut().zip(x.row(i)) {
                *s += f64::from(v);
            }
            self.counts[label] += 1;
            self.inertia += f64::from(d);
        }
    }

    /// Adds `other` into `self`.
    ///
    /// # Panics
    /// If the shapes differ.
    pub fn merge(&mut self, other: &Partial) {
        assert_eq!(
            (self.k, self.dims),
            (other.k, other.dims),
            "partials of different shapes"
        );
        for (a, b) in self.sums.iter_mut().zip(&other.sums) {
            *a += b;
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.inertia += other.inertia;
    }
}

/// Relative size of the symmetric perturbation applied when splitting a cluster (faiss's value).
const SPLIT_EPS: f32 = 1.0 / 1024.0;

/// New centroids from aggregated sums: `sum / count`, with empty clusters re-seeded by splitting.
///
/// An empty cluster takes a copy of a populous one, chosen with probability proportional to
/// `count - 1` by a generator seeded from `(seed, iteration)`, and the two are pushed apart by a
/// symmetric relative perturbation of 1/1024 (as faiss does); the donor's count is halved for the
/// next choice. Returns the centroids and the number of splits.
pub fn update(partial: &Partial, seed: u64, iteration: u64) -> (Centroids, usize) {
    let (k, d) = (partial.k, partial.dims);
    let mut counts = partial.counts.clone();
    let mut data = vec![0f32; k * d];
    for j in 0..k {
        if counts[j] > 0 {
            let inv = 1.0 / counts[j] as f64;
            for (c, &s) in data[j * d..][..d]
                .iter_mut()
                .zip(&partial.sums[j * d..][..d])
            {
                *c = (s * inv) as f32;
            }
        }
    }
    let n: u64 = counts.iter().sum();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(iteration);
    let mut splits = 0;
    for empty in 0..k {
        if counts[empty] > 0 {
            continue;
        }
        // A donor exists while some cluster holds two or more vectors.
        if counts.iter().all(|&c| c < 2) {
            break;
        }
        let denom = n.saturating_sub(k as u64).max(1) as f64;
        let mut donor = 0;
        loop {
            let p = counts[donor].saturating_sub(1) as f64 / denom;
            if rng.random::<f64>() < p {
                break;
            }
            donor = (donor + 1) % k;
        }
        let (src, dst) = (donor * d, empty * d);
        for i in 0..d {
            let v = data[src + i];
            let (up, down) = (v * (1.0 + SPLIT_EPS), v * (1.0 - SPLIT_EPS));
            if i % 2 == 0 {
                data[dst + i] = up;
                data[src + i] = down;
            } else {
                data[dst + i] = down;
                data[src + i] = up;
            }
        }
        counts[empty] = counts[donor] / 2;
        counts[donor] -= counts[empty];
        splits += 1;
    }
    (Centroids::new(data, d), splits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn merge_is_exact_on_integers_in_any_order(parts in proptest::collection::vec(proptest::collection::vec(0u8..9, 6), 1..8)) {
            // Integer-valued sums are exact in f64, so any merge order gives identical results;
            // that the merged partial equals one built from all vectors is the invariant.
            let make = |rows: &[Vec<u8>]| {
                let mut p = Partial::new(2, 3);
                for row in rows {
                    let v: Vec<f32> = row[..3].iter().map(|&b| f32::from(b)).collect();
                    p.accumulate(Matrix::dense(&v, 3), &[u32::from(row[3] % 2)], &[f32::from(row[4])]);
                }
                p
            };
            let whole = make(&parts);
            let mut forward = Partial::new(2, 3);
            for row in &parts {
                forward.merge(&make(std::slice::from_ref(row)));
            }
            let mut backward = Partial::new(2, 3);
            for row in parts.iter().rev() {
                backward.merge(&make(std::slice::from_ref(row)));
            }
            prop_assert_eq!(&forward, &whole);
            prop_assert_eq!(&backward, &whole);
        }
    }

    #[test]
    fn update_divides_and_splits_empty_clusters_deterministically() {
        let mut p = Partial::new(3, 2);
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        p.accumulate(Matrix::dense(&x, 2), &[0, 0, 2], &[0.0, 0.0, 0.0]);
        let (c, splits) = update(&p, 5, 1);
        assert_eq!(splits, 1);
        // Cluster 2 has one vector, so cluster 0 (two vectors) is the only possible donor.
        assert_eq!(c.row(2), &[5.0, 6.0]);
        let e = SPLIT_EPS;
        assert_eq!(c.row(0), &[2.0 * (1.0 - e), 3.0 * (1.0 + e)]);
        assert_eq!(c.row(1), &[2.0 * (1.0 + e), 3.0 * (1.0 - e)]);
        assert_eq!(update(&p, 5, 1), (c, 1));
    }

    #[test]
    fn update_without_donors_leaves_clusters_empty() {
        let mut p = Partial::new(3, 1);
        p.accumulate(Matrix::dense(&[1.0, 2.0], 1), &[0, 1], &[0.0, 0.0]);
        let (c, splits) = update(&p, 0, 0);
        assert_eq!(splits, 0);
        assert_eq!(c.as_slice(), &[1.0, 2.0, 0.0]);
    }
}
