//! A member's share of a k-means job: its cached partitions (the paper's static data, opened and
//! verified once, kept mapped for every iteration), their quantised rows for the int8 kernel
//! (made at the first such step and kept like the partitions), the pruning bounds of their
//! vectors (kept across iterations beside them), and the map step over them with stage-1
//! aggregation. The TCP worker and an SPMD rank hold the same type.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use thiserror::Error;
use vocab_pipeline::kmeans::quant::QuantRows;
use vocab_pipeline::kmeans::{
    Assignment, Centroids, Mode, Partial, Pruner, Shard, map_tasks, max_abs, merge_tasks,
};
use vocab_pipeline::mixture::{Statistic, moments};
use vocab_pipeline::partition::{Manifest, Partition, Verify};
use vocab_pipeline::store::StoreError;

use crate::jobs::place::lock;

/// Errors opening a share.
#[derive(Debug, Error)]
pub enum ShareError {
    /// The manifest lists fewer partitions.
    #[error("the manifest has no partition {0}")]
    NoPartition(u32),
    /// A partition file failed to open or verify.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The partition folder's manifest cannot be read.
    #[error("cannot read the partitions")]
    Manifest(#[source] StoreError),
    /// The member's partitions are not the root's.
    #[error(
        "its partitions at {dir} have manifest digest {theirs:08x}, the root's {root:08x} \
         (other data or another partitioning)"
    )]
    Digest {
        /// The partition folder.
        dir: String,
        /// This member's manifest digest.
        theirs: u32,
        /// The root's.
        root: u32,
    },
}

/// The cached partitions of a job at one member.
#[derive(Debug)]
pub struct Share {
    /// Job id.
    pub job: u64,
    /// Partition folder, as this member sees it.
    pub dir: String,
    parts: BTreeMap<u32, Arc<Partition>>,
    /// The partitions held, by the global index of their first row.
    starts: BTreeMap<u64, u32>,
    quant: Mutex<BTreeMap<u32, Arc<QuantRows>>>,
    pruning: Mutex<Pruning>,
}

/// The pruned assignment's state at a member, and the iteration it is ready for.
#[derive(Debug, Default)]
struct Pruning {
    /// The iteration whose step may use the bounds (the one after the last step mapped).
    next: u64,
    pruner: Pruner,
}

/// What one map step over a share did.
#[derive(Debug)]
pub struct Mapped {
    /// The partial sums: one (stage 1 on) or one per map task.
    pub partials: Vec<Partial>,
    /// Vectors whose label pruning kept (0 on full passes).
    pub kept: usize,
    /// Map tasks run.
    pub tasks: usize,
    /// Seconds in the map tasks (including the first int8 step's quantisation).
    pub map_seconds: f64,
    /// Seconds merging the tasks' partials.
    pub stage1_seconds: f64,
}

impl Share {
    /// Opens partitions `indices` of `manifest` in `dir` (verifying each whole), reusing what
    /// `keep` already holds when it belongs to the same job and folder.
    pub fn open(
        job: u64,
        dir: &str,
        manifest: &Manifest,
        indices: &[u32],
        keep: Option<&Share>,
    ) -> Result<Self, ShareError> {
        let keep = keep.filter(|k| k.job == job && k.dir == dir);
        let mut parts = BTreeMap::new();
        let mut quant = BTreeMap::new();
        let mut starts = BTreeMap::new();
        let mut at = 0u64;
        for (i, entry) in manifest.partitions.iter().enumerate() {
            if indices.contains(&(i as u32)) {
                starts.insert(at, i as u32);
            }
            at = at.saturating_add(entry.count);
        }
        for &idx in indices {
            if let Some(q) = keep.and_then(|k| lock(&k.quant).get(&idx).cloned()) {
                quant.insert(idx, q);
            }
            let part = match keep.and_then(|k| k.parts.get(&idx)) {
                Some(p) => Arc::clone(p),
                None => {
                    let entry = manifest
                        .partitions
                        .get(idx as usize)
                        .ok_or(ShareError::NoPartition(idx))?;
                    Arc::new(Partition::open(
                        &Path::new(dir).join(&entry.file),
                        entry,
                        manifest.dims,
                        manifest.element_type(),
                        Verify::Full,
                    )?)
                }
            };
            parts.insert(idx, part);
        }
        // The bounds of the partitions kept stay with them (the others' are dropped at the next
        // pruned step; partitions new here start with a full pass).
        let pruning =
            keep.map_or_else(Pruning::default, |k| std::mem::take(&mut *lock(&k.pruning)));
        Ok(Self {
            job,
            dir: dir.to_string(),
            parts,
            starts,
            quant: Mutex::new(quant),
            pruning: Mutex::new(pruning),
        })
    }

