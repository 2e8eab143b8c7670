//! The map step of the mixture and the PCA: sums over every vector that add up like k-means'
//! partial sums, so one process, TCP workers and MPI ranks run it through the same broadcast,
//! map and three-stage aggregation and get the same bits.
//!
//! A [`Statistic`] says what is summed. Its sums are a table of `rows x width` values laid out
//! like k-means' centroids: a row per component of the mixture (`Σγ`, `Σγy`, `Σγy²` of the
//! projected vectors `y`, the row's count the vectors whose most likely component it is), or a
//! row per input dimension for the covariance (`Σx_i`, then `Σx_i x_j`; every count the number
//! of vectors). Each map unit (at most [`UNIT_ROWS`] rows of a partition) is summed in `f64`
//! by one thread in row order, then rounded once to fixed point and added as an exact `i64`;
//! the log-likelihood is kept per unit and added in key order. So the sums do not depend on
//! threads, members or the order of merges.
//!
//! Each column has a scale of its own ([`Statistic::scales`]): a count of responsibilities
//! (`Σγ`, at most 1 a vector), a first moment and a second moment grow as 1, `|x|` and `x²`,
//! and a scale shared by all of them would let the largest squared value round the counts to
//! nothing. With one scale a column, `x` and `c·x` give the same posteriors for any `c` the
//! readers accept (bit for bit when `c` is a power of two), on every engine alike.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::error::MixtureError;
use super::gmm::Gmm;
use super::linalg::{View, mul};
use super::pca::Pca;
use super::sums::Moments;
use crate::kmeans::partial::unit_key;
use crate::kmeans::{Partial, Shard, UNIT_ROWS};
use crate::partition::Rows;

/// What a map step sums.
#[derive(Debug, Clone, PartialEq)]
pub enum Statistic {
    /// `Σx` and `Σxxᵀ` of vectors of `dims` values.
    Covariance {
        /// Values per vector.
        dims: usize,
    },
    /// One EM step of `gmm` over the vectors projected by `pca`.
    Mixture {
        /// The projection.
        pca: Pca,
        /// The mixture the responsibilities come from.
        gmm: Gmm,
    },
}

/// A [`Statistic`]'s shape, as it travels in a command (its values follow as a broadcast).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    /// Values per vector.
    pub dims: u64,
    /// Projected dimensions (0: the covariance).
    pub projected: u64,
    /// Mixture components (0: the covariance).
    pub components: u64,
}

impl Statistic {
    /// Its shape.
    pub fn head(&self) -> Head {
        match self {
            Self::Covariance { dims } => Head {
                dims: *dims as u64,
                projected: 0,
                components: 0,
            },
            Self::Mixture { pca, gmm } => Head {
                dims: pca.input_dims() as u64,
                projected: pca.output_dims() as u64,
                components: gmm.components() as u64,
            },
        }
    }

