//! Approximate assignment for very large `k`: an inverted file over the centroids.
//!
//! An exact pass costs `n x k x d` per iteration: at a million words, hours on one machine.
//! Million-word vocabularies are built with approximate assignment instead; this is the inverted
//! file faiss uses to train million-centroid quantizers, with lists balanced. Every iteration
//! the centroids are indexed ([`Index::new`]): `lists` coarse centres are a strided sample of
//! the centroids, each with a bias added to its squared distance, tuned over [`BALANCE_ROUNDS`]
//! rounds on a strided sample of the centroids (at most [`TRAIN_PER_LIST`] per list) so that
//! lists come out of similar sizes; every centroid joins the list of its nearest centre by
//! biased distance, and lists are stored contiguously. The bias matters in high dimensions: a
//! centre near the middle of the data (a centroid that averages far-apart vectors) is near
//! everything (hubness); with centres refined into means by Lloyd iterations, as faiss trains
//! its quantizers, one list held up to 16,041 of 16,384 words on blobs (`eval/million/README.md`).
//! At a fixed step the tuning can overshoot and oscillate (on blobs at k = 262,144 the lists it
//! left cost a vector 6x what even lists would), so each round steps from the most even biases
//! so far, halving the step after a round that made the lists less even, and the tuning stops
//! once the sample's sum of squared list sizes is within 10% of equal sizes' (there
//! within 12 rounds, on the paper's HOG within 9); evening lists out further would split the
//! clusters the data has between lists. Even lists cost a vector less for the same number of
//! lists probed, so more are probed by default ([`DEFAULT_PROBES`]; `eval/paper_scale/README.md`).
//! A vector is compared with the coarse centres (biased alike), then only with the members of
//! its `probes` nearest lists ([`Index::search`]), one GEMM per list against the rows that
//! probe it. With `lists = sqrt(k)` and `probes` lists searched a vector costs about
//! `(1 + probes) sqrt(k)` distances instead of `k`.
//!
//! With the integer kernel ([`Index::with_kernel`], [`Index::search_int8`]) each list is padded
//! to whole panels and quantised, and so are the coarse centres with their biases: the rows of
//! many map units are probed unit by unit by the integer kernel (the exact `probes` least
//! `dist2 + bias`, re-ranked by direct distance, where the f32 search ranks by the GEMM
//! expansion), then searched together list by list ([`quant::search_lists`]): a list's codes
//! are read once for all the rows probing it, and each row gets the exact nearest member of its
//! lists by direct distance, re-ranking the candidates the kernel's error bound leaves.
//!
//! The index depends only on the centroids (no random choice, no thread count), and the search
//! of a row only on the row and the map unit it is searched with, so runs are deterministic and
//! every engine, which builds the index from the same broadcast centroids and maps the same
//! units, gives the same labels. Ties go to the lowest centroid index among those searched.

use rand::SeedableRng;
use rand::seq::index;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::assign::{self, AssignScratch, CENTROID_BLOCK, Centroids, ROW_BLOCK};
use super::{Kernel, quant};
use crate::partition::{Matrix, Rows};

/// Centroids per list on which the biases are tuned, at most (keeps the index build a few
/// seconds at a million words).
pub const TRAIN_PER_LIST: usize = 64;
/// Rounds of bias tuning, at most.
pub const BALANCE_ROUNDS: usize = 30;
/// The bias step of the first round, as a fraction of the mean squared distance to a centre per
/// unit of relative excess size.
const BALANCE_STEP: f64 = 0.1;
/// The factor the bias step shrinks by after a round that left the lists less even.
const BALANCE_BACKOFF: f64 = 0.5;
/// Lists even enough that the tuning stops: a sum of squared sizes at most this many times that
/// of equal sizes (the mean list size a vector meets when lists are probed as often as they are
/// large, over the mean size).
const BALANCE_EVEN: f64 = 1.1;
/// Rows per parallel chunk of the index build (fixed, so the build does not depend on threads).
const BUILD_CHUNK: usize = 4096;

/// Lists the approximate search visits per vector unless told (k-means and encodings).
pub const DEFAULT_PROBES: u32 = 10;

/// The version of the lists [`Index::new`] makes of a set of centroids: raised whenever they
/// change, so results searched with other lists are not taken for this build's (`vocab run`
/// keys its approximate stages with it). 2: the bias tuning steps from its most even round.
pub const LISTS_VERSION: u32 = 2;

/// The approximate search's settings as encodings record them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Search {
    /// Lists of the index (0: [`default_lists`]).
    pub lists: u32,
    /// Lists searched per vector.
    pub probes: u32,
}

impl Search {
    /// The lists of an index over `k` centroids.
    pub fn lists_for(self, k: usize) -> usize {
        match self.lists {
            0 => default_lists(k),
            l => (l as usize).min(k),
        }
    }

    /// The index over `centroids` and the probes to search it with.
    pub fn index(self, centroids: &Centroids) -> (Index, usize) {
        let lists = self.lists_for(centroids.k());
        (Index::new(centroids, lists), self.probes as usize)
    }
}