    /// The rows it holds of the global `indices`: for each, its position in `indices` (`u32`)
    /// and its values (`f32`), little-endian.
    pub fn rows_at(&self, indices: &[u64]) -> Vec<u8> {
        let (mut out, mut buf) = (Vec::new(), Vec::new());
        for (at, &global) in indices.iter().enumerate() {
            // The partition starting at or before the index, if the index lies inside it.
            let Some((&start, idx)) = self.starts.range(..=global).next_back() else {
                continue;
            };
            let Some(m) = self.parts.get(idx).map(|p| p.vectors()) else {
                continue;
            };
            let Some(r) = usize::try_from(global - start)
                .ok()
                .filter(|&r| r < m.rows())
            else {
                continue;
            };
            out.extend_from_slice(&u32::try_from(at).unwrap_or(u32::MAX).to_le_bytes());
            for v in m.row(r, &mut buf) {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    /// The partitions held, as map shards (in partition order).
    fn shards(&self) -> Vec<Shard<'_>> {
        (self.parts.iter())
            .map(|(&index, p)| Shard {
                index,
                rows: p.vectors(),
            })
            .collect()
    }

    /// Vectors held.
    pub fn rows(&self) -> u64 {
        self.parts.values().map(|p| p.vectors().rows() as u64).sum()
    }

    /// Largest absolute value held (for the fixed-point scale).
    pub fn max_abs(&self) -> f32 {
        self.parts
            .values()
            .map(|p| max_abs(p.vectors()))
            .fold(0f32, f32::max)
    }

    /// Nonzero values per binary exponent (for the fixed-point range check).
    pub fn magnitudes(&self) -> Vec<u64> {
        self.parts.values().fold(Vec::new(), |acc, p| {
            vocab_pipeline::kmeans::partial::add_bins(
                acc,
                &vocab_pipeline::kmeans::partial::magnitudes(p.vectors()),
            )
        })
    }

    /// The map step of iteration `iteration` from `centroids` by `assignment`, then stage 1 if
    /// asked. Pruning uses the bounds of the previous step only when that step was iteration
    /// `iteration - 1`: an iteration run again (after a failure) or out of turn starts from a
    /// full pass, as a resumed single-process run does.
    pub fn map(
        &self,
        centroids: &Centroids,
        scale: i32,
        assignment: Assignment,
        stage1: bool,
        iteration: u64,
    ) -> Mapped {
        let int8 = assignment.keeps_codes();
        let shards = self.shards();
        let started = Instant::now();
        // The int8 kernel's quantised rows: made once per partition (inside the first step's
        // map time), in shard order.
        let quant: Vec<Arc<QuantRows>> = if int8 {
            let mut cache = lock(&self.quant);
            shards
                .iter()
                .map(|s| {
                    Arc::clone(
                        cache
                            .entry(s.index)
                            .or_insert_with(|| Arc::new(QuantRows::new(s.rows))),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let rows: Vec<&QuantRows> = quant.iter().map(|q| &**q).collect();
        let mut pruning = assignment.pruned().then(|| lock(&self.pruning));
        if let Some(p) = pruning.as_deref_mut() {
            if p.next != iteration {
                p.pruner.reset();
            }
            p.next = iteration.saturating_add(1);
        }
        let codes = int8.then_some(&rows[..]);
        let mode = Mode::of(
            assignment,
            centroids.k(),
            pruning.as_deref_mut().map(|p| &mut p.pruner),
            codes,
        );
        let (tasks, kept) = map_tasks(&shards, centroids, scale, 0, mode);
        drop(pruning);
        let map_seconds = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let count = tasks.len();
        let partials = if stage1 && tasks.len() > 1 {
            vec![merge_tasks(tasks, centroids.k(), centroids.dims(), scale)]
        } else {
            tasks
        };
        Mapped {
            partials,
            kept,
            tasks: count,
            map_seconds,
            stage1_seconds: started.elapsed().as_secs_f64(),
        }
    }

    /// The map step of a mixture or PCA `statistic` at fixed-point `scale` over the share,
    /// then stage 1 if asked: one partial per thread's run of map units (merged into one with
    /// `stage1`).
    pub fn moments(&self, statistic: &Statistic, scales: &[i32], stage1: bool) -> Mapped {
        let shards = self.shards();
        let started = Instant::now();
        let tasks = moments::map(&shards, statistic, scales);
        let map_seconds = started.elapsed().as_secs_f64();
        let started = Instant::now();
        let count = tasks.len();
        let (k, width) = statistic.shape();
        let partials = if stage1 && tasks.len() > 1 {
            vec![Partial::sum(tasks, k, width, 0)]
        } else {
            tasks
        };
        Mapped {
            partials,
            kept: 0,
            tasks: count,
            map_seconds,
            stage1_seconds: started.elapsed().as_secs_f64(),
        }
    }
}
