//! The k-means engine: initialisation, the map step with stage-1 aggregation, the update, the
//! iteration loop, checkpoints and vocabulary files.
//!
//! One iteration: every vector is assigned to its nearest centroid ([`assign()`], the f32 GEMM;
//! [`quant::assign_quantized`], the int8 kernel; or [`prune`]'s bounds); the assignments
//! become per-thread [`Partial`] sums, merged once per node ([`local_step`], the first
//! aggregation stage of the paper); [`update`] turns the merged sums into new centroids.
//!
//! Work is split into units of at most [`UNIT_ROWS`] rows of a partition. The sums are exact
//! fixed-point integers and the inertia is added per unit in key order (see [`partial`]), so for
//! a given partition layout a run is bit-for-bit the same for every thread count and every way of
//! spreading the partitions over nodes. Another partition layout cuts the GEMM row blocks
//! differently; distances then agree to float rounding (tested to 1e-6 relative).

pub mod approx;
pub mod assign;
pub mod engine;
pub mod files;
pub mod params;
pub mod partial;
pub mod prune;
pub mod quant;
mod task;

use std::time::Instant;

use rand::SeedableRng;
use rand::seq::index;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use thiserror::Error;

pub use self::assign::{AssignScratch, Centroids, assign, nearest_few};
pub use self::partial::{Partial, fixed_scale, max_abs, split_empty, update};
use crate::partition::Rows;
use crate::store::{Element, StoreError};

/// Rows per unit of map work.
pub const UNIT_ROWS: usize = 4096;

/// Errors of the k-means engine.
#[derive(Debug, Error)]
pub enum KMeansError {
    /// `k` is zero.
    #[error("k must be at least 1")]
    ZeroK,
    /// More centroids than vectors.
    #[error("k = {k} exceeds the number of vectors ({n})")]
    TooFewVectors {
        /// Requested centroids.
        k: usize,
        /// Vectors available.
        n: usize,
    },
    /// Given initial centroids do not fit the data or `k`.
    #[error("initial centroids are {got_k} x {got_dims}, expected {k} x {dims}")]
    InitShape {
        /// Centroids given.
        got_k: usize,
        /// Their dims.
        got_dims: usize,
        /// Requested k.
        k: usize,
        /// Data dims.
        dims: usize,
    },
    /// Partitions of different dimensionality.
    #[error("partitions have different dims ({0} and {1})")]
    MixedDims(usize, usize),
    /// A vector holds NaN or infinity.
    #[error("the vectors hold a non-finite value (NaN or infinity); k-means needs finite data")]
    NonFinite,
    /// Values spanning a range the exact fixed-point sums cannot hold at f32 precision.
    #[error("{range} (the largest is {location})")]
    Range {
        /// The range (not a `source`: its text is this error's text).
        range: partial::RangeError,
        /// Where the largest value is.
        location: String,
    },
    /// A file error.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A checkpoint that cannot be used.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// Checkpoint file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// How the first centroids are drawn, without their settings (the command line's and configs'
/// choice; [`Init`] with them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum InitMethod {
    /// k distinct vectors drawn uniformly.
    #[default]
    Random,
    /// k-means++ on a sample of max(2k, 1024) vectors.
    #[cfg_attr(feature = "clap", value(name = "kmeans++"))]
    #[serde(rename = "kmeans++")]
    PlusPlus,
}

/// Exact or approximate search for each vector's nearest centroid (the command line's and
/// configs' choice; [`Assignment`] with its settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Search {
    /// Every vector against every centroid (or Yinyang-pruned with --prune): the nearest.
    #[default]
    Exact,
    /// An inverted file over the centroids, rebuilt every iteration: each vector searches the
    /// members of its --probes nearest of --lists lists (for very large k; the run reports how
    /// often it found the exact nearest on a sample).
    Approx,
}

/// How the first centroids are chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    /// `k` distinct vectors drawn uniformly (seeded).
    Random,
    /// k-means++ on a uniform sample of `sample` vectors (default `min(n, max(2k, 1024))`).
    ///
    /// Cost `O(sample * k * dims)`, never `O(n k^2 d)`.
    PlusPlus {
        /// Sample size; `None` for the default.
        sample: Option<usize>,
    },
    /// Given centroids.
    Given(Centroids),
}

/// Settings of a k-means run.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Number of centroids.
    pub k: usize,
    /// Iterations at most.
    pub max_iter: u64,
    /// Stop when the relative change of inertia between iterations falls below this.
    pub tol: f64,
    /// Seed of initialisation and empty-cluster splits.
    pub seed: u64,
    /// Initialisation.
    pub init: Init,
    /// Accumulators (and threads) of the map step; 0 for rayon's thread count.
    pub threads: usize,
    /// How vectors are assigned to centroids.
    pub assignment: Assignment,
}

/// How a run assigns vectors to their nearest centroid: every choice gives the nearest centroid
/// (up to float ties, see [`prune`] and [`quant`]); they differ in speed and memory. Every
/// variant runs on every engine (single process, TCP workers, MPI ranks), so the one choice
/// needs no validation beyond its type: the CLI's `--prune` / `--kernel` and the configs'
/// `prune` / `kernel` only build it ([`Assignment::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    /// Every vector against every centroid, every iteration, through `kernel`.
    Full(Kernel),
    /// Yinyang bounds carried across iterations ([`prune`]): only vectors whose bounds do not
    /// prove their label are searched; the full passes pruning still needs (the first
    /// iteration, searches too wide to pay off) go through `kernel`.
    Pruned(Kernel),
    /// An inverted file over the centroids, rebuilt every iteration ([`approx`]): each vector
    /// searches only the members of its `probes` nearest of `lists` lists (0: `sqrt(k)`
    /// lists). Not exact: a run reports how often it found the nearest ([`approx::recall`]).
    Approx {
        /// Lists of the index (0 for [`approx::default_lists`]).
        lists: u32,
        /// Lists searched per vector.
        probes: u32,
        /// The kernel searching the lists: f32 GEMM a map unit at a time, or the integer kernel
        /// over the rows of many units at once ([`approx::Index::search_int8`]).
        kernel: Kernel,
    },
}