    /// Rows of its table and values per row.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Self::Covariance { dims } => (*dims, dims + 1),
            Self::Mixture { pca, gmm } => (gmm.components(), 1 + 2 * pca.output_dims()),
        }
    }

    /// Its parameters in the order [`Statistic::from_values`] reads them: the PCA's mean,
    /// components, variances and total variance, then the mixture's weights, means and variances (nothing for
    /// the covariance).
    pub fn values(&self) -> Vec<f64> {
        match self {
            Self::Covariance { .. } => Vec::new(),
            Self::Mixture { pca, gmm } => {
                let mut v = Vec::with_capacity(values_len(&self.head()).unwrap_or(0));
                v.extend_from_slice(&pca.mean);
                v.extend_from_slice(&pca.components);
                v.extend_from_slice(&pca.variances);
                v.push(pca.total_variance);
                v.extend_from_slice(&gmm.weights);
                v.extend_from_slice(&gmm.means);
                v.extend_from_slice(&gmm.variances);
                v
            }
        }
    }

    /// The statistic of shape `head` whose parameters are `values` (checked: lengths, finite
    /// values, positive variances and weights).
    pub fn from_values(head: Head, values: &[f64]) -> Result<Self, MixtureError> {
        let want = values_len(&head).ok_or(MixtureError::Shape {
            dims: head.dims,
            projected: head.projected,
            components: head.components,
        })?;
        if values.len() != want {
            return Err(MixtureError::Values {
                got: values.len(),
                want,
            });
        }
        let (dims, d, k) = (
            head.dims as usize,
            head.projected as usize,
            head.components as usize,
        );
        if d == 0 && k == 0 {
            return Ok(Self::Covariance { dims });
        }
        let mut rest = values;
        let mut take = |n: usize| {
            let (a, b) = rest.split_at(n);
            rest = b;
            a.to_vec()
        };
        let pca = Pca::new(take(dims), take(d * dims), take(d), take(1)[0])?;
        let gmm = Gmm::new(take(k), take(k * d), take(k * d))?;
        Ok(Self::Mixture { pca, gmm })
    }

    /// The largest magnitude a vector adds to each column of a row, for vectors whose values
    /// lie within `max_abs`: for the covariance `max_abs` (`Σx_i`) then `max_abs²` (`Σx_i x_j`);
    /// for the mixture 1 (`Σγ`), then `b` (`Σγy`) and `b²` (`Σγy²`), where
    /// `|y_j| <= |x - mean| <= sqrt(dims) max_abs + |mean| = b` (the components are unit
    /// vectors), with 1% to spare for rounding.
    pub fn column_bounds(&self, max_abs: f32) -> Vec<f64> {
        let a = f64::from(max_abs);
        let (_, width) = self.shape();
        match self {
            Self::Covariance { .. } => {
                let mut bounds = vec![a * a; width];
                bounds[0] = a;
                bounds
            }
            Self::Mixture { pca, .. } => {
                let mean = pca.mean.iter().map(|m| m * m).sum::<f64>().sqrt();
                let b = ((pca.input_dims() as f64).sqrt() * a + mean) * 1.01;
                let d = pca.output_dims();
                let mut bounds = vec![1.0];
                bounds.extend(std::iter::repeat_n(b, d));
                bounds.extend(std::iter::repeat_n(b * b, d));
                bounds
            }
        }
    }

    /// The fixed-point scale of each column ([`moment_scale`] of its bound), for `n` vectors
    /// within `max_abs`.
    pub fn scales(&self, max_abs: f32, n: u64) -> Vec<i32> {
        (self.column_bounds(max_abs).into_iter())
            .map(|bound| moment_scale(bound, n))
            .collect()
    }
}

/// Values of a statistic of shape `head` (`None`: not a shape, or too large to count).
pub fn values_len(head: &Head) -> Option<usize> {
    let (dims, d, k) = (
        usize::try_from(head.dims).ok()?,
        usize::try_from(head.projected).ok()?,
        usize::try_from(head.components).ok()?,
    );
    match (d, k) {
        (0, 0) => (dims > 0).then_some(0),
        (0, _) | (_, 0) => None,
        _ if d > dims => None,
        _ => {
            let pca = dims
                .checked_add(d.checked_mul(dims)?)?
                .checked_add(d)?
                .checked_add(1)?;
            pca.checked_add(k.checked_mul(d.checked_mul(2)?.checked_add(1)?)?)
        }
    }
}

/// The fixed-point scale for sums of `n` vectors each adding at most `bound` to a value: a map
/// unit's sum stays below `2^50` when scaled and any total below `2^62`.
pub fn moment_scale(bound: f64, n: u64) -> i32 {
    let exponent = |v: f64| {
        if v > 0.0 && v.is_finite() {
            v.log2().ceil() as i32
        } else {
            0
        }
    };
    let count_bits = (64 - n.max(1).leading_zeros()) as i32;
    (62 - count_bits - exponent(bound)).min(50 - exponent(bound * UNIT_ROWS as f64))
}

/// What the engines the mixture runs on supply: one process, MPI ranks, TCP workers.
pub trait Engine {
    /// What goes wrong on this engine.
    type Error;

    /// The sums of `statistic` over every vector (step `step` of the run, counted from 1).
    fn moments(&mut self, step: u64, statistic: &Statistic) -> Result<Moments, Self::Error>;

    /// The rows of the global `indices`, in that order.
    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, Self::Error>;

