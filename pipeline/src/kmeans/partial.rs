//! Partial sums of the map step, their aggregation, and the centroid update.
//!
//! Sums are kept in **fixed point**: a value `v` enters as the integer `round(v * 2^scale)` and
//! is added with exact `i64` arithmetic. Integer addition is associative, so merging partials in
//! any grouping or order (per thread, per node, per range of centroids, after a worker failed
//! and its partitions moved) gives bit-identical sums: the single-node engine and the cluster
//! produce the same centroids for the same seed and partition layout, whatever the thread and
//! worker counts. [`fixed_scale`] picks the largest scale at which no sum of the run can
//! overflow; the absolute resolution `2^-scale` is far below an f32 ulp of the data (for HOG
//! values and 10 million vectors, 2^-37 ≈ 7e-12).
//!
//! The inertia is a sum of floats, so it is kept per map unit (keyed by partition and unit) and
//! added in key order only when asked for ([`Partial::inertia`]); merging concatenates.

use std::borrow::Cow;
use std::ops::Range;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::assign::Centroids;
use crate::partition::{Codes, Rows};
use crate::store::u8_value;

/// `1.5 * 2^52`: adding it to an f64 of magnitude below `2^51` rounds to an integer (nearest,
/// ties to even) that the low bits of the result hold.
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;
/// Magnitude bound (as a power of two) of one fixed-point value, below the rounding trick's 2^51.
const MAX_VALUE_BITS: i32 = 50;
/// Magnitude bound (as a power of two) of any fixed-point sum, below `i64::MAX`.
const MAX_SUM_BITS: i32 = 62;

/// The fixed-point scale for `n` vectors whose values lie in `[-max_abs, max_abs]`: every value
/// is below `2^50` and every sum of up to `n` values below `2^62` after scaling.
///
/// `max_abs` must be finite; zero (all-zero data) is allowed.
pub fn fixed_scale(max_abs: f32, n: u64) -> i32 {
    let exponent = if max_abs > 0.0 {
        f64::from(max_abs).log2().ceil() as i32
    } else {
        0
    };
    let count_bits = (64 - n.max(1).leading_zeros()) as i32;
    (MAX_SUM_BITS - count_bits).min(MAX_VALUE_BITS) - exponent
}

/// Bins of [`magnitudes`]: one per f32 exponent.
pub const MAGNITUDE_BINS: usize = 256;

/// How many nonzero values of `x` fall at each binary exponent (bin = the f32's biased exponent
/// field). Histograms of several partitions add up; [`check_range`] reads the median from them.
pub fn magnitudes(x: Rows<'_>) -> Vec<u64> {
    let mut bins = vec![0u64; MAGNITUDE_BINS];
    let mut add = |v: f32, count: u64| {
        if v != 0.0 {
            bins[((v.to_bits() >> 23) & 0xff) as usize] += count;
        }
    };
    match x {
        Rows::F32(m) => (0..m.rows()).for_each(|r| m.row(r).iter().for_each(|&v| add(v, 1))),
        Rows::U8(c) => {
            for (byte, count) in byte_counts(c).into_iter().enumerate() {
                add(u8_value(byte as u8), count);
            }
        }
    }
    bins
}

/// How many times each code occurs in `c`.
fn byte_counts(c: Codes<'_>) -> [u64; 256] {
    let mut counts = [0u64; 256];
    for r in 0..c.rows() {
        for &b in c.row(r) {
            counts[usize::from(b)] += 1;
        }
    }
    counts
}

/// Adds histogram `b` into `a` (an empty `a` takes `b`).
pub fn add_bins(mut a: Vec<u64>, b: &[u64]) -> Vec<u64> {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    add_sums(&mut a, b);
    a
}

/// Data whose values span a range the exact fixed-point sums cannot hold at f32 precision.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error(
    "the vectors span too wide a range for exact sums: the largest magnitude is {max_abs:e} while \
     the median magnitude is about {median:e}; remove the outlier or rescale the features"
)]
pub struct RangeError {
    /// Largest absolute value.
    pub max_abs: f32,
    /// Median magnitude (a power of two).
    pub median: f32,
}

/// Whether fixed-point sums at `scale` keep the data's median magnitude exact to f32 precision
/// (`magnitudes` summed over all the data): a typical value `v` must have `2^-scale <= ulp(v)`.
/// One outlier many orders of magnitude above the rest (a 1e30 among HOG values) forces a scale
/// at which the ordinary values would round to nothing; such data is refused rather than
/// clustered wrongly. `max_abs` is the data's largest magnitude (for the error).
pub fn check_range(scale: i32, magnitudes: &[u64], max_abs: f32) -> Result<(), RangeError> {
    let nonzero: u64 = magnitudes.iter().sum();
    if nonzero == 0 {
        return Ok(());
    }
    let mut seen = 0;
    let median = magnitudes
        .iter()
        .position(|&c| {
            seen += c;
            seen * 2 >= nonzero
        })
        .unwrap_or(0) as i32;
    // Values in bin b lie in [2^(b-127), 2^(b-126)); their ulp is at least 2^(b-150).
    if median - 150 < -scale {
        Err(RangeError {
            max_abs,
            median: 2f32.powi(median - 127),
        })
    } else {
        Ok(())
    }
}