impl Default for Assignment {
    fn default() -> Self {
        Assignment::Full(Kernel::F32)
    }
}

impl Assignment {
    /// From the CLI's and configs' two switches (`prune`, `kernel`).
    pub fn new(prune: bool, kernel: Kernel) -> Self {
        if prune {
            Assignment::Pruned(kernel)
        } else {
            Assignment::Full(kernel)
        }
    }

    /// The exact search the CLI's and configs' switches choose, `prune` unset taking the
    /// kernel's own default: pruned with the integer kernel, whose pruned steps give its full
    /// pass's labels (up to exact ties) and were as fast or faster over a 20-iteration run
    /// wherever they were measured (k = 1,024 to 65,536, HOG and blobs, AVX2 and VNNI: 1.2-2.3x
    /// faster, level at k = 16,384 with VNNI on 201,000 HOG vectors; `eval/kmeans_bench/README.md`,
    /// "Pruning by default with int8", and `eval/large_k/`), the full pass with f32,
    /// whose pruned steps lose at small k on HOG (`eval/kmeans_bench/pruning.md`).
    pub fn exact(prune: Option<bool>, kernel: Kernel) -> Self {
        Self::new(prune.unwrap_or(kernel == Kernel::Int8), kernel)
    }

    /// The kernel of the full passes, or of the approximate search's lists.
    pub fn kernel(self) -> Kernel {
        match self {
            Assignment::Full(k) | Assignment::Pruned(k) | Assignment::Approx { kernel: k, .. } => k,
        }
    }

    /// Whether the vectors are quantised once and kept across iterations (the integer full and
    /// pruned passes; the approximate search quantises the rows it searches as it goes).
    pub fn keeps_codes(self) -> bool {
        matches!(
            self,
            Assignment::Full(Kernel::Int8) | Assignment::Pruned(Kernel::Int8)
        )
    }

    /// The approximate search's lists for `k` centroids and probes, if this is one.
    pub fn approx(self, k: usize) -> Option<(usize, usize)> {
        match self {
            Assignment::Approx { lists, probes, .. } => {
                let lists = approx::Search { lists, probes }.lists_for(k);
                Some((lists, probes as usize))
            }
            _ => None,
        }
    }

    /// Whether bounds prune the search.
    pub fn pruned(self) -> bool {
        matches!(self, Assignment::Pruned(_))
    }

    /// The name with the approximate search's settings (`approx-L-P`, L = 0 for `sqrt(k)`
    /// lists, and `-int8` with the integer kernel): what a checkpoint and a run's metadata
    /// record.
    pub fn key(self) -> String {
        match self {
            Assignment::Approx {
                lists,
                probes,
                kernel: Kernel::F32,
            } => format!("approx-{lists}-{probes}"),
            Assignment::Approx {
                lists,
                probes,
                kernel: Kernel::Int8,
            } => format!("approx-{lists}-{probes}-int8"),
            other => other.name().into(),
        }
    }

    /// The name in messages, summaries and cache keys: `f32`, `int8`, `pruned`, `pruned-int8`,
    /// `approx`, `approx-int8`.
    pub fn name(self) -> &'static str {
        match self {
            Assignment::Full(Kernel::F32) => "f32",
            Assignment::Full(Kernel::Int8) => "int8",
            Assignment::Pruned(Kernel::F32) => "pruned",
            Assignment::Pruned(Kernel::Int8) => "pruned-int8",
            Assignment::Approx {
                kernel: Kernel::F32,
                ..
            } => "approx",
            Assignment::Approx {
                kernel: Kernel::Int8,
                ..
            } => "approx-int8",
        }
    }
}

/// The kernel of the full assignment pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Kernel {
    /// f32 GEMM with a fused arg-min.
    #[default]
    F32,
    /// 7-bit integer products (AVX2 `vpmaddubsw`, AVX-512 VNNI) with exact re-ranking of the
    /// candidates their error bound leaves: labels are the arg-min of direct distances.
    Int8,
}

impl Kernel {
    /// The name used by the CLI and configs.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::F32 => "f32",
            Kernel::Int8 => "int8",
        }
    }

    /// Whether this is the default kernel (f32).
    pub fn is_f32(&self) -> bool {
        *self == Kernel::F32
    }
}

impl Default for Params {
    fn default() -> Self {
        Self {
            k: 256,
            max_iter: 20,
            tol: 1e-4,
            seed: 0,
            init: Init::Random,
            threads: 0,
            assignment: Assignment::default(),
        }
    }
}

/// What one iteration did (also a checkpoint's history row).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IterationStats {
    /// 1-based iteration number.
    pub iteration: u64,
    /// Inertia of the assignment to the previous centroids.
    pub inertia: f64,
    /// Wall time of the iteration.
    pub seconds: f64,
    /// Empty clusters re-seeded by splitting.
    pub splits: usize,
    /// Vectors whose label the pruning bounds proved without a search (0 without pruning).
    #[serde(default)]
    pub kept: usize,
}

/// The state after some iterations: enough to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    /// Iterations done.
    pub iteration: u64,
    /// Centroids after the last update.
    pub centroids: Centroids,
    /// Every iteration so far.
    pub history: Vec<IterationStats>,
    /// Whether the inertia change fell below the tolerance, or the centroids stopped moving.
    pub converged: bool,
}