/// The number of lists for `k` centroids when none is given: `sqrt(k)`, at least 1.
pub fn default_lists(k: usize) -> usize {
    ((k as f64).sqrt().round() as usize).clamp(1, k.max(1))
}

/// An inverted file over a set of centroids.
#[derive(Debug, Clone)]
pub struct Index {
    /// The coarse centres of the non-empty lists.
    coarse: Centroids,
    /// Centroid ids in list order (ascending within a list).
    ids: Vec<u32>,
    /// List `l` holds `grouped` rows `offsets[l]..offsets[l + 1]`.
    offsets: Vec<usize>,
    /// The centroids in list order.
    grouped: Centroids,
    /// With the integer kernel, `grouped` quantised: each list then starts at a whole panel,
    /// padded by repeating its last member (same id, same distances), the padding kept out of
    /// the integer search.
    quantized: Option<quant::QuantCentroids>,
    /// With the integer kernel, the coarse centres quantised with their biases: rows then probe
    /// the lists of the exact `probes` least `dist2 + bias` ([`quant::nearest_few_quantized`]).
    coarse_quantized: Option<quant::QuantCentroids>,
}

/// Reusable buffers of [`Index::search`].
#[derive(Debug, Default)]
pub struct SearchScratch {
    assign: AssignScratch,
    lists: Vec<u32>,
    list_dists: Vec<f32>,
    starts: Vec<usize>,
    rows: Vec<u32>,
    gathered: Vec<f32>,
    dots: Vec<f32>,
    best: Vec<f32>,
    best_id: Vec<u32>,
    /// The integer search's buffers.
    lists_int8: quant::ListScratch,
    few: quant::FewScratch,
}

impl Index {
    /// Indexes `centroids` in (up to) `lists` lists; lists left empty by the training are
    /// dropped, so every list searched holds at least one centroid.
    ///
    /// # Panics
    /// If there are no centroids.
    pub fn new(centroids: &Centroids, lists: usize) -> Self {
        Self::with_kernel(centroids, lists, Kernel::F32)
    }

    /// [`Index::new`] searched by `kernel`: with [`Kernel::Int8`] the lists are padded to whole
    /// panels and quantised, for [`Index::search_int8`]; the lists and their members are the
    /// same.
    ///
    /// # Panics
    /// If there are no centroids.
    pub fn with_kernel(centroids: &Centroids, lists: usize, kernel: Kernel) -> Self {
        let (k, d) = (centroids.k(), centroids.dims());
        assert!(k > 0, "no centroids to index");
        let lists = lists.clamp(1, k);
        let m = lists.saturating_mul(TRAIN_PER_LIST).min(k);
        let mut train = Vec::with_capacity(m * d);
        for i in 0..m {
            train.extend_from_slice(centroids.row(i * k / m));
        }
        let mut centres = Vec::with_capacity(lists * d);
        for l in 0..lists {
            centres.extend_from_slice(&train[(l * m / lists) * d..][..d]);
        }
        let bias = balance(Matrix::dense(&train, d), &centres);
        let coarse = Centroids::biased(centres, d, &bias);
        let (labels, _) = nearest_in_chunks(Matrix::dense(centroids.as_slice(), d), &coarse);
        // Counting sort by list (stable: ids ascend within a list); empty lists dropped; with
        // the integer kernel each list padded to whole panels by repeating its last member.
        let align = match kernel {
            Kernel::F32 => 1,
            Kernel::Int8 => quant::PANEL,
        };
        let mut sizes = vec![0usize; lists];
        for &l in &labels {
            sizes[l as usize] += 1;
        }
        let kept: Vec<usize> = (0..lists).filter(|&l| sizes[l] > 0).collect();
        let mut renumber = vec![u32::MAX; lists];
        let mut offsets = Vec::with_capacity(kept.len() + 1);
        offsets.push(0);
        let mut kept_coarse = Vec::with_capacity(kept.len() * d);
        let mut kept_bias = Vec::with_capacity(kept.len());
        for (new, &l) in kept.iter().enumerate() {
            renumber[l] = new as u32;
            offsets.push(offsets[new] + sizes[l].next_multiple_of(align));
            kept_coarse.extend_from_slice(coarse.row(l));
            kept_bias.push(bias[l]);
        }
        let mut fill = offsets[..kept.len()].to_vec();
        let mut ids = vec![0u32; offsets[kept.len()]];
        for (j, &l) in labels.iter().enumerate() {
            let slot = &mut fill[renumber[l as usize] as usize];
            ids[*slot] = j as u32;
            *slot += 1;
        }
        for (list, &end) in fill.iter().enumerate() {
            let last = ids[end - 1];
            ids[end..offsets[list + 1]].fill(last);
        }
        let mut grouped = Vec::with_capacity(ids.len() * d);
        for &j in &ids {
            grouped.extend_from_slice(centroids.row(j as usize));
        }
        let grouped = Centroids::new(grouped, d);
        let quantized = (kernel == Kernel::Int8).then(|| {
            let mut q = quant::QuantCentroids::new(&grouped);
            let padding = fill
                .iter()
                .zip(&offsets[1..])
                .flat_map(|(&end, &next)| end..next);
            q.never(padding);
            q
        });
        let coarse_quantized = (kernel == Kernel::Int8).then(|| {
            let coarse = Centroids::new(kept_coarse.clone(), d);
            quant::QuantCentroids::biased(&coarse, &kept_bias)
        });
        Self {
            coarse: Centroids::biased(kept_coarse, d, &kept_bias),
            coarse_quantized,
            ids,
            offsets,
            quantized,
            grouped,
        }
    }