/// Largest absolute value of `x` (NaN if any value is NaN, infinity if any is infinite).
pub fn max_abs(x: Rows<'_>) -> f32 {
    let x = match x {
        Rows::F32(m) => m,
        Rows::U8(c) => {
            let top = byte_counts(c).iter().rposition(|&n| n > 0).unwrap_or(0);
            return u8_value(top as u8);
        }
    };
    let mut m = 0f32;
    for r in 0..x.rows() {
        for &v in x.row(r) {
            // `max` ignores NaN; propagate it so callers can refuse the data.
            if v.is_nan() {
                return f32::NAN;
            }
            m = m.max(v.abs());
        }
    }
    m
}

/// Key of a map unit's inertia: partition index and unit index within the partition.
pub fn unit_key(partition: u32, unit: u32) -> u64 {
    (u64::from(partition) << 32) | u64::from(unit)
}

/// A map unit handed to accumulation: its key, its rows, their labels and squared distances.
pub type UnitRows<'a> = (u64, Rows<'a>, &'a [u32], &'a [f32]);

/// Per-centroid sums (fixed point), counts and per-unit inertia of a set of assigned vectors.
///
/// Held **dense** (`k` counts and `k x dims` sums) or **sparse** (only the centroids that hold
/// vectors, in increasing id, each with its count and sums): a map task of fewer vectors than
/// half the centroids (the paper's shape: 742 vectors against a million words) keeps, merges
/// and ships only what it touched ([`Partial::sparse_of`]). Both forms hold the same numbers,
/// and equality compares the numbers, not the form.
#[derive(Debug, Clone)]
pub struct Partial {
    k: usize,
    dims: usize,
    scale: i32,
    table: Table,
    /// Inertia of each map unit: `(unit_key, sum of squared distances in row order)`.
    pub units: Vec<(u64, f64)>,
}

/// The sums and counts of a [`Partial`].
#[derive(Debug, Clone)]
enum Table {
    /// Every centroid: `k` counts and `k x dims` sums (a centroid without vectors has zeros).
    Dense { counts: Vec<u64>, sums: Vec<i64> },
    /// The centroids with vectors: `ids` strictly increasing, every count above zero, `sums`
    /// `ids.len() x dims`.
    Sparse {
        ids: Vec<u32>,
        counts: Vec<u64>,
        sums: Vec<i64>,
    },
}

/// The touched centroids of a range of a [`Partial`]: `(centroid, count, sums)` in increasing
/// centroid order.
pub type Entries<'a> = Box<dyn Iterator<Item = (usize, u64, &'a [i64])> + 'a>;

/// `n` zeros, written rather than mapped: a table from `vec![0; n]` is fresh zero pages that its
/// first `+=` reads and then writes, and each such copy-on-write fault flushes the page from every
/// core's TLB (an interrupt to each): 13% of a pruned-int8 run's samples at k = 16,384
/// (`eval/large_k/choices/profile-partials.txt`). Written pages fault once, locally.
fn written_zeros<T: Copy + Default>(n: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    // Opaque to the optimiser, so allocation and fill are not fused into a zeroed allocation.
    std::hint::black_box(&mut v);
    v.resize(n, T::default());
    v
}

impl Partial {
    /// An empty dense partial for `k` centroids of `dims` values at fixed-point `scale`.
    pub fn new(k: usize, dims: usize, scale: i32) -> Self {
        Self {
            k,
            dims,
            scale,
            table: Table::Dense {
                counts: written_zeros(k),
                sums: written_zeros(k * dims),
            },
            units: Vec::new(),
        }
    }

    /// A dense partial of the given `counts` (one per centroid) and `sums` (`counts.len() x
    /// dims`), without unit inertias.
    ///
    /// # Panics
    /// If the lengths disagree.
    pub fn from_dense(dims: usize, scale: i32, counts: Vec<u64>, sums: Vec<i64>) -> Self {
        assert_eq!(sums.len(), counts.len() * dims, "sums of another shape");
        Self {
            k: counts.len(),
            dims,
            scale,
            table: Table::Dense { counts, sums },
            units: Vec::new(),
        }
    }