impl State {
    /// Completes an iteration from its aggregated results: re-seeds empty clusters of `means`
    /// (all `k` centroids, from `counts`), records the statistics, checks convergence. The one
    /// place an iteration ends, for the local engine and the cluster driver alike.
    pub fn advance(
        &mut self,
        params: &Params,
        mut means: Vec<f32>,
        counts: &[u64],
        inertia: f64,
        started: Instant,
        kept: usize,
    ) {
        let dims = self.centroids.dims();
        let iteration = self.iteration + 1;
        let splits = split_empty(&mut means, counts, dims, params.seed, iteration);
        let stats = IterationStats {
            iteration,
            inertia,
            seconds: started.elapsed().as_secs_f64(),
            splits,
            kept,
        };
        if let Some(prev) = self.history.last() {
            let change = (prev.inertia - inertia).abs() / prev.inertia.max(f64::MIN_POSITIVE);
            self.converged = change < params.tol;
        }
        // Centroids that did not move are a fixed point: the next assignment, and so every later
        // iteration, would repeat this one exactly. Stop even at `tol = 0`.
        if splits == 0 && means == self.centroids.as_slice() {
            self.converged = true;
        }
        self.iteration = iteration;
        self.centroids = Centroids::new(means, dims);
        self.history.push(stats);
    }
}

pub(crate) fn check_dims(parts: &[Rows<'_>]) -> Result<usize, KMeansError> {
    let dims = parts.first().map_or(0, Rows::dims);
    match parts.iter().find(|p| p.dims() != dims) {
        Some(p) => Err(KMeansError::MixedDims(dims, p.dims())),
        None => Ok(dims),
    }
}

/// Row `global` of the concatenation of `parts`, appended to `out`.
pub(crate) fn push_global_row(parts: &[Rows<'_>], mut global: usize, out: &mut Vec<f32>) {
    for p in parts {
        if global < p.rows() {
            p.extend_row(global, out);
            return;
        }
        global -= p.rows();
    }
    panic!("row index outside the partitions");
}

/// Chooses the first centroids.
pub fn initial_centroids(
    parts: &[Rows<'_>],
    k: usize,
    init: &Init,
    seed: u64,
) -> Result<Centroids, KMeansError> {
    let dims = check_dims(parts)?;
    let n: usize = parts.iter().map(Rows::rows).sum();
    initial_centroids_by(n, dims, k, init, seed, &mut |indices| {
        let mut out = Vec::with_capacity(indices.len() * dims);
        for &i in indices {
            push_global_row(parts, i, &mut out);
        }
        Ok(out)
    })
}

/// Fetches the rows of global indices, in order (see [`initial_centroids_by`]).
pub type RowsOf<'a, E> = dyn FnMut(&[usize]) -> Result<Vec<f32>, E> + 'a;

/// [`initial_centroids`] of `n` vectors of `dims` values that lie elsewhere: `rows` returns the
/// rows of the global indices it is given, in that order (a cluster driver asks the members
/// holding them). The same indices are asked for, so the centroids are the same.
pub fn initial_centroids_by<E: From<KMeansError>>(
    n: usize,
    dims: usize,
    k: usize,
    init: &Init,
    seed: u64,
    rows: &mut RowsOf<'_, E>,
) -> Result<Centroids, E> {
    if k == 0 {
        return Err(KMeansError::ZeroK.into());
    }
    if let Init::Given(c) = init {
        if c.k() != k || c.dims() != dims {
            return Err(KMeansError::InitShape {
                got_k: c.k(),
                got_dims: c.dims(),
                k,
                dims,
            }
            .into());
        }
        return Ok(c.clone());
    }
    if k > n {
        return Err(KMeansError::TooFewVectors { k, n }.into());
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Stream 0 is for splits of iteration 0, which never runs; use a stream of its own.
    rng.set_stream(u64::MAX);
    let mut fetch = |indices: Vec<usize>| -> Result<Vec<f32>, E> {
        let data = rows(&indices)?;
        // The rows are checked here as well as where the data was opened: a cluster driver
        // maps partitions without reading them (or has none) and reads only these rows (whose
        // count and length whoever brings them checks).
        if !data.iter().all(|v| v.is_finite()) {
            return Err(KMeansError::NonFinite.into());
        }
        Ok(data)
    };
    match init {
        Init::Random => {
            let data = fetch(index::sample(&mut rng, n, k).into_vec())?;
            Ok(Centroids::new(data, dims))
        }
        Init::PlusPlus { sample } => {
            let m = sample.unwrap_or_else(|| (2 * k).max(1024)).clamp(k, n);
            let data = fetch(index::sample(&mut rng, n, m).into_vec())?;
            let rows: Vec<&[f32]> = data.chunks_exact(dims.max(1)).collect();
            Ok(plus_plus(&rows, k, &mut rng))
        }
        Init::Given(_) => unreachable!("handled above"),
    }
}

/// k-means++ seeding over `rows` (Arthur and Vassilvitskii 2007): each next centroid is drawn
/// with probability proportional to the squared distance to the nearest centroid so far.
fn plus_plus(rows: &[&[f32]], k: usize, rng: &mut ChaCha8Rng) -> Centroids {
    use rand::Rng;
    let dims = rows[0].len();
    let first = rng.random_range(0..rows.len());
    let mut data = rows[first].to_vec();
    let mut nearest: Vec<f32> = rows
        .par_iter()
        .map(|r| assign::dist2(r, rows[first]))
        .collect();
    while data.len() < k * dims {
        let total: f64 = nearest.iter().map(|&d| f64::from(d)).sum();
        let pick = if total > 0.0 {
            let mut target = rng.random::<f64>() * total;
            let mut chosen = rows.len() - 1;
            for (i, &d) in nearest.iter().enumerate() {
                target -= f64::from(d);
                if target < 0.0 {
                    chosen = i;
                    break;
                }
            }
            chosen
        } else {
            // All remaining points coincide with centroids: any choice is as good.
            rng.random_range(0..rows.len())
        };
        let c = rows[pick];
        data.extend_from_slice(c);
        nearest
            .par_iter_mut()
            .zip(rows)
            .for_each(|(d, r)| *d = d.min(assign::dist2(r, c)));
    }
    Centroids::new(data, dims)
}

/// State of the pruned assignment across iterations: bounds per map unit (keyed like the unit's
/// inertia, by partition and unit, so they stay with their rows whatever other partitions come
/// and go) and the previous centroids. Not checkpointed: after a resume the first iteration is
/// a full pass, and so is a unit whose bounds are not here (a partition new to this node).
#[derive(Debug, Default)]
pub struct Pruner {
    units: std::collections::BTreeMap<u64, prune::UnitBounds>,
    groups: Option<prune::Groups>,
    previous: Option<Centroids>,
}

impl Pruner {
    /// Forgets every bound: the next step is a full pass (for a node whose bounds may no longer
    /// match the centroids it is given, e.g. an iteration run again after a failure).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

/// A partition's rows and its index in the partition set (which keys its units' inertia).
#[derive(Debug, Clone, Copy)]
pub struct Shard<'a> {
    /// Index of the partition in its set.
    pub index: u32,
    /// The vectors, as held.
    pub rows: Rows<'a>,
}

impl<'a> Shard<'a> {
    /// Shards for `parts` numbered `0..`.
    pub fn numbered(parts: &[Rows<'a>]) -> Vec<Self> {
        parts
            .iter()
            .enumerate()
            .map(|(i, &rows)| Self {
                index: i as u32,
                rows,
            })
            .collect()
    }
}

/// The fixed-point scale for `shards` (their largest absolute value and their row count).
pub fn data_scale(shards: &[Shard<'_>]) -> Result<i32, KMeansError> {
    let peak = shards.par_iter().map(|s| max_abs(s.rows)).reduce(
        || 0.0,
        |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.max(b)
            }
        },
    );
    if !peak.is_finite() {
        return Err(KMeansError::NonFinite);
    }
    let n: usize = shards.iter().map(|s| s.rows.rows()).sum();
    let scale = fixed_scale(peak, n as u64);
    let bins = shards
        .par_iter()
        .map(|s| partial::magnitudes(s.rows))
        .reduce(Vec::new, |a, b| partial::add_bins(a, &b));
    if let Err(range) = partial::check_range(scale, &bins, peak) {
        // Name the first record (0-based, in input order) that holds the largest value.
        let mut offset = 0;
        let mut location = String::new();
        let mut buf = Vec::new();
        for s in shards {
            if let Some(r) = (0..s.rows.rows())
                .find(|&r| s.rows.row(r, &mut buf).iter().any(|v| v.abs() == peak))
            {
                location = format!("record {}", offset + r);
                break;
            }
            offset += s.rows.rows();
        }
        return Err(KMeansError::Range { range, location });
    }
    Ok(scale)
}

/// A unit of map work: at most [`UNIT_ROWS`] rows of one shard.
#[derive(Debug, Clone, Copy)]
struct Unit<'a> {
    /// Inertia key.
    key: u64,
    /// Position of the shard in the shard list.
    shard: usize,
    /// First row within the shard.
    start: usize,
    rows: Rows<'a>,
}

/// Work units of the map step, in partition order.
fn units<'a>(shards: &[Shard<'a>]) -> Vec<Unit<'a>> {
    shards
        .iter()
        .enumerate()
        .flat_map(|(shard, s)| {
            let p = s.rows;
            (0..p.rows()).step_by(UNIT_ROWS).map(move |start| Unit {
                key: partial::unit_key(s.index, (start / UNIT_ROWS) as u32),
                shard,
                start,
                rows: p.slice(start, (start + UNIT_ROWS).min(p.rows())),
            })
        })
        .collect()
}