    /// The kernel the index was made for ([`Index::with_kernel`]).
    pub fn kernel(&self) -> Kernel {
        match self.quantized {
            Some(_) => Kernel::Int8,
            None => Kernel::F32,
        }
    }

    /// Number of (non-empty) lists.
    pub fn lists(&self) -> usize {
        self.coarse.k()
    }

    /// Centroids in each list, in list order (with the integer kernel's padding).
    pub fn sizes(&self) -> Vec<usize> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Bytes the index for `kernel` holds beyond the centroids it was built from (the grouped
    /// copy, ids, coarse centres; with the integer kernel the lists padded to whole panels and
    /// quantised: a byte a value and six terms a centroid), for memory plans.
    pub fn bytes(k: usize, dims: usize, lists: usize, kernel: Kernel) -> u64 {
        let (k, dims, lists) = (k as u64, dims as u64, lists as u64);
        let rows = match kernel {
            Kernel::F32 => k,
            Kernel::Int8 => k + lists * (quant::PANEL as u64 - 1),
        };
        let quantized = match kernel {
            Kernel::F32 => 0,
            Kernel::Int8 => rows * (dims.next_multiple_of(4) + 6 * 4),
        };
        (rows * dims + rows + lists * dims + lists) * 4 + (lists + 1) * 8 + quantized
    }

    /// Assigns each row of `x` to the nearest centroid among the members of its `probes` nearest
    /// lists (clamped to `1..=lists`): `labels[i]` and `dist[i]`, the squared distance clamped at
    /// zero as [`assign::assign`] gives it. With `probes >= lists` this is an exact search.
    ///
    /// # Panics
    /// If dims differ or the output slices are not `x.rows()` long.
    pub fn search(
        &self,
        x: Matrix<'_>,
        probes: usize,
        scratch: &mut SearchScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) {
        let (n, d) = (x.rows(), x.dims());
        assert!(
            labels.len() == n && dist.len() == n,
            "output slices must hold {n} rows"
        );
        let lists = self.lists();
        let probes = probes.clamp(1, lists);
        let s = scratch;
        s.lists.clear();
        self.probe_into((x, None), probes, s, None);
        quant::rows_by_list(&s.lists, probes, lists, &mut s.starts, &mut s.rows);
        s.best.clear();
        s.best.resize(n, f32::INFINITY);
        s.best_id.clear();
        s.best_id.resize(n, u32::MAX);
        s.dots.resize(ROW_BLOCK * CENTROID_BLOCK, 0.0);
        s.gathered.resize(ROW_BLOCK * d, 0.0);
        let norms = self.grouped.norms();
        for l in 0..lists {
            let (c_lo, c_hi) = (self.offsets[l], self.offsets[l + 1]);
            for rows in s.rows[s.starts[l]..s.starts[l + 1]].chunks(ROW_BLOCK) {
                for (i, &r) in rows.iter().enumerate() {
                    s.gathered[i * d..][..d].copy_from_slice(x.row(r as usize));
                }
                let q = Matrix::dense(&s.gathered[..rows.len() * d], d);
                for c0 in (c_lo..c_hi).step_by(CENTROID_BLOCK) {
                    let bn = CENTROID_BLOCK.min(c_hi - c0);
                    let dots = &mut s.dots[..rows.len() * bn];
                    assign::block_dots(q, &self.grouped, c0, bn, dots);
                    for (i, &r) in rows.iter().enumerate() {
                        let r = r as usize;
                        // Accept equal values too: the lower centroid id wins a tie.
                        let bound = next_up(s.best[r]);
                        if let Some((j, v)) =
                            assign::row_min(&dots[i * bn..][..bn], &norms[c0..c0 + bn], bound)
                        {
                            let id = self.ids[c0 + j];
                            if v < s.best[r] || id < s.best_id[r] {
                                s.best[r] = v;
                                s.best_id[r] = id;
                            }
                        }
                    }
                }
            }
        }
        for i in 0..n {
            let xi = x.row(i);
            labels[i] = s.best_id[i];
            dist[i] = (assign::dot(xi, xi) + s.best[i]).max(0.0);
        }
    }

    /// Appends to `probed` the `probes` lists (clamped to `1..=lists`) each row of `x`
    /// searches, nearest coarse centre first: the first step of [`Index::search`] and of
    /// [`Index::search_int8`]. An index made for the integer kernel
    /// ranks the centres by the integer kernel, re-ranked by direct distance: the exact
    /// `probes` least `dist2 + bias` (ties to the lower list); the f32 one by the GEMM expansion.
    pub fn probe(
        &self,
        x: Matrix<'_>,
        probes: usize,
        scratch: &mut SearchScratch,
        probed: &mut Vec<u32>,
    ) {
        self.probe_into((x, None), probes, scratch, Some(probed));
    }

    /// [`Index::probe`], appending to `probed`, or to `scratch.lists` when it is `None`; the
    /// integer kernel's probe quantises the rows unless given them (`xq`).
    fn probe_into(
        &self,
        (x, xq): (Matrix<'_>, Option<quant::QuantSlice<'_>>),
        probes: usize,
        scratch: &mut SearchScratch,
        probed: Option<&mut Vec<u32>>,
    ) {
        let (n, probes) = (x.rows(), probes.clamp(1, self.lists()));
        let probed = probed.unwrap_or(&mut scratch.lists);
        let at = probed.len();
        probed.resize(at + n * probes, 0);
        let (words, dists) = (&mut probed[at..], &mut scratch.list_dists);
        dists.resize(n * probes, 0.0);
        let coarse = &self.coarse;
        match &self.coarse_quantized {
            Some(cq) => {
                let owned;
                let xq = match xq {
                    Some(xq) => xq,
                    None => {
                        owned = quant::QuantRows::new(Rows::F32(x));
                        owned.slice(0, n)
                    }
                };
                let few = &mut scratch.few;
                quant::nearest_few_quantized(x, xq, cq, coarse, few, probes, words, dists);
            }
            None => assign::nearest_few(x, coarse, &mut scratch.assign, probes, words, dists),
        }
    }

    /// The integer kernel's search of the rows of `x`: each probes its `probes` lists (clamped
    /// to `1..=lists`) as [`Index::probe`] does, then all are searched together list by list
    /// ([`quant::search_lists`]), the rows quantised once for both. `labels[i]` is the nearest
    /// member of row `i`'s lists by [`assign::dist2`] (ties to the lowest id) and `dist[i]` that
    /// distance. Rows from many map units are searched together, so each list's codes are read
    /// once for all of them; a row's result depends only on the row and its lists.
    ///
    /// # Panics
    /// If the index was not made for the integer kernel ([`Index::with_kernel`]), or as
    /// [`quant::search_lists`].
    pub fn search_int8(
        &self,
        x: Matrix<'_>,
        probes: usize,
        scratch: &mut SearchScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) {
        let xq = quant::QuantRows::new(Rows::F32(x));
        self.search_quantized(x, xq.slice(0, x.rows()), probes, scratch, labels, dist);
    }

    /// [`Index::search_int8`] of rows already quantised (`xq`, the rows of `x` as
    /// [`quant::QuantRows`] quantises them from their source: u8 rows keep their bytes).
    ///
    /// # Panics
    /// As [`Index::search_int8`], or if `xq` does not hold `x.rows()` rows.
    pub fn search_quantized(
        &self,
        x: Matrix<'_>,
        xq: quant::QuantSlice<'_>,
        probes: usize,
        scratch: &mut SearchScratch,
        labels: &mut [u32],
        dist: &mut [f32],
    ) {
        let cq = (self.quantized.as_ref()).expect("an index made for the integer kernel");
        let probes = probes.clamp(1, self.lists());
        assert_eq!(xq.len(), x.rows(), "one quantised row per row");
        scratch.lists.clear();
        self.probe_into((x, Some(xq)), probes, scratch, None);
        let lists = quant::Lists {
            start: &self.offsets,
            ids: &self.ids,
        };
        let (probed, buffers) = (&scratch.lists, &mut scratch.lists_int8);
        quant::search_lists(
            x,
            xq,
            cq,
            &self.grouped,
            lists,
            probed,
            buffers,
            labels,
            dist,
        );
    }
}

/// The least float above `x` (`f32::next_up`, newer than the crate's minimum Rust).
fn next_up(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        x
    } else if x == 0.0 {
        f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() + 1)
    } else {
        f32::from_bits(x.to_bits() - 1)
    }
}