    /// A sparse partial of map units `(key, rows, labels, dist)`: the centroids they touched
    /// and nothing else (the numbers [`Partial::accumulate`] would give a dense one).
    pub fn sparse_of(k: usize, dims: usize, scale: i32, units: &[UnitRows<'_>]) -> Self {
        let mut ids: Vec<u32> = units.iter().flat_map(|u| u.2.iter().copied()).collect();
        ids.sort_unstable();
        ids.dedup();
        debug_assert!(ids.last().is_none_or(|&l| (l as usize) < k), "label past k");
        let mul = 2f64.powi(scale);
        let mut counts = vec![0u64; ids.len()];
        let mut sums = vec![0i64; ids.len() * dims];
        for (_, x, labels, _) in units {
            x.for_each_row(|i, row| {
                let at = ids.partition_point(|&id| id < labels[i]);
                add_fixed(&mut sums[at * dims..][..dims], row, mul);
                counts[at] += 1;
            });
        }
        Self {
            k,
            dims,
            scale,
            table: Table::Sparse { ids, counts, sums },
            units: units
                .iter()
                .map(|(key, _, _, dist)| (*key, row_order_sum(dist)))
                .collect(),
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

    /// The fixed-point scale.
    pub fn scale(&self) -> i32 {
        self.scale
    }

    /// Whether only the touched centroids are held.
    pub fn is_sparse(&self) -> bool {
        matches!(self.table, Table::Sparse { .. })
    }

    /// Bytes of the sums and counts as held.
    pub fn table_bytes(&self) -> u64 {
        match &self.table {
            Table::Dense { counts, sums } => (counts.len() * 8 + sums.len() * 8) as u64,
            Table::Sparse { ids, counts, sums } => {
                (ids.len() * 4 + counts.len() * 8 + sums.len() * 8) as u64
            }
        }
    }

    /// Total vectors counted.
    pub fn total(&self) -> u64 {
        match &self.table {
            Table::Dense { counts, .. } | Table::Sparse { counts, .. } => counts.iter().sum(),
        }
    }

    /// Centroids holding at least one vector.
    pub fn touched(&self) -> usize {
        match &self.table {
            Table::Dense { counts, .. } => counts.iter().filter(|&&c| c > 0).count(),
            Table::Sparse { ids, .. } => ids.len(),
        }
    }

    /// Every centroid's count (a copy when sparse).
    pub fn counts(&self) -> Cow<'_, [u64]> {
        match &self.table {
            Table::Dense { counts, .. } => Cow::Borrowed(counts),
            Table::Sparse { .. } => {
                let mut counts = vec![0; self.k];
                self.add_range_to(0..self.k, &mut counts, &mut []);
                Cow::Owned(counts)
            }
        }
    }

    /// Every centroid's sums, `k x dims` (a copy when sparse).
    pub fn sums(&self) -> Cow<'_, [i64]> {
        match &self.table {
            Table::Dense { sums, .. } => Cow::Borrowed(sums),
            Table::Sparse { .. } => {
                let mut sums = vec![0; self.k * self.dims];
                self.add_range_to(0..self.k, &mut [], &mut sums);
                Cow::Owned(sums)
            }
        }
    }

    /// The centroids of `r` that hold vectors, in increasing order, with their counts and sums.
    pub fn entries(&self, r: Range<usize>) -> Entries<'_> {
        let dims = self.dims;
        match &self.table {
            Table::Dense { counts, sums } => Box::new(
                r.filter(move |&j| counts[j] > 0)
                    .map(move |j| (j, counts[j], &sums[j * dims..][..dims])),
            ),
            Table::Sparse { ids, counts, sums } => {
                let lo = ids.partition_point(|&id| (id as usize) < r.start);
                let hi = ids.partition_point(|&id| (id as usize) < r.end);
                Box::new(
                    (lo..hi).map(move |e| (ids[e] as usize, counts[e], &sums[e * dims..][..dims])),
                )
            }
        }
    }

    /// Adds range `r` of the counts and sums into `counts` (`r.len()` values; left alone if
    /// empty) and `sums` (`r.len() x dims`; left alone if empty).
    pub fn add_range_to(&self, r: Range<usize>, counts: &mut [u64], sums: &mut [i64]) {
        let dims = self.dims;
        match &self.table {
            Table::Dense {
                counts: mine,
                sums: my_sums,
            } => {
                add_sums(counts, &mine[r.clone()]);
                add_sums(sums, &my_sums[r.start * dims..r.end * dims]);
            }
            Table::Sparse { .. } => {
                for (j, c, s) in self.entries(r.clone()) {
                    let at = j - r.start;
                    if let Some(count) = counts.get_mut(at) {
                        *count += c;
                    }
                    if let Some(sum) = sums.get_mut(at * dims..(at + 1) * dims) {
                        add_sums(sum, s);
                    }
                }
            }
        }
    }

    /// Sum of squared distances, added unit by unit in key order (so independent of how the
    /// units were grouped).
    pub fn inertia(&self) -> f64 {
        inertia_of(&self.units)
    }