/// How the map step assigns vectors.
#[derive(Debug)]
pub enum Mode<'a> {
    /// The f32 GEMM full pass.
    Full,
    /// Yinyang bounds carried across iterations; with the shards' quantised rows, the full
    /// passes go through the integer kernel.
    Pruned(&'a mut Pruner, Option<&'a [&'a quant::QuantRows]>),
    /// The integer full pass, with the shards' quantised rows (one per shard, in order).
    Quantized(&'a [&'a quant::QuantRows]),
    /// The approximate search over an inverted file of `lists` lists, `probes` searched
    /// ([`approx`]); the index is built from the centroids in the call.
    Approx {
        /// Lists of the index.
        lists: usize,
        /// Lists searched per vector.
        probes: usize,
        /// The kernel searching the lists.
        kernel: Kernel,
    },
}

impl<'a> Mode<'a> {
    /// The mode of `assignment`: `pruner` for a pruned one, the shards' quantised rows for the
    /// integer kernel.
    pub fn of(
        assignment: Assignment,
        k: usize,
        pruner: Option<&'a mut Pruner>,
        codes: Option<&'a [&'a quant::QuantRows]>,
    ) -> Self {
        if let Some((lists, probes)) = assignment.approx(k) {
            let kernel = assignment.kernel();
            return Mode::Approx {
                lists,
                probes,
                kernel,
            };
        }
        match (pruner, codes) {
            (Some(p), codes) => Mode::Pruned(p, codes),
            (None, Some(rows)) => Mode::Quantized(rows),
            (None, None) => Mode::Full,
        }
    }
}

/// Bytes of the map tasks' `k x dims` sum accumulators above which one accumulator is shared
/// by all threads (each thread then adds the rows of its own block of centroids): at large `k`
/// one accumulator per thread would multiply the largest array of the run by the thread count.
pub const TASK_SUMS_BUDGET: u64 = 1 << 30;

/// Bytes one node holds during an iteration, by what holds them (the largest arrays only:
/// per-vector scratch and buffers of a few MB are left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memory {
    /// The node's vectors as their partitions hold them: records of 8 bytes of ids and `dims`
    /// values of 4 bytes (f32) or 1 (u8 codes, decoded a unit of rows at a time by each task).
    pub vectors: u64,
    /// The centroids and the next iteration's means (and, on a distributed engine, the
    /// broadcast's bytes as received).
    pub centroids: u64,
    /// The fixed-point sums and counts: one `k x (dims + 1)` table per map task or one shared,
    /// or (tasks of at most `k / 2` rows) the touched centroids' entries and their merge.
    pub sums: u64,
    /// The integer kernel's codes of the vectors and centroids.
    pub codes: u64,
    /// Pruning bounds (one per vector and centroid group).
    pub bounds: u64,
    /// The approximate search's index (the centroids in list order, ids, coarse centres; with
    /// the integer kernel their codes and each task's batch of rows).
    pub index: u64,
}