    /// Vectors and values per vector.
    fn shape(&self) -> (u64, usize);
}

/// The largest and smallest column scale a step may ask for: far past any bound a reader lets
/// through, short of what makes `2^scale` infinite or zero.
pub const SCALE_RANGE: std::ops::RangeInclusive<i32> = -1000..=1000;

/// Whether `scales` are a step's column scales for `statistic` (one a column, in
/// [`SCALE_RANGE`]).
pub fn scales_fit(statistic: &Statistic, scales: &[i32]) -> bool {
    scales.len() == statistic.shape().1 && scales.iter().all(|s| SCALE_RANGE.contains(s))
}

/// The map step over `shards`: one partial per rayon split (merge them for stage 1), with the
/// log-likelihood of every unit; column `c` is rounded at `scales[c]` ([`Statistic::scales`];
/// the partials' own scale is 0).
pub fn map(shards: &[Shard<'_>], statistic: &Statistic, scales: &[i32]) -> Vec<Partial> {
    let (rows, width) = statistic.shape();
    let units: Vec<(u64, Rows<'_>)> = shards
        .iter()
        .flat_map(|s| {
            let n = s.rows.rows();
            (0..n.div_ceil(UNIT_ROWS)).map(move |u| {
                let end = ((u + 1) * UNIT_ROWS).min(n);
                (
                    unit_key(s.index, u as u32),
                    s.rows.slice(u * UNIT_ROWS, end),
                )
            })
        })
        .collect();
    let prepared = match statistic {
        Statistic::Mixture { gmm, .. } => Some(gmm.prepared()),
        Statistic::Covariance { .. } => None,
    };
    let muls: Vec<f64> = scales.iter().map(|&s| 2f64.powi(s)).collect();
    units
        .par_iter()
        .fold(
            || (Partial::new(rows, width, 0), Scratch::default()),
            |(mut partial, mut scratch), &(key, x)| {
                let unit = match (statistic, &prepared) {
                    (Statistic::Mixture { pca, .. }, Some(p)) => {
                        scratch.mixture(x, pca, p, rows, width)
                    }
                    _ => scratch.covariance(x, width),
                };
                let mut add = Partial::from_dense(width, 0, unit.counts, fixed(&unit.sums, &muls));
                add.units.push((key, unit.log_likelihood));
                partial.merge(&add);
                (partial, scratch)
            },
        )
        .map(|(p, _)| p)
        .collect()
}

/// [`map`] merged into one partial: the sums of `shards`.
pub fn map_merged(shards: &[Shard<'_>], statistic: &Statistic, scales: &[i32]) -> Partial {
    let (rows, width) = statistic.shape();
    Partial::sum(map(shards, statistic, scales), rows, width, 0)
}

/// `round(v * mul)` of each value, `mul` its column's (`muls` a row's worth).
fn fixed(values: &[f64], muls: &[f64]) -> Vec<i64> {
    (values.iter().zip(muls.iter().cycle()))
        .map(|(&v, &mul)| (v * mul).round() as i64)
        .collect()
}

/// One unit's sums in `f64`, before rounding.
struct UnitSums {
    counts: Vec<u64>,
    sums: Vec<f64>,
    log_likelihood: f64,
}

/// A thread's buffers, kept across its units.
#[derive(Default)]
struct Scratch {
    decoded: Vec<f32>,
    x: Vec<f64>,
    y: Vec<f64>,
    y2: Vec<f64>,
    joint: Vec<f64>,
}

impl Scratch {
    /// The unit's rows as `f64`s, `u x dims`, in `self.x`.
    fn load(&mut self, x: Rows<'_>) -> usize {
        let m = x.to_f32(&mut self.decoded);
        let (u, dims) = (m.rows(), m.dims());
        self.x.clear();
        for r in 0..u {
            self.x.extend(m.row(r).iter().map(|&v| f64::from(v)));
        }
        debug_assert_eq!(self.x.len(), u * dims);
        u
    }

    /// Row `i`: `Σx_i`, then `Σx_i x_j` for every `j`; every count the unit's vectors.
    fn covariance(&mut self, x: Rows<'_>, width: usize) -> UnitSums {
        let dims = width - 1;
        let u = self.load(x);
        let mut gram = vec![0f64; dims * dims];
        let view = View::rows(&self.x, u, dims);
        mul(view.t(), view, &mut gram, false);
        let mut sums = vec![0f64; dims * width];
        for i in 0..dims {
            let row = &mut sums[i * width..(i + 1) * width];
            row[0] = (0..u).map(|r| self.x[r * dims + i]).sum();
            row[1..].copy_from_slice(&gram[i * dims..(i + 1) * dims]);
        }
        UnitSums {
            counts: vec![u as u64; dims],
            sums,
            log_likelihood: 0.0,
        }
    }

    /// Row `k`: `Σγ_k`, `Σγ_k y`, `Σγ_k y²`; its count the vectors most likely from `k`.
    fn mixture(
        &mut self,
        x: Rows<'_>,
        pca: &Pca,
        prepared: &super::gmm::Prepared,
        k: usize,
        width: usize,
    ) -> UnitSums {
        let d = pca.output_dims();
        let u = self.load(x);
        pca.project_into(&mut self.x, u, &mut self.y);
        self.y2.clear();
        self.y2.extend(self.y.iter().map(|v| v * v));
        let rows = prepared.posteriors(&self.y, &self.y2, u, &mut self.joint);
        let mut counts = vec![0u64; k];
        for &best in &rows.best {
            counts[best] += 1;
        }
        let gamma = View::rows(&self.joint, u, k).t();
        let mut first = vec![0f64; k * d];
        let mut second = vec![0f64; k * d];
        mul(gamma, View::rows(&self.y, u, d), &mut first, false);
        mul(gamma, View::rows(&self.y2, u, d), &mut second, false);
        let mut sums = vec![0f64; k * width];
        for c in 0..k {
            let row = &mut sums[c * width..(c + 1) * width];
            row[0] = (0..u).map(|r| self.joint[r * k + c]).sum();
            row[1..1 + d].copy_from_slice(&first[c * d..(c + 1) * d]);
            row[1 + d..].copy_from_slice(&second[c * d..(c + 1) * d]);
        }
        UnitSums {
            counts,
            sums,
            log_likelihood: rows.log_likelihood.iter().sum(),
        }
    }
}

/// The engine of one process: the map on this machine's threads over `shards`.
#[derive(Debug)]
pub struct Local<'a> {
    shards: Vec<Shard<'a>>,
    max_abs: f32,
    n: u64,
    dims: usize,
}

impl<'a> Local<'a> {
    /// The engine over `shards` (checked: one dims, finite values, at least one vector).
    pub fn new(shards: Vec<Shard<'a>>) -> Result<Self, MixtureError> {
        let parts: Vec<Rows<'_>> = shards.iter().map(|s| s.rows).collect();
        let dims = crate::kmeans::check_dims(&parts).map_err(MixtureError::Data)?;
        let max_abs = parts
            .iter()
            .map(|p| crate::kmeans::max_abs(*p))
            .fold(0f32, |a, b| if b.is_nan() { b } else { a.max(b) });
        if !max_abs.is_finite() {
            return Err(MixtureError::NonFinite);
        }
        let n = parts.iter().map(|p| p.rows() as u64).sum();
        Ok(Self {
            shards,
            max_abs,
            n,
            dims,
        })
    }
}

impl Engine for Local<'_> {
    type Error = MixtureError;

    fn moments(&mut self, _step: u64, statistic: &Statistic) -> Result<Moments, MixtureError> {
        let scales = statistic.scales(self.max_abs, self.n);
        Ok(Moments::of(
            &map_merged(&self.shards, statistic, &scales),
            scales,
        ))
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, MixtureError> {
        let parts: Vec<_> = self.shards.iter().map(|s| s.rows).collect();
        let n = self.n as usize;
        let mut out = Vec::with_capacity(indices.len() * self.dims);
        for &i in indices {
            if i >= n {
                return Err(MixtureError::TooFewVectors { k: i + 1, n });
            }
            crate::kmeans::push_global_row(&parts, i, &mut out);
        }
        Ok(out)
    }

    fn shape(&self) -> (u64, usize) {
        (self.n, self.dims)
    }
}