    /// Adds the assigned vectors of map unit `key`: row `i` of `x` goes to centroid `labels[i]`
    /// at squared distance `dist[i]`. (A sparse partial merges the unit as a sparse partial of
    /// its own: build sparse partials with [`Partial::sparse_of`] rather than unit by unit.)
    pub fn accumulate(&mut self, key: u64, x: Rows<'_>, labels: &[u32], dist: &[f32]) {
        let (dims, mul) = (self.dims, 2f64.powi(self.scale));
        match &mut self.table {
            Table::Dense { counts, sums } => {
                x.for_each_row(|i, row| {
                    let label = labels[i] as usize;
                    add_fixed(&mut sums[label * dims..][..dims], row, mul);
                    counts[label] += 1;
                });
                self.units.push((key, row_order_sum(dist)));
            }
            Table::Sparse { .. } => {
                let unit = Self::sparse_of(self.k, dims, self.scale, &[(key, x, labels, dist)]);
                self.merge(&unit);
            }
        }
    }

    /// [`Partial::accumulate`] of many map units `(key, rows, labels, dist)` at once, in
    /// parallel over blocks of centroids (each thread adds the rows labelled with its own block):
    /// the same sums, counts and unit inertias, with one accumulator for all threads.
    pub fn accumulate_units(&mut self, units: &[UnitRows<'_>]) {
        use rayon::prelude::*;
        const BLOCK: usize = 4096;
        let (dims, mul) = (self.dims, 2f64.powi(self.scale));
        let Table::Dense { counts, sums } = &mut self.table else {
            let more = Self::sparse_of(self.k, dims, self.scale, units);
            self.merge(&more);
            return;
        };
        sums.par_chunks_mut(BLOCK * dims.max(1))
            .zip(counts.par_chunks_mut(BLOCK))
            .enumerate()
            .for_each(|(b, (sums, counts))| {
                let lo = b * BLOCK;
                let mut buf = Vec::new();
                for (_, x, labels, _) in units {
                    for (i, &label) in labels.iter().enumerate() {
                        let Some(at) = (label as usize)
                            .checked_sub(lo)
                            .filter(|&at| at < counts.len())
                        else {
                            continue;
                        };
                        add_fixed(&mut sums[at * dims..][..dims], x.row(i, &mut buf), mul);
                        counts[at] += 1;
                    }
                }
            });
        self.units.extend(
            units
                .iter()
                .map(|(key, _, _, dist)| (*key, row_order_sum(dist))),
        );
    }

    /// Adds `other` into `self` (exact: the result does not depend on the order of merges).
    /// Two sparse partials stay sparse while they touch at most half the centroids together;
    /// otherwise the result is dense.
    ///
    /// # Panics
    /// If the shapes or scales differ.
    pub fn merge(&mut self, other: &Partial) {
        assert_eq!(
            (self.k, self.dims, self.scale),
            (other.k, other.dims, other.scale),
            "partials of different shapes"
        );
        let sparse = (self.is_sparse() && other.is_sparse())
            .then(|| add_sparse(&[&*self, other], self.k, self.dims))
            .flatten();
        match sparse {
            Some(table) => self.table = table,
            None => {
                self.densify();
                if let Table::Dense { counts, sums } = &mut self.table {
                    other.add_range_to(0..other.k, counts, sums);
                }
            }
        }
        self.units.extend_from_slice(&other.units);
    }

    /// The sum of `parts` (all for `k` centroids of `dims` at `scale`; none: an empty sparse
    /// partial). Sparse parts that together touch at most half the centroids are added in one
    /// pass into one sparse table (merging them pairwise would copy the growing table once per
    /// part: seconds for 80 map tasks at a million words); otherwise into the first, made dense.
    ///
    /// # Panics
    /// If the shapes or scales differ.
    pub fn sum(parts: Vec<Partial>, k: usize, dims: usize, scale: i32) -> Partial {
        for p in &parts {
            assert_eq!(
                (p.k, p.dims, p.scale),
                (k, dims, scale),
                "partials of different shapes"
            );
        }
        if parts.len() > 2 && parts.iter().all(Partial::is_sparse) {
            let all: Vec<&Partial> = parts.iter().collect();
            if let Some(table) = add_sparse(&all, k, dims) {
                return Partial {
                    k,
                    dims,
                    scale,
                    table,
                    units: parts.iter().flat_map(|p| p.units.iter().copied()).collect(),
                };
            }
        }
        let mut parts = parts.into_iter();
        let Some(mut sum) = parts.next() else {
            return Self::sparse_of(k, dims, scale, &[]);
        };
        for p in parts {
            sum.merge(&p);
        }
        sum
    }

    /// Turns a sparse table dense (a dense one stays as it is).
    fn densify(&mut self) {
        if self.is_sparse() {
            let mut counts = vec![0; self.k];
            let mut sums = vec![0; self.k * self.dims];
            self.add_range_to(0..self.k, &mut counts, &mut sums);
            self.table = Table::Dense { counts, sums };
        }
    }
}

impl PartialEq for Partial {
    /// The same shape, unit inertias, and counts and sums (whether held dense or sparse).
    fn eq(&self, other: &Self) -> bool {
        (self.k, self.dims, self.scale) == (other.k, other.dims, other.scale)
            && self.units == other.units
            && self.entries(0..self.k).eq(other.entries(0..other.k))
    }
}

/// The sparse table of the sum of sparse `parts` (of `k` centroids of `dims`), in one pass
/// over their entries; `None` if together they touch more than half the centroids.
fn add_sparse(parts: &[&Partial], k: usize, dims: usize) -> Option<Table> {
    let mut ids: Vec<u32> = parts
        .iter()
        .flat_map(|p| match &p.table {
            Table::Sparse { ids, .. } => &ids[..],
            Table::Dense { .. } => &[],
        })
        .copied()
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() * 2 > k {
        return None;
    }
    let mut counts = vec![0u64; ids.len()];
    let mut sums = vec![0i64; ids.len() * dims];
    for p in parts {
        // Both in increasing id: the union's position only moves forward.
        let mut at = 0;
        for (j, c, s) in p.entries(0..k) {
            at += ids[at..].partition_point(|&id| (id as usize) < j);
            counts[at] += c;
            add_sums(&mut sums[at * dims..][..dims], s);
        }
    }
    Some(Table::Sparse { ids, counts, sums })
}

/// Adds `row`, in fixed point at `mul = 2^scale`, to `sum`.
#[inline]
fn add_fixed(sum: &mut [i64], row: &[f32], mul: f64) {
    let magic = ROUND_MAGIC.to_bits() as i64;
    for (s, &v) in sum.iter_mut().zip(row) {
        *s += (f64::from(v) * mul + ROUND_MAGIC).to_bits() as i64 - magic;
    }
}

/// A unit's inertia: its squared distances added in row order.
fn row_order_sum(dist: &[f32]) -> f64 {
    dist.iter().fold(0f64, |acc, &d| acc + f64::from(d))
}

/// `acc += other`, element-wise (exact integer addition).
pub fn add_sums<T: Copy + std::ops::AddAssign>(acc: &mut [T], other: &[T]) {
    for (a, &b) in acc.iter_mut().zip(other) {
        *a += b;
    }
}

/// Total inertia of per-unit values, added in key order.
pub fn inertia_of(units: &[(u64, f64)]) -> f64 {
    let mut sorted = units.to_vec();
    sorted.sort_by_key(|&(key, _)| key);
    sorted.iter().map(|&(_, v)| v).sum()
}

/// Means of the centroids whose fixed-point `sums` (`counts.len() x dims`) and `counts` are given;
/// empty clusters get zeros. Any range of centroids can be computed on its own.
pub fn means(sums: &[i64], counts: &[u64], dims: usize, scale: i32) -> Vec<f32> {
    let unscale = 2f64.powi(-scale);
    let mut data = vec![0f32; counts.len() * dims];
    for (j, &count) in counts.iter().enumerate() {
        if count > 0 {
            let inv = unscale / count as f64;
            for (c, &s) in data[j * dims..][..dims]
                .iter_mut()
                .zip(&sums[j * dims..][..dims])
            {
                *c = (s as f64 * inv) as f32;
            }
        }
    }
    data
}

/// Relative size of the symmetric perturbation applied when splitting a cluster (faiss's value).
const SPLIT_EPS: f32 = 1.0 / 1024.0;

/// New centroids from aggregated sums: `sum / count`, with empty clusters re-seeded by splitting
/// ([`split_empty`]). Returns the centroids and the number of splits.
pub fn update(partial: &Partial, seed: u64, iteration: u64) -> (Centroids, usize) {
    let counts = partial.counts();
    let mut data = means(&partial.sums(), &counts, partial.dims, partial.scale);
    let splits = split_empty(&mut data, &counts, partial.dims, seed, iteration);
    (Centroids::new(data, partial.dims), splits)
}

/// Re-seeds the empty clusters of `data` (`counts.len() x dims` means) by splitting populous ones.
///
/// An empty cluster (in index order) takes a copy of a populous one, drawn with probability
/// proportional to `count - 1` by a generator seeded from `(seed, iteration)`, and the two are
/// pushed apart by a symmetric relative perturbation of 1/1024 (as faiss does); the donor's
/// vectors are shared between the two for the next draws. Draws cost `O(log k)` (a Fenwick
/// tree of the weights), so a million-word run with many empty clusters splits them in
/// moments. Needs every centroid's count, so it runs where the whole vocabulary meets (the
/// driver, in a cluster). Returns the number of splits.
pub fn split_empty(data: &mut [f32], counts: &[u64], d: usize, seed: u64, iteration: u64) -> usize {
    let k = counts.len();
    let mut counts = counts.to_vec();
    let mut weights = Fenwick::new(counts.iter().map(|&c| c.saturating_sub(1)));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(iteration);
    let mut splits = 0;
    for empty in 0..k {
        if counts[empty] > 0 {
            continue;
        }
        // A donor exists while some cluster holds two or more vectors.
        let total = weights.total();
        if total == 0 {
            break;
        }
        let donor = weights.find(rng.random_range(0..total));
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
        weights.set(donor, counts[donor].saturating_sub(1));
        weights.set(empty, counts[empty].saturating_sub(1));
        splits += 1;
    }
    splits
}

/// Prefix sums of non-negative weights with point updates (a Fenwick tree).
struct Fenwick {
    tree: Vec<u64>,
    values: Vec<u64>,
}

impl Fenwick {
    fn new(values: impl Iterator<Item = u64>) -> Self {
        let values: Vec<u64> = values.collect();
        let mut tree = vec![0u64; values.len() + 1];
        for (i, &v) in values.iter().enumerate() {
            let at = i + 1;
            tree[at] += v;
            let parent = at + (at & at.wrapping_neg());
            if parent < tree.len() {
                tree[parent] += tree[at];
            }
        }
        Self { tree, values }
    }