/// The biases that even out the lists of `centres` (rows of `train.dims()` values) on the sample
/// `train`: every centre carries a bias added to its squared distance, raised for lists above
/// the mean size and lowered below it, stepping from the most even biases so far (the least sum
/// of squared sizes; the first such on ties, all zero at first), the step halved after a round
/// that made the lists less even, for at most [`BALANCE_ROUNDS`] rounds or until they are even
/// enough ([`BALANCE_EVEN`]). Returns the most even biases.
fn balance(train: Matrix<'_>, centres: &[f32]) -> Vec<f32> {
    let (m, d) = (train.rows(), train.dims());
    let lists = centres.len() / d;
    let target = m as f64 / lists as f64;
    let even = BALANCE_EVEN * (m as f64).powi(2) / lists as f64;
    let mut bias = vec![0f32; lists];
    // The most even biases so far: their sum of squared sizes, the biases, the sizes.
    let mut best = (u128::MAX, bias.clone(), Vec::new());
    let (mut scale, mut step) = (0f64, BALANCE_STEP);
    for round in 0..BALANCE_ROUNDS {
        let coarse = Centroids::biased(centres.to_vec(), d, &bias);
        let (labels, dist) = nearest_in_chunks(train, &coarse);
        if round == 0 {
            // The typical squared distance to a centre sets the step.
            scale = dist.iter().map(|&v| f64::from(v)).sum::<f64>() / m as f64;
        }
        let mut counts = vec![0u32; lists];
        for &l in &labels {
            counts[l as usize] += 1;
        }
        let squares = counts.iter().map(|&c| u128::from(c).pow(2)).sum::<u128>();
        if squares < best.0 {
            best = (squares, bias, counts);
        } else {
            // Overshot: step again from the best biases, half as far.
            step *= BALANCE_BACKOFF;
        }
        // Even enough; or nothing to tune by (every sample row at its centre: no bias moves
        // a row, so more rounds would only repeat this one).
        if best.0 as f64 <= even || scale == 0.0 {
            break;
        }
        bias = (best.1.iter().zip(&best.2))
            .map(|(&b, &count)| b + (step * scale * (f64::from(count) / target - 1.0)) as f32)
            .collect();
    }
    best.1
}