impl Memory {
    /// The plan for `n` vectors of `dims` values held as `element` at this node, `k` centroids,
    /// `threads` map tasks.
    pub fn estimate(
        n: u64,
        k: u64,
        dims: u64,
        element: Element,
        threads: u64,
        assignment: Assignment,
        distributed: bool,
    ) -> Self {
        let table = k.saturating_mul(dims);
        let threads = threads.max(1);
        // Tasks take units of rows in turn: at most this many rows each.
        let task_rows = n.div_ceil(threads).next_multiple_of(UNIT_ROWS as u64);
        let dense = k.saturating_mul(dims + 1).saturating_mul(8);
        let sums = match Accumulation::choose(
            k as usize,
            dims as usize,
            threads as usize,
            task_rows.min(n) as usize,
        ) {
            // The tasks' entries, then stage 1's merge (sparse while it touches at most k / 2).
            Accumulation::Sparse => {
                let entry = (dims + 2).saturating_mul(8);
                let merged = if n.saturating_mul(2) <= k {
                    n.saturating_mul(entry)
                } else {
                    dense
                };
                n.saturating_mul(entry).saturating_add(merged)
            }
            Accumulation::PerTask => threads.saturating_mul(dense),
            Accumulation::Shared => dense,
        };
        let int8 = assignment.kernel() == Kernel::Int8;
        Memory {
            vectors: n.saturating_mul(
                dims.saturating_mul(element.size() as u64)
                    .saturating_add(crate::store::RECORD_HEAD as u64),
            ),
            centroids: table.saturating_mul(if distributed { 12 } else { 8 }),
            sums,
            codes: if assignment.keeps_codes() {
                table.saturating_add(n.saturating_mul(dims + 8))
            } else {
                0
            },
            bounds: if assignment.pruned() {
                n.saturating_mul(4)
                    .saturating_mul(prune::group_count(k, int8) + 2)
            } else {
                0
            },
            index: assignment.approx(k as usize).map_or(0, |(lists, probes)| {
                let index =
                    approx::Index::bytes(k as usize, dims as usize, lists, assignment.kernel());
                // The integer search's batches: each task's rows as f32, their codes and terms,
                // their probed lists (three arrays) and per-row state.
                let batches = match assignment.kernel() {
                    Kernel::F32 => 0,
                    Kernel::Int8 => {
                        let rows = task_rows.min(n).min((task::LIST_BATCH * UNIT_ROWS) as u64);
                        let probes = probes.min(lists) as u64;
                        let row = dims.saturating_mul(5).saturating_add(48 + 12 * probes);
                        threads.saturating_mul(rows).saturating_mul(row)
                    }
                };
                index.saturating_add(batches)
            }),
        }
    }