    fn total(&self) -> u64 {
        let mut at = self.values.len();
        let mut sum = 0;
        while at > 0 {
            sum += self.tree[at];
            at &= at - 1;
        }
        sum
    }

    fn set(&mut self, i: usize, value: u64) {
        let old = self.values[i];
        self.values[i] = value;
        let mut at = i + 1;
        while at < self.tree.len() {
            self.tree[at] = self.tree[at].wrapping_add(value).wrapping_sub(old);
            at += at & at.wrapping_neg();
        }
    }

    /// The index `i` whose weight covers `target`: `prefix(i) <= target < prefix(i + 1)`
    /// (`target < total()`).
    fn find(&self, mut target: u64) -> usize {
        let mut at = 0;
        let mut step = self.tree.len().next_power_of_two();
        while step > 0 {
            let next = at + step;
            if next < self.tree.len() && self.tree[next] <= target {
                target -= self.tree[next];
                at = next;
            }
            step /= 2;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn partial_of(rows: &[(Vec<f32>, u32)], dims: usize, scale: i32, key: u64) -> Partial {
        let mut p = Partial::new(3, dims, scale);
        let data: Vec<f32> = rows.iter().flat_map(|(v, _)| v.iter().copied()).collect();
        let labels: Vec<u32> = rows.iter().map(|&(_, l)| l).collect();
        let dist: Vec<f32> = rows.iter().map(|(v, _)| v[0].abs()).collect();
        p.accumulate(key, Rows::dense(&data, dims), &labels, &dist);
        p
    }

    proptest! {
        #[test]
        fn merging_in_any_grouping_and_order_is_bit_identical(
            rows in proptest::collection::vec((proptest::collection::vec(-1e3f32..1e3, 4), 0u32..3), 1..40),
            cut in 0usize..40,
        ) {
            let scale = fixed_scale(1e3, rows.len() as u64);
            let whole = partial_of(&rows, 4, scale, 0);
            // One partial per row, merged forward, backward, and in two groups.
            let singles: Vec<Partial> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| partial_of(std::slice::from_ref(r), 4, scale, i as u64))
                .collect();
            let mut forward = Partial::new(3, 4, scale);
            singles.iter().for_each(|p| forward.merge(p));
            let mut backward = Partial::new(3, 4, scale);
            singles.iter().rev().for_each(|p| backward.merge(p));
            let cut = cut.min(rows.len());
            let (mut left, mut right) = (Partial::new(3, 4, scale), Partial::new(3, 4, scale));
            singles[..cut].iter().for_each(|p| left.merge(p));
            singles[cut..].iter().for_each(|p| right.merge(p));
            right.merge(&left);
            prop_assert_eq!(&forward.sums(), &whole.sums());
            prop_assert_eq!(&backward.sums(), &whole.sums());
            prop_assert_eq!(&right.sums(), &whole.sums());
            prop_assert_eq!(&right.counts(), &whole.counts());
            // Inertia: the same per-unit values give the same total whatever the merge order.
            prop_assert_eq!(forward.inertia().to_bits(), backward.inertia().to_bits());
            prop_assert_eq!(forward.inertia().to_bits(), right.inertia().to_bits());
            // And the means match an f64 computation to far below an f32 ulp.
            let got = means(&whole.sums(), &whole.counts(), 4, scale);
            for j in 0..3 {
                let members: Vec<&Vec<f32>> = rows.iter().filter(|r| r.1 == j as u32).map(|r| &r.0).collect();
                for d in 0..4 {
                    let want = if members.is_empty() { 0.0 } else {
                        members.iter().map(|v| f64::from(v[d])).sum::<f64>() / members.len() as f64
                    };
                    prop_assert!((f64::from(got[j * 4 + d]) - want).abs() <= 1e-7 * want.abs().max(1e-3));
                }
            }
        }

        #[test]
        fn sparse_partials_hold_the_dense_numbers_in_any_merge(
            k in 1usize..40,
            rows in proptest::collection::vec((proptest::collection::vec(-1e3f32..1e3, 3), 0u32..1000), 0..30),
            cuts in proptest::collection::vec(0usize..30, 0..4),
            order in any::<u64>(),
        ) {
            let dims = 3;
            let scale = fixed_scale(1e3, rows.len().max(1) as u64);
            let data: Vec<f32> = rows.iter().flat_map(|(v, _)| v.iter().copied()).collect();
            let labels: Vec<u32> = rows.iter().map(|&(_, l)| l % k as u32).collect();
            let dist: Vec<f32> = rows.iter().map(|(v, _)| v[1].abs()).collect();
            let x = Rows::dense(&data, dims);
            // Units: the rows cut at `cuts`.
            let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(rows.len())).collect();
            bounds.extend([0, rows.len()]);
            bounds.sort_unstable();
            bounds.dedup();
            let units: Vec<UnitRows<'_>> = bounds
                .windows(2)
                .enumerate()
                .map(|(u, w)| (u as u64, x.slice(w[0], w[1]), &labels[w[0]..w[1]], &dist[w[0]..w[1]]))
                .collect();
            let mut dense = Partial::new(k, dims, scale);
            for &(key, m, l, d) in &units {
                dense.accumulate(key, m, l, d);
            }
            let sparse = Partial::sparse_of(k, dims, scale, &units);
            prop_assert!(sparse.is_sparse());
            prop_assert_eq!(&sparse, &dense);
            prop_assert_eq!(sparse.counts(), dense.counts());
            prop_assert_eq!(sparse.sums(), dense.sums());
            prop_assert_eq!(sparse.total(), rows.len() as u64);
            prop_assert_eq!(sparse.touched(), dense.touched());
            for lo in 0..=k {
                let (mut c1, mut s1) = (vec![0u64; k - lo], vec![0i64; (k - lo) * dims]);
                let (mut c2, mut s2) = (c1.clone(), s1.clone());
                sparse.add_range_to(lo..k, &mut c1, &mut s1);
                dense.add_range_to(lo..k, &mut c2, &mut s2);
                prop_assert_eq!((c1, s1), (c2, s2));
                prop_assert!(sparse.entries(0..lo).eq(dense.entries(0..lo)));
            }
            // One partial per unit, sparse or dense by the bits of `order`, merged in unit order
            // and in reverse: the same numbers; two sparse ones stay sparse while they touch at
            // most half the centroids.
            let singles: Vec<Partial> = units
                .iter()
                .enumerate()
                .map(|(i, u)| {
                    if order >> (i % 64) & 1 == 1 {
                        Partial::sparse_of(k, dims, scale, std::slice::from_ref(u))
                    } else {
                        let mut p = Partial::new(k, dims, scale);
                        p.accumulate(u.0, u.1, u.2, u.3);
                        p
                    }
                })
                .collect();
            for backwards in [false, true] {
                let mut it: Vec<&Partial> = singles.iter().collect();
                if backwards {
                    it.reverse();
                }
                let mut merged = Partial::sparse_of(k, dims, scale, &[]);
                for p in &it {
                    let both_sparse = merged.is_sparse() && p.is_sparse();
                    merged.merge(p);
                    if both_sparse {
                        prop_assert_eq!(merged.is_sparse(), merged.touched() * 2 <= k);
                    }
                }
                merged.units.sort_by_key(|u| u.0);
                prop_assert_eq!(&merged, &dense);
                prop_assert_eq!(merged.inertia().to_bits(), dense.inertia().to_bits());
            }
            // All at once, as stage 1 adds its tasks.
            let mut all = Partial::sum(singles.clone(), k, dims, scale);
            all.units.sort_by_key(|u| u.0);
            prop_assert_eq!(&all, &dense);
            if singles.len() > 2 && singles.iter().all(Partial::is_sparse) {
                prop_assert_eq!(all.is_sparse(), all.touched() * 2 <= k);
            }
            // A sparse partial takes units one by one too.
            let mut grown = Partial::sparse_of(k, dims, scale, &[]);
            for &(key, m, l, d) in &units {
                grown.accumulate(key, m, l, d);
            }
            prop_assert_eq!(&grown, &dense);
        }

        #[test]
        fn the_scale_never_lets_a_value_or_a_sum_overflow(max_abs in 0f32..3e38, n in 1u64..u64::MAX / 2) {
            let scale = fixed_scale(max_abs, n);
            let value = f64::from(max_abs) * 2f64.powi(scale);
            prop_assert!(value < 2f64.powi(51), "value {value}");
            prop_assert!(value * n as f64 <= 2f64.powi(63), "sum {}", value * n as f64);
        }
    }