/// Nearest of `centroids` for every row of `x`, in parallel over fixed chunks of rows.
fn nearest_in_chunks(x: Matrix<'_>, centroids: &Centroids) -> (Vec<u32>, Vec<f32>) {
    let n = x.rows();
    let mut labels = vec![0u32; n];
    let mut dist = vec![0f32; n];
    labels
        .par_chunks_mut(BUILD_CHUNK)
        .zip(dist.par_chunks_mut(BUILD_CHUNK))
        .enumerate()
        .for_each_init(AssignScratch::default, |scratch, (c, (l, dd))| {
            let start = c * BUILD_CHUNK;
            assign::assign(x.slice(start, start + l.len()), centroids, scratch, l, dd);
        });
    (labels, dist)
}

/// How well approximate assignment did on a sample of the vectors (reported per run).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recall {
    /// Vectors sampled.
    pub sample: usize,
    /// Of those, how many the approximate search gave their exact nearest centroid (the same
    /// index, or one at the same distance).
    pub exact: usize,
    /// Sum of squared distances to the approximate labels on the sample.
    pub approx_inertia: f64,
    /// Sum of squared distances to the exact nearest centroids on the sample.
    pub exact_inertia: f64,
}

impl Recall {
    /// The fraction of sampled vectors given their exact nearest centroid.
    pub fn fraction(&self) -> f64 {
        self.exact as f64 / self.sample.max(1) as f64
    }

    /// How much larger the sample's inertia is than with exact assignment (0.01 = 1%).
    pub fn inertia_gap(&self) -> f64 {
        if self.exact_inertia > 0.0 {
            self.approx_inertia / self.exact_inertia - 1.0
        } else {
            0.0
        }
    }
}

