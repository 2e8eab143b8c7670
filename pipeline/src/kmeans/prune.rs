//! Exact pruned assignment with Hamerly's bounds (Hamerly 2010), on top of the GEMM kernel.
//!
//! Every vector keeps its label and a lower bound `l` on the distance to its second-nearest
//! centroid. Each iteration, with `s_j` half the distance from centroid `j` to its nearest other
//! centroid and `drift_j` how far centroid `j` moved:
//!
//! 1. `l -= max drift` (the second-largest for the vector whose own centroid moved most);
//! 2. the exact distance `u` to the current label is computed for every vector (O(n d); it is also
//!    the vector's contribution to the inertia);
//! 3. when `u + slack <= max(s_label, l)`, no other centroid can be closer: the label stays;
//! 4. the remaining vectors are gathered into a compact block and assigned in full by the blocked
//!    GEMM, which also renews their `l`.
//!
//! `slack` (1e-3 relative plus 1e-6 absolute) is far wider than the rounding error of the GEMM's
//! distance expansion, so a label is kept only where the full pass would choose it too; labels
//! can differ from the full pass only between centroids at the same distance to float precision.

use super::assign::{AssignScratch, Centroids, assign_top2, dist2};
use crate::partition::Matrix;

const SLACK_RELATIVE: f32 = 1e-3;
const SLACK_ABSOLUTE: f32 = 1e-6;

/// Bounds of the vectors of one map unit.
#[derive(Debug, Clone, Default)]
pub struct UnitBounds {
    labels: Vec<u32>,
    lower: Vec<f32>,
    ready: bool,
}

/// Per-iteration facts about the centroids that the bounds need.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// Half the distance from each centroid to its nearest other centroid.
    half_separation: Vec<f32>,
    /// How far each centroid moved since the previous iteration (empty on the first).
    drift: Vec<f32>,
    max_drift: (usize, f32),
    second_drift: f32,
}

impl Geometry {
    /// Geometry of `current` centroids that moved from `previous` (if any).
    pub fn new(current: &Centroids, previous: Option<&Centroids>) -> Self {
        let k = current.k();
        let all = Matrix::dense(current.as_slice(), current.dims());
        let (mut labels, mut dist, mut second) = (vec![0u32; k], vec![0f32; k], vec![0f32; k]);
        // Each centroid's nearest is itself (distance 0): the second-nearest is the nearest other.
        assign_top2(
            all,
            current,
            &mut AssignScratch::default(),
            &mut labels,
            &mut dist,
            &mut second,
        );
        let half_separation = second.iter().map(|&d2| 0.5 * d2.sqrt()).collect();
        let drift: Vec<f32> = match previous {
            Some(prev) if prev.k() == k => (0..k)
                .map(|j| dist2(current.row(j), prev.row(j)).sqrt())
                .collect(),
            _ => Vec::new(),
        };
        let mut max_drift = (0, 0f32);
        let mut second_drift = 0f32;
        for (j, &d) in drift.iter().enumerate() {
            if d > max_drift.1 {
                second_drift = max_drift.1;
                max_drift = (j, d);
            } else if d > second_drift {
                second_drift = d;
            }
        }
        Self {
            half_separation,
            drift,
            max_drift,
            second_drift,
        }
    }
}

/// Scratch of one pruned step.
#[derive(Debug, Default)]
pub struct PruneScratch {
    assign: AssignScratch,
    gathered: Vec<f32>,
    dirty: Vec<usize>,
    labels: Vec<u32>,
    dist: Vec<f32>,
    second: Vec<f32>,
}

impl UnitBounds {
    /// Assigns the vectors of `x`, writing `labels` and squared distances `dist`; returns how many
    /// vectors kept their label without a full search.
    pub fn step(
        &mut self,
        x: Matrix<'_>,
        centroids: &Centroids,
        geometry: &Geometry,
        scratch: &mut PruneScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) -> usize {
        let n = x.rows();
        if !self.ready || geometry.drift.is_empty() {
            self.labels.resize(n, 0);
            self.lower.resize(n, 0.0);
            scratch.second.resize(n, 0.0);
            assign_top2(
                x,
                centroids,
                &mut scratch.assign,
                labels,
                dist,
                &mut scratch.second[..n],
            );
            self.labels.copy_from_slice(labels);
            for (l, &s) in self.lower.iter_mut().zip(&scratch.second[..n]) {
                *l = s.sqrt();
            }
            self.ready = true;
            return 0;
        }
        scratch.dirty.clear();
        let (far, far_drift) = geometry.max_drift;
        for i in 0..n {
            let label = self.labels[i] as usize;
            self.lower[i] -= if label == far {
                geometry.second_drift
            } else {
                far_drift
            };
            let d2 = dist2(x.row(i), centroids.row(label));
            let upper = d2.sqrt();
            let bound = geometry.half_separation[label].max(self.lower[i]);
            if upper + SLACK_RELATIVE * (upper + bound) + SLACK_ABSOLUTE <= bound {
                labels[i] = label as u32;
                dist[i] = d2;
            } else {
                scratch.dirty.push(i);
            }
        }
        let kept = n - scratch.dirty.len();
        if scratch.dirty.is_empty() {
            return kept;
        }
        let (m, d) = (scratch.dirty.len(), x.dims());
        scratch.gathered.clear();
        for &i in &scratch.dirty {
            scratch.gathered.extend_from_slice(x.row(i));
        }
        scratch.labels.resize(m, 0);
        scratch.dist.resize(m, 0.0);
        scratch.second.resize(m, 0.0);
        assign_top2(
            Matrix::dense(&scratch.gathered, d),
            centroids,
            &mut scratch.assign,
            &mut scratch.labels,
            &mut scratch.dist,
            &mut scratch.second,
        );
        for (slot, &i) in scratch.dirty.iter().enumerate() {
            labels[i] = scratch.labels[slot];
            self.labels[i] = scratch.labels[slot];
            self.lower[i] = scratch.second[slot].sqrt();
            // The exact distance, as for kept vectors, so inertia does not depend on the path.
            dist[i] = dist2(x.row(i), centroids.row(scratch.labels[slot] as usize));
        }
        kept
    }
}