    /// All of it.
    pub fn total(&self) -> u64 {
        [
            self.vectors,
            self.centroids,
            self.sums,
            self.codes,
            self.bounds,
            self.index,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// How a map step's tasks keep their sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulation {
    /// Each task a sparse table of the centroids it touched: tasks of at most `k / 2` rows
    /// (the paper's 742 vectors a task against a million words).
    Sparse,
    /// Each task its own dense `k x dims` table.
    PerTask,
    /// One dense table for all tasks, filled in parallel by blocks of centroids (when tables
    /// per task would pass [`TASK_SUMS_BUDGET`]).
    Shared,
}

impl Accumulation {
    /// The choice for `threads` tasks of at most `task_rows` rows each.
    pub fn choose(k: usize, dims: usize, threads: usize, task_rows: usize) -> Self {
        if task_rows.saturating_mul(2) <= k {
            Self::Sparse
        } else if accumulator_per_task(k, dims, threads) {
            Self::PerTask
        } else {
            Self::Shared
        }
    }
}

/// Whether `threads` map tasks each keep their own `k x dims` accumulator (else one is shared).
pub fn accumulator_per_task(k: usize, dims: usize, threads: usize) -> bool {
    (threads as u64)
        .saturating_mul(k as u64)
        .saturating_mul(dims as u64)
        .saturating_mul(8)
        <= TASK_SUMS_BUDGET
}

/// The map step over all shards: one partial per map task (thread accumulator), unmerged. With
/// [`Mode::Pruned`], vectors whose bounds prove their label are not searched; the second value
/// is how many were kept that way.
pub fn map_tasks(
    shards: &[Shard<'_>],
    centroids: &Centroids,
    scale: i32,
    threads: usize,
    mode: Mode<'_>,
) -> (Vec<Partial>, usize) {
    map_tasks_as(shards, centroids, scale, threads, mode, None)
}

/// [`map_tasks`] with the tasks' accumulation chosen by the caller (`None`: by size).
fn map_tasks_as(
    shards: &[Shard<'_>],
    centroids: &Centroids,
    scale: i32,
    threads: usize,
    mode: Mode<'_>,
    accumulation: Option<Accumulation>,
) -> (Vec<Partial>, usize) {
    let threads = if threads == 0 {
        rayon::current_num_threads()
    } else {
        threads
    };
    let units = units(shards);
    let (k, dims) = (centroids.k(), centroids.dims());
    let (mut pruner, kernel) = task::MapKernel::of(mode, centroids);
    if let Some(rows) = kernel.codes {
        assert_eq!(
            rows.len(),
            shards.len(),
            "one set of quantised rows per shard"
        );
    }
    let (geometry, bounds) = task::unit_bounds(
        pruner.as_deref_mut(),
        centroids,
        kernel.codes.is_some(),
        &units,
    );
    let work = task::deal_units(&units, bounds, threads);
    let task_rows = work
        .iter()
        .map(|w| w.iter().map(|(u, _)| u.rows.rows()).sum::<usize>())
        .max()
        .unwrap_or(0);
    let how = accumulation.unwrap_or_else(|| Accumulation::choose(k, dims, threads, task_rows));
    let shared = task::MapTask {
        centroids,
        kernel: &kernel,
        geometry: &geometry,
        how,
        scale,
    };
    let results: Vec<task::TaskResult<'_>> = work
        .into_par_iter()
        .map(|items| shared.run(items))
        .collect();
    if let Some(p) = pruner {
        p.previous = Some(centroids.clone());
    }
    let kept = results.iter().map(|r| r.2).sum();
    (task::gather_partials(results, how, k, dims, scale), kept)
}

/// The map step with stage-1 aggregation: the map tasks' partials merged once, in shared memory.
pub fn local_step(
    shards: &[Shard<'_>],
    centroids: &Centroids,
    scale: i32,
    threads: usize,
    mode: Mode<'_>,
) -> (Partial, usize) {
    let (tasks, kept) = map_tasks(shards, centroids, scale, threads, mode);
    (
        merge_tasks(tasks, centroids.k(), centroids.dims(), scale),
        kept,
    )
}

/// Stage 1: the map tasks' partials added up ([`Partial::sum`]: into the first, no new
/// `k x dims` accumulator; sparse partials stay sparse while together they touch at most half
/// the centroids).
pub fn merge_tasks(tasks: Vec<Partial>, k: usize, dims: usize, scale: i32) -> Partial {
    Partial::sum(tasks, k, dims, scale)
}

#[cfg(test)]
mod tests {
    use super::engine::fit;
    use super::*;

    /// `clusters` well-separated blobs in `dims` dimensions, `per` points each, from a fixed LCG.
    pub(crate) fn blobs(clusters: usize, per: usize, dims: usize, seed: u64) -> Vec<f32> {
        blobs_spread(clusters, per, dims, seed, 20.0)
    }

    /// Blobs whose centres spread over `[-spread/2, spread/2)` per dimension around unit-width
    /// noise.
    fn blobs_spread(clusters: usize, per: usize, dims: usize, seed: u64, spread: f32) -> Vec<f32> {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let centers: Vec<f32> = (0..clusters * dims).map(|_| next() * spread).collect();
        let mut out = Vec::with_capacity(clusters * per * dims);
        for p in 0..clusters * per {
            let c = p % clusters;
            out.extend((0..dims).map(|d| centers[c * dims + d] + next()));
        }
        out
    }

    fn run(data: &[f32], dims: usize, params: &Params) -> State {
        let parts = [Rows::dense(data, dims)];
        fit::<KMeansError>(&parts, params, None, &mut |_| Ok(())).expect("fit")
    }

    #[test]
    fn inertia_never_increases_and_blobs_are_found() {
        let data = blobs(8, 50, 16, 3);
        for init in [Init::Random, Init::PlusPlus { sample: None }] {
            let state = run(
                &data,
                16,
                &Params {
                    k: 8,
                    max_iter: 30,
                    tol: 0.0,
                    seed: 4,
                    init: init.clone(),
                    threads: 2,
                    assignment: Assignment::new(false, Kernel::F32),
                },
            );
            for w in state.history.windows(2) {
                assert!(
                    w[1].inertia <= w[0].inertia * (1.0 + 1e-6),
                    "{init:?}: {:?}",
                    state.history
                );
            }
            if matches!(init, Init::PlusPlus { .. }) {
                // k-means++ on separated blobs finds them: noise variance 1/12 per dim.
                let per_point = state.history.last().expect("ran").inertia / 400.0;
                assert!(
                    per_point < 16.0 / 12.0 * 1.2,
                    "per-point inertia {per_point}"
                );
            }
        }
    }

    #[test]
    fn one_huge_outlier_is_refused_naming_its_record_instead_of_zeroing_the_sums() {
        let mut data = blobs(4, 30, 8, 2);
        let params = Params {
            k: 4,
            max_iter: 3,
            tol: 0.0,
            seed: 1,
            init: Init::Random,
            threads: 2,
            assignment: Assignment::new(false, Kernel::F32),
        };
        // Large but ordinary data passes: the scale follows the magnitude.
        let big: Vec<f32> = data.iter().map(|v| v * 1e6).collect();
        let state = run(&big, 8, &params);
        assert!(
            state
                .history
                .iter()
                .all(|h| h.inertia.is_finite() && h.inertia > 0.0)
        );
        data[8 * 57 + 3] = 1e30;
        for kernel in [Kernel::F32, Kernel::Int8] {
            let parts = [Rows::dense(&data, 8)];
            let err = fit::<KMeansError>(
                &parts,
                &Params {
                    assignment: Assignment::Full(kernel),
                    ..params.clone()
                },
                None,
                &mut |_| Ok(()),
            )
            .expect_err("refused");
            assert!(matches!(err, KMeansError::Range { .. }), "{err}");
            assert!(err.to_string().contains("record 57"), "{err}");
        }
        assert!(partial::check_range(39, &[], 1.0).is_ok());
    }

    #[test]
    fn a_fixed_point_ends_the_run_even_at_zero_tolerance() {
        let data = blobs(4, 30, 8, 2);
        let params = Params {
            k: 4,
            max_iter: 10_000,
            tol: 0.0,
            seed: 1,
            init: Init::PlusPlus { sample: None },
            threads: 2,
            assignment: Assignment::new(false, Kernel::F32),
        };
        let state = run(&data, 8, &params);
        assert!(state.converged, "{:?}", state.history);
        assert!(state.iteration < 50, "ran {} iterations", state.iteration);
        // The last iteration moved nothing: one more would repeat it exactly.
        let again = run(
            &data,
            8,
            &Params {
                max_iter: state.iteration + 1,
                ..params.clone()
            },
        );
        assert_eq!(again.centroids, state.centroids);
        assert_eq!(again.iteration, state.iteration);
    }

    #[test]
    fn same_seed_same_centroids_other_seed_other_centroids() {
        let data = blobs(5, 40, 8, 1);
        let params = Params {
            k: 7,
            max_iter: 5,
            tol: 0.0,
            seed: 11,
            init: Init::Random,
            threads: 2,
            assignment: Assignment::new(false, Kernel::F32),
        };
        let a = run(&data, 8, &params);
        let b = run(&data, 8, &params);
        assert_eq!(a.centroids, b.centroids);
        let inertias = |s: &State| s.history.iter().map(|h| h.inertia).collect::<Vec<_>>();
        assert_eq!(inertias(&a), inertias(&b));
        assert_ne!(
            a.centroids,
            run(&data, 8, &Params { seed: 12, ..params }).centroids
        );
    }

    #[test]
    fn thread_count_is_bit_identical_and_partitioning_agrees_to_rounding() {
        let data = blobs(6, 100, 12, 9);
        let params = Params {
            k: 6,
            max_iter: 6,
            tol: 0.0,
            seed: 2,
            init: Init::Random,
            threads: 1,
            assignment: Assignment::new(false, Kernel::F32),
        };
        let one = run(&data, 12, &params);
        let parts = [
            Rows::dense(&data[..250 * 12], 12),
            Rows::dense(&data[250 * 12..], 12),
        ];
        let init = Init::Given(
            initial_centroids(&[Rows::dense(&data, 12)], 6, &Init::Random, 2).expect("init"),
        );
        let split = fit::<KMeansError>(
            &parts,
            &Params {
                threads: 3,
                init,
                ..params.clone()
            },
            None,
            &mut |_| Ok(()),
        )
        .expect("fit");
        // Same layout, other thread counts: exact sums make every grouping bit-identical.
        for threads in [2, 5] {
            let other = run(
                &data,
                12,
                &Params {
                    threads,
                    ..params.clone()
                },
            );
            assert_eq!(other.centroids, one.centroids, "threads = {threads}");
            assert_eq!(
                other
                    .history
                    .iter()
                    .map(|h| h.inertia.to_bits())
                    .collect::<Vec<_>>(),
                one.history
                    .iter()
                    .map(|h| h.inertia.to_bits())
                    .collect::<Vec<_>>()
            );
        }
        for (a, b) in one
            .centroids
            .as_slice()
            .iter()
            .zip(split.centroids.as_slice())
        {
            assert!((a - b).abs() <= 1e-6 * a.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn every_accumulation_gives_the_same_sums() {
        // 700 rows over 5 partitions (units of up to 4,096 rows: one a partition), k = 300:
        // tasks of 1-3 units; the choice by size would be per task tables (more rows than k / 2).
        let dims = 8;
        let data = blobs(10, 70, dims, 4);
        let cuts = [0, 90, 230, 231, 500, 700];
        let parts: Vec<Rows<'_>> = cuts
            .windows(2)
            .map(|w| Rows::dense(&data[w[0] * dims..w[1] * dims], dims))
            .collect();
        let shards = Shard::numbered(&parts);
        let centroids = initial_centroids(&parts, 300, &Init::Random, 3).expect("init");
        let scale = data_scale(&shards).expect("scale");
        let mut want = None;
        for threads in [1, 2, 3] {
            for how in [
                Accumulation::PerTask,
                Accumulation::Sparse,
                Accumulation::Shared,
            ] {
                let (tasks, _) =
                    map_tasks_as(&shards, &centroids, scale, threads, Mode::Full, Some(how));
                assert_eq!(
                    tasks.len(),
                    if how == Accumulation::Shared {
                        1
                    } else {
                        threads
                    },
                    "{how:?}"
                );
                assert!(
                    tasks
                        .iter()
                        .all(|t| t.is_sparse() == (how == Accumulation::Sparse))
                );
                let mut merged = merge_tasks(tasks, 300, dims, scale);
                merged.units.sort_by_key(|u| u.0);
                assert_eq!(merged.total(), 700);
                match &want {
                    None => want = Some(merged),
                    Some(w) => assert_eq!(&merged, w, "{threads} threads, {how:?}"),
                }
            }
        }
        // By size: tasks of at most k / 2 rows keep sparse tables.
        assert_eq!(
            Accumulation::choose(300, dims, 2, 150),
            Accumulation::Sparse
        );
        assert_eq!(
            Accumulation::choose(300, dims, 2, 151),
            Accumulation::PerTask
        );
        assert_eq!(
            Accumulation::choose(1 << 20, 512, 2, 1 << 20),
            Accumulation::Shared
        );
    }

    #[test]
    fn approximate_runs_are_deterministic_and_near_the_exact_run() {
        let data = blobs(48, 40, 16, 11);
        let params = |assignment, threads| Params {
            k: 48,
            max_iter: 8,
            tol: 0.0,
            seed: 2,
            init: Init::Random,
            threads,
            assignment,
        };
        let inertias =
            |s: &State| -> Vec<u64> { s.history.iter().map(|h| h.inertia.to_bits()).collect() };
        for kernel in [Kernel::F32, Kernel::Int8] {
            let exact = run(&data, 16, &params(Assignment::Full(kernel), 2));
            let approx = Assignment::Approx {
                lists: 0,
                probes: 2,
                kernel,
            };
            let a = run(&data, 16, &params(approx, 2));
            let b = run(&data, 16, &params(approx, 3));
            assert_eq!(a.centroids, b.centroids);
            assert_eq!(inertias(&a), inertias(&b));
            let gap = a.history[7].inertia / exact.history[7].inertia - 1.0;
            // Another trajectory (random init on blobs can land in another local minimum): no
            // worse than 5% (with f32 lists in fact 7% better).
            assert!(
                gap < 0.05,
                "{kernel:?}: approximate final inertia {gap:+.3} off the exact run"
            );
            // Probing every list is an exact search: the exact run's centroids, by the same
            // kernel (the integer one's labels are the arg-min of direct distances).
            let all = Assignment::Approx {
                lists: 5,
                probes: u32::MAX,
                kernel,
            };
            let c = run(&data, 16, &params(all, 2));
            assert_eq!(c.centroids, exact.centroids, "{kernel:?}");
            assert_eq!(all.approx(48), Some((5, u32::MAX as usize)));
            assert_eq!(approx.approx(48), Some((7, 2)));
        }
        assert_eq!(Assignment::Full(Kernel::F32).approx(48), None);
    }

    #[test]
    fn the_integer_approximate_search_gives_the_same_run_however_units_are_batched() {
        // 41 partitions of up to 100 rows: 41 map units, searched 16 at a time by 1 task, in
        // batches of other sizes by 2 and 3 tasks, and one at a time by 41.
        let dims = 16;
        let data = blobs(48, 85, dims, 13);
        let parts: Vec<Rows<'_>> = data
            .chunks(100 * dims)
            .map(|c| Rows::dense(c, dims))
            .collect();
        assert_eq!(parts.len(), 41);
        let fit_with = |threads| {
            let params = Params {
                k: 48,
                max_iter: 3,
                tol: 0.0,
                seed: 5,
                init: Init::Random,
                threads,
                assignment: Assignment::Approx {
                    lists: 0,
                    probes: 2,
                    kernel: Kernel::Int8,
                },
            };
            fit::<KMeansError>(&parts, &params, None, &mut |_| Ok(())).expect("fit")
        };
        let one = fit_with(1);
        for threads in [2, 3, 41] {
            let other = fit_with(threads);
            assert_eq!(other.centroids, one.centroids, "{threads} tasks");
            let bits =
                |s: &State| -> Vec<u64> { s.history.iter().map(|h| h.inertia.to_bits()).collect() };
            assert_eq!(bits(&other), bits(&one), "{threads} tasks");
        }
    }

    #[test]
    fn edge_cases_have_clear_rules() {
        let data = blobs(2, 5, 4, 5);
        let err = |params: Params| {
            let parts = [Rows::dense(&data, 4)];
            fit::<KMeansError>(&parts, &params, None, &mut |_| Ok(()))
                .expect_err("must fail")
                .to_string()
        };
        assert_eq!(
            err(Params {
                k: 11,
                ..Params::default()
            }),
            "k = 11 exceeds the number of vectors (10)"
        );
        assert_eq!(
            err(Params {
                k: 0,
                ..Params::default()
            }),
            "k must be at least 1"
        );
        // k = 1: the mean.
        let state = run(
            &data,
            4,
            &Params {
                k: 1,
                max_iter: 3,
                ..Params::default()
            },
        );
        for d in 0..4 {
            let mean = data
                .iter()
                .skip(d)
                .step_by(4)
                .map(|&v| f64::from(v))
                .sum::<f64>()
                / 10.0;
            assert!((f64::from(state.centroids.row(0)[d]) - mean).abs() < 1e-5);
        }
        // k = n with duplicate points: duplicates start as distinct centroids; the empty one is
        // re-seeded by a split and the run completes.
        let dup = [1.0f32, 1.0, 1.0, 1.0, 5.0, 5.0, 9.0, 9.0];
        let state = run(
            &dup,
            2,
            &Params {
                k: 4,
                max_iter: 4,
                tol: 0.0,
                ..Params::default()
            },
        );
        assert_eq!(state.iteration, 4);
        assert!(state.history.iter().any(|s| s.splits > 0) || state.history[0].inertia == 0.0);
    }

    #[test]
    fn pruned_assignment_gives_the_full_pass_result() {
        // Overlapping blobs (k above the blob count) so that labels keep changing for a while.
        // Centres within a few noise widths of each other, as HOG vectors are: the full pass's
        // expansion then ranks centroids as precisely as direct distances do (far-off centres
        // make near-ties that the two rank differently at float precision; `prune` tests those
        // against f64 brute force).
        let data = blobs_spread(10, 300, 32, 21, 4.0);
        for k in [1, 7, 40] {
            let params = Params {
                k,
                max_iter: 12,
                tol: 0.0,
                seed: 3,
                init: Init::Random,
                threads: 2,
                assignment: Assignment::new(false, Kernel::F32),
            };
            let full = run(&data, 32, &params);
            let others: Vec<(Assignment, State)> = [
                Assignment::Pruned(Kernel::F32),
                Assignment::Full(Kernel::Int8),
                Assignment::Pruned(Kernel::Int8),
            ]
            .into_iter()
            .map(|assignment| {
                let params = Params {
                    assignment,
                    ..params.clone()
                };
                (assignment, run(&data, 32, &params))
            })
            .collect();
            for (assignment, other) in &others {
                let what = assignment.name();
                assert_eq!(full.centroids, other.centroids, "k = {k}, {what}");
                for (a, b) in full.history.iter().zip(&other.history) {
                    assert!(
                        (a.inertia - b.inertia).abs() <= 1e-5 * a.inertia.max(1.0),
                        "k = {k}, {what}: {a:?} vs {b:?}"
                    );
                }
                // Bounds exist from iteration 2 on (k = 1 reaches its fixed point there).
                let kept: usize = other.history.iter().skip(1).map(|h| h.kept).sum();
                assert_eq!(
                    kept > 0,
                    assignment.pruned(),
                    "k = {k}, {what}: kept {kept}"
                );
            }
            assert!(full.history.iter().all(|h| h.kept == 0));
        }
    }

    #[test]
    fn plus_plus_sample_is_bounded() {
        let data = blobs(4, 500, 8, 7);
        let parts = [Rows::dense(&data, 8)];
        let c =
            initial_centroids(&parts, 4, &Init::PlusPlus { sample: Some(64) }, 1).expect("init");
        assert_eq!((c.k(), c.dims()), (4, 8));
    }
}