    #[test]
    fn rounding_is_to_nearest_and_symmetric() {
        let scale = 4; // quantum 1/16
        let x = [0.03125f32, -0.03125, 0.09375, -0.2, 1.0];
        let mut p = Partial::new(5, 1, scale);
        p.accumulate(0, Rows::dense(&x, 1), &[0, 1, 2, 3, 4], &[0.0; 5]);
        // 0.5 and 1.5 quanta round to even; -0.2 * 16 = -3.2 rounds to -3.
        assert_eq!(p.sums(), vec![0, 0, 2, -3, 16]);
    }

    #[test]
    fn update_divides_and_splits_empty_clusters_deterministically() {
        let mut p = Partial::new(3, 2, 20);
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        p.accumulate(0, Rows::dense(&x, 2), &[0, 0, 2], &[0.0, 0.0, 0.0]);
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
    fn the_weight_tree_finds_every_index_by_its_prefix_sums() {
        let mut values = vec![3u64, 0, 5, 1, 0, 0, 7, 2, 9, 0, 4];
        let mut tree = Fenwick::new(values.iter().copied());
        for round in 0..3 {
            let total: u64 = values.iter().sum();
            assert_eq!(tree.total(), total, "round {round}");
            let mut prefix = 0;
            for (i, &v) in values.iter().enumerate() {
                for t in prefix..prefix + v {
                    assert_eq!(tree.find(t), i, "target {t}, round {round}");
                }
                prefix += v;
            }
            // Point updates keep it right.
            for (i, v) in [(0, 0), (4, 6), (10, 1), (1, 2)] {
                tree.set(i, v + round);
                values[i] = v + round;
            }
        }
    }

    #[test]
    fn splits_draw_donors_in_proportion_to_their_spare_vectors() {
        // One empty cluster, donors with 1 (never), 2 and 5 vectors: weights 0, 1, 4.
        let mut seen = [0u32; 4];
        for seed in 0..2000 {
            let mut data = vec![1.0f32, 2.0, 3.0, 0.0];
            split_empty(&mut data, &[1, 2, 5, 0], 1, seed, 1);
            let donor = (0..3)
                .find(|&j| data[j] != [1.0, 2.0, 3.0][j])
                .expect("one cluster gave");
            assert_eq!(data[3], data[donor] * (1.0 + SPLIT_EPS) / (1.0 - SPLIT_EPS));
            seen[donor] += 1;
        }
        assert_eq!(seen[0], 0, "a cluster of one vector gave one: {seen:?}");
        // 1 : 4 with 2,000 draws: 400 and 1,600 expected.
        assert!(
            (300..500).contains(&seen[1]) && (1500..1700).contains(&seen[2]),
            "{seen:?}"
        );
    }

    #[test]
    fn units_added_at_once_equal_units_added_one_by_one() {
        let dims = 5;
        let x = crate::kmeans::assign::tests::values(900 * dims, 4);
        let m = Rows::dense(&x, dims);
        let k = 9000; // more than one block of centroids
        let labels: Vec<u32> = (0..900u32).map(|i| (i * 7919) % k as u32).collect();
        let dist: Vec<f32> = (0..900).map(|i| i as f32 * 0.25).collect();
        let cuts = [(0usize, 300usize), (300, 301), (301, 900)];
        let mut one = Partial::new(k, dims, 30);
        for (u, &(a, b)) in cuts.iter().enumerate() {
            one.accumulate(u as u64, m.slice(a, b), &labels[a..b], &dist[a..b]);
        }
        let units: Vec<_> = cuts
            .iter()
            .enumerate()
            .map(|(u, &(a, b))| (u as u64, m.slice(a, b), &labels[a..b], &dist[a..b]))
            .collect();
        let mut all = Partial::new(k, dims, 30);
        all.accumulate_units(&units);
        assert_eq!(all, one);
    }

    #[test]
    fn update_without_donors_leaves_clusters_empty() {
        let mut p = Partial::new(3, 1, 20);
        p.accumulate(0, Rows::dense(&[1.0, 2.0], 1), &[0, 1], &[0.0, 0.0]);
        let (c, splits) = update(&p, 0, 0);
        assert_eq!(splits, 0);
        assert_eq!(c.as_slice(), &[1.0, 2.0, 0.0]);
    }
}