/// Compares approximate assignment (`lists`, `probes`, searched by `kernel`) with exact
/// assignment to `centroids` on `sample` vectors drawn from `parts` (seeded; all of them if there
/// are fewer).
pub fn recall(
    parts: &[Rows<'_>],
    centroids: &Centroids,
    search: (usize, usize, Kernel),
    sample: usize,
    seed: u64,
) -> Recall {
    let n: usize = parts.iter().map(Rows::rows).sum();
    let local =
        recall_by::<std::convert::Infallible>(n, centroids, search, sample, seed, &mut |picks| {
            let mut out = Vec::new();
            for &p in picks {
                super::push_global_row(parts, p, &mut out);
            }
            Ok(out)
        });
    match local {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// [`recall`] over `n` vectors that lie elsewhere: `rows` returns the rows of the global
/// indices it is given, in that order (a cluster driver asks the nodes holding them); the same
/// indices are sampled, so the figures are the same.
pub fn recall_by<E>(
    n: usize,
    centroids: &Centroids,
    (lists, probes, kernel): (usize, usize, Kernel),
    sample: usize,
    seed: u64,
    rows: &mut super::RowsOf<'_, E>,
) -> Result<Recall, E> {
    let d = centroids.dims();
    let m = sample.min(n);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut picks = index::sample(&mut rng, n, m).into_vec();
    picks.sort_unstable();
    let rows = rows(&picks)?;
    let x = Matrix::dense(&rows, d);
    let (exact_labels, exact_dist) = nearest_in_chunks(x, centroids);
    let index = Index::with_kernel(centroids, lists, kernel);
    let (mut labels, mut dist) = (vec![0u32; m], vec![0f32; m]);
    let mut scratch = SearchScratch::default();
    match kernel {
        Kernel::F32 => {
            for start in (0..m).step_by(super::UNIT_ROWS) {
                let end = (start + super::UNIT_ROWS).min(m);
                let (l, dd) = (&mut labels[start..end], &mut dist[start..end]);
                index.search(x.slice(start, end), probes, &mut scratch, l, dd);
            }
        }
        Kernel::Int8 => index.search_int8(x, probes, &mut scratch, &mut labels, &mut dist),
    }
    let (mut exact, mut exact_inertia) = (0, 0f64);
    for i in 0..m {
        let (a, e) = (labels[i] as usize, exact_labels[i] as usize);
        let (da, de) = (
            assign::dist2(x.row(i), centroids.row(a)),
            assign::dist2(x.row(i), centroids.row(e)),
        );
        if a == e || da <= de {
            exact += 1;
        }
        // Inertias measured alike: the f32 search's distances are the GEMM expansion's, as the
        // exact pass's are; the integer search's are direct, so the exact side is too (the
        // nearer of the two words, should the expansion's rounding have missed a tie).
        exact_inertia += f64::from(match kernel {
            Kernel::F32 => exact_dist[i],
            Kernel::Int8 => da.min(de),
        });
    }
    Ok(Recall {
        sample: m,
        exact,
        approx_inertia: dist.iter().map(|&v| f64::from(v)).sum(),
        exact_inertia,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmeans::assign::tests::values;

    fn blobs(clusters: usize, per: usize, d: usize) -> Vec<f32> {
        let centers = values(clusters * d, 7);
        let noise = values(clusters * per * d, 8);
        (0..clusters * per * d)
            .map(|at| {
                let (p, i) = (at / d, at % d);
                centers[(p % clusters) * d + i] * 40.0 + noise[at]
            })
            .collect()
    }

    #[test]
    fn every_centroid_is_in_one_list_and_lists_are_not_empty() {
        let d = 8;
        let c = Centroids::new(values(500 * d, 3), d);
        let index = Index::new(&c, 23);
        assert!(index.lists() <= 23 && index.lists() > 1);
        assert!(index.sizes().iter().all(|&s| s > 0));
        let mut ids = index.ids.clone();
        ids.sort_unstable();
        assert_eq!(ids, (0..500).collect::<Vec<u32>>());
        // Each list's rows are its members' rows, ids ascending within the list.
        for l in 0..index.lists() {
            let members = &index.ids[index.offsets[l]..index.offsets[l + 1]];
            assert!(members.windows(2).all(|w| w[0] < w[1]));
            for (at, &j) in members.iter().enumerate() {
                assert_eq!(index.grouped.row(index.offsets[l] + at), c.row(j as usize));
            }
        }
        // Built twice, the same index.
        let again = Index::new(&c, 23);
        assert_eq!((again.ids, again.offsets), (index.ids, index.offsets));
    }

    #[test]
    fn the_balancing_evens_out_lists_where_hubs_would_take_most_words() {
        // Words drawn as vectors near blobs in 256 dimensions: unbiased, a few centres near
        // the middle of the data are nearest to most words.
        let (d, lists) = (256, 48);
        let c = Centroids::new(blobs(600, 4, d), d);
        let sizes = |index: &Index| {
            let mut sizes = index.sizes();
            sizes.sort_unstable();
            sizes
        };
        let squares = |sizes: &[usize]| sizes.iter().map(|&s| s * s).sum::<usize>() as f64;
        let even = (c.k() * c.k()) as f64 / lists as f64;
        let plain = {
            let centres: Vec<f32> = (0..lists)
                .flat_map(|l| c.row(l * c.k() / lists).to_vec())
                .collect();
            let x = Matrix::dense(c.as_slice(), d);
            let (labels, _) = nearest_in_chunks(x, &Centroids::new(centres, d));
            let mut counts = vec![0usize; lists];
            labels.iter().for_each(|&l| counts[l as usize] += 1);
            counts
        };
        assert!(
            squares(&plain) > 2.5 * even,
            "no hubs without biases: {plain:?}"
        );
        let index = Index::new(&c, lists);
        let sizes = sizes(&index);
        assert!(squares(&sizes) < 1.25 * even, "uneven lists: {sizes:?}");
        assert!(
            sizes[sizes.len() - 1] < 2 * c.k() / lists,
            "a list too large: {sizes:?}"
        );
    }

    #[test]
    fn degenerate_vocabularies_still_search_correctly() {
        let d = 4;
        let x = values(50 * d, 11);
        let x = Matrix::dense(&x, d);
        // One word; and many identical words (all in one list, ties to the lowest id).
        for c in [
            Centroids::new(values(d, 12), d),
            Centroids::new(values(d, 13).repeat(40), d),
        ] {
            for (lists, probes) in [(1, 0), (usize::MAX, 1), (7, usize::MAX)] {
                let index = Index::new(&c, lists);
                let (mut got, mut dist) = (vec![9u32; 50], vec![0f32; 50]);
                index.search(
                    x,
                    probes,
                    &mut SearchScratch::default(),
                    &mut got,
                    &mut dist,
                );
                assert!(
                    got.iter().all(|&l| l == 0),
                    "{lists} lists, {probes} probes: {got:?}"
                );
                for (i, &got) in dist.iter().enumerate() {
                    let want = assign::dist2(x.row(i), c.row(0));
                    assert!((got - want).abs() <= 1e-5 * want.max(1.0));
                }
            }
        }
    }

    #[test]
    fn probing_every_list_is_the_exact_search() {
        let d = 16;
        let x = values(700 * d, 1);
        let c = Centroids::new(values(300 * d, 2), d);
        let index = Index::new(&c, 17);
        let x = Matrix::dense(&x, d);
        let (want, want_dist) = nearest_in_chunks(x, &c);
        let (mut got, mut dist) = (vec![0u32; 700], vec![0f32; 700]);
        index.search(
            x,
            usize::MAX,
            &mut SearchScratch::default(),
            &mut got,
            &mut dist,
        );
        for i in 0..700 {
            // The same nearest centroid (by direct distance: GEMM blocks may round differently).
            let (a, b) = (got[i] as usize, want[i] as usize);
            let (da, db) = (
                assign::dist2(x.row(i), c.row(a)),
                assign::dist2(x.row(i), c.row(b)),
            );
            assert!(
                a == b || (da - db).abs() <= 1e-5 * db,
                "row {i}: {a} vs {b}"
            );
            assert!((dist[i] - want_dist[i]).abs() <= 1e-4 * want_dist[i].max(1e-3));
        }
    }

    #[test]
    fn a_row_gets_the_nearest_member_of_its_probed_lists_ties_to_the_lowest_id() {
        let d = 4;
        // Duplicated centroids: every tie must go to the lower id.
        let base = values(60 * d, 5);
        let mut data = base.clone();
        data.extend_from_slice(&base);
        let c = Centroids::new(data, d);
        let index = Index::new(&c, 8);
        let x = values(300 * d, 6);
        let x = Matrix::dense(&x, d);
        for probes in [1, 2, 3] {
            let (mut got, mut dist) = (vec![0u32; 300], vec![0f32; 300]);
            index.search(
                x,
                probes,
                &mut SearchScratch::default(),
                &mut got,
                &mut dist,
            );
            // Brute force over the members of the probed lists.
            let (mut lists, mut ld) = (vec![0u32; 300 * probes], vec![0f32; 300 * probes]);
            assign::nearest_few(
                x,
                &index.coarse,
                &mut AssignScratch::default(),
                probes,
                &mut lists,
                &mut ld,
            );
            for i in 0..300 {
                let mut members: Vec<u32> = lists[i * probes..][..probes]
                    .iter()
                    .flat_map(|&l| {
                        index.ids[index.offsets[l as usize]..index.offsets[l as usize + 1]]
                            .iter()
                            .copied()
                    })
                    .collect();
                members.sort_unstable();
                let best = members
                    .iter()
                    .map(|&j| assign::dist2(x.row(i), c.row(j as usize)))
                    .fold(f32::INFINITY, f32::min);
                let j = got[i] as usize;
                assert!(members.contains(&got[i]), "row {i}: {j} not probed");
                assert!(assign::dist2(x.row(i), c.row(j)) <= best * (1.0 + 1e-5) + 1e-6);
                // The copy of a centroid (id + 60) never wins over the original.
                assert!(j < 60, "row {i}: tie went to the copy {j}");
            }
        }
    }

    /// The integer search of `x` (in `pieces` searched one after another, each probing its
    /// own lists) against the brute-force arg-min of `dist2` over the probed lists' members.
    fn check_int8(c: &Centroids, lists: usize, x: Matrix<'_>, probes: usize, pieces: &[usize]) {
        let index = Index::with_kernel(c, lists, Kernel::Int8);
        let n = x.rows();
        let mut scratch = SearchScratch::default();
        let mut probed = Vec::new();
        index.probe(x, probes, &mut scratch, &mut probed);
        let asked = probes;
        let probes = probed.len() / n;
        // All rows at once, then in pieces: the same labels and distances, bit for bit.
        let (mut labels, mut dist) = (vec![0u32; n], vec![0f32; n]);
        index.search_int8(x, asked, &mut scratch, &mut labels, &mut dist);
        let (mut start, mut again, mut again_dist) = (0, vec![0u32; n], vec![0f32; n]);
        for &len in pieces.iter().chain([&(n - pieces.iter().sum::<usize>())]) {
            let end = start + len;
            index.search_int8(
                x.slice(start, end),
                asked,
                &mut SearchScratch::default(),
                &mut again[start..end],
                &mut again_dist[start..end],
            );
            start = end;
        }
        assert_eq!(labels, again);
        assert_eq!(
            dist.iter().map(|d| d.to_bits()).collect::<Vec<_>>(),
            again_dist.iter().map(|d| d.to_bits()).collect::<Vec<_>>()
        );
        for i in 0..n {
            let mut best = (f32::INFINITY, u32::MAX);
            for &l in &probed[i * probes..][..probes] {
                for &j in &index.ids[index.offsets[l as usize]..index.offsets[l as usize + 1]] {
                    let d = assign::dist2(x.row(i), c.row(j as usize));
                    if d < best.0 || (d == best.0 && j < best.1) {
                        best = (d, j);
                    }
                }
            }
            assert_eq!(
                (labels[i], dist[i].to_bits()),
                (best.1, best.0.to_bits()),
                "row {i}"
            );
        }
    }

    #[test]
    fn the_integer_search_is_the_exact_nearest_of_the_probed_members_however_rows_are_batched() {
        let d = 40;
        let data = blobs(50, 30, d);
        let x = Matrix::dense(&data, d);
        // Centroids near the blobs, and duplicated ones (ties go to the lower id).
        let near = blobs(50, 3, d);
        let mut twice = near[..60 * d].to_vec();
        twice.extend_from_slice(&near[..60 * d]);
        for (c, lists) in [
            (Centroids::new(near.clone(), d), 12),
            (Centroids::new(twice, d), 7),
            (Centroids::new(near[..5 * d].to_vec(), d), 3),
        ] {
            for probes in [1, 2, 5] {
                check_int8(&c, lists, x, probes, &[1, 2, 3, 700, 37]);
            }
        }
    }

    #[test]
    fn the_integer_index_probes_the_exact_nearest_centres_by_biased_distance() {
        let d = 40;
        let data = blobs(50, 30, d);
        let x = Matrix::dense(&data, d);
        let c = Centroids::new(blobs(50, 3, d), d);
        let index = Index::with_kernel(&c, 12, Kernel::Int8);
        let cq = index.coarse_quantized.as_ref().expect("an integer index");
        let bias = cq.biases();
        assert!(
            bias.iter().any(|&b| b != 0.0),
            "the balancing moved no centre"
        );
        for probes in [1, 3, 12] {
            let mut probed = Vec::new();
            index.probe(x, probes, &mut SearchScratch::default(), &mut probed);
            let probes = probes.min(index.lists());
            for i in 0..x.rows() {
                let mut all: Vec<(f32, u32)> = (0..index.lists())
                    .map(|l| {
                        (
                            assign::dist2(x.row(i), index.coarse.row(l)) + bias[l],
                            l as u32,
                        )
                    })
                    .collect();
                all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                let want: Vec<u32> = all[..probes].iter().map(|&(_, l)| l).collect();
                assert_eq!(&probed[i * probes..][..probes], &want[..], "row {i}");
            }
        }
    }

    #[test]
    fn integer_lists_start_at_whole_panels_and_hold_every_centroid_once_besides_padding() {
        let d = 8;
        let c = Centroids::new(values(500 * d, 3), d);
        let plain = Index::new(&c, 23);
        let index = Index::with_kernel(&c, 23, Kernel::Int8);
        assert_eq!(index.lists(), plain.lists());
        for l in 0..index.lists() {
            let (lo, hi) = (index.offsets[l], index.offsets[l + 1]);
            assert!(lo.is_multiple_of(quant::PANEL) && hi > lo);
            let members = &plain.ids[plain.offsets[l]..plain.offsets[l + 1]];
            // The same members in the same order, then the last repeated to a whole panel.
            assert_eq!(&index.ids[lo..lo + members.len()], members);
            assert!(
                index.ids[lo + members.len()..hi]
                    .iter()
                    .all(|&j| j == members[members.len() - 1])
            );
            assert_eq!(hi - lo, members.len().next_multiple_of(quant::PANEL));
        }
    }

    #[test]
    fn a_few_probes_find_most_nearest_centroids_on_clustered_data() {
        let d = 16;
        let data = blobs(64, 40, d);
        let parts = [Rows::dense(&data, d)];
        // Centroids at the blobs (with noise), as after a few k-means iterations.
        let c = Centroids::new(blobs(64, 4, d), d);
        // 16 lists of about four blobs' words each: a blob with no centre of its own can be
        // split between the lists nearest to it, which its vectors rank by their own noise,
        // so 5 lists are probed.
        let r = recall(&parts, &c, (default_lists(c.k()), 5, Kernel::F32), 1000, 9);
        assert_eq!(r.sample, 1000);
        assert!(r.fraction() > 0.9, "{r:?}");
        assert!(r.inertia_gap() >= 0.0 && r.inertia_gap() < 0.05, "{r:?}");
        let all = recall(
            &parts,
            &c,
            (default_lists(c.k()), usize::MAX, Kernel::F32),
            1000,
            9,
        );
        assert_eq!(all.exact, 1000, "{all:?}");
        let one = recall(&parts, &c, (default_lists(c.k()), 1, Kernel::F32), 1000, 9);
        assert!(one.exact <= r.exact, "{one:?} vs {r:?}");
    }
}
