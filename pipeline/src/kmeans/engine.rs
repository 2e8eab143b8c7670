//! The one k-means loop and what an engine supplies to it.
//!
//! An [`Engine`] runs one iteration from given centroids ([`Engine::step`]: broadcast, map,
//! aggregate) and fetches rows by global index ([`Engine::rows`], for the first centroids when
//! the vectors lie elsewhere). [`fit_with`] is the loop every engine runs: one step per
//! iteration, [`State::advance`] to end it (empty-cluster splits, convergence), the caller's
//! callback after each (logs, checkpoints). [`Local`] is the engine of one process; the cluster
//! crate's MPI root and TCP driver are the others. Because every engine returns the same exact
//! integer sums, the loop gives the same centroids bit for bit on each.

use std::time::Instant;

use rayon::prelude::*;

use super::Pruner;
use super::quant::QuantRows;
use super::{
    Centroids, KMeansError, Mode, Params, Shard, State, check_dims, initial_centroids, local_step,
    partial,
};
use crate::partition::Rows;

/// Time and traffic of one iteration. Seconds of map and the aggregation stages are the slowest
/// member's; bytes are totals over the cluster (frame headers included, except for the
/// broadcast, which counts payload bytes received by the members). All zero on one process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReport {
    /// Broadcast wall time (driver).
    pub broadcast_seconds: f64,
    /// Map tasks.
    pub map_seconds: f64,
    /// Stage 1: merging a node's map-task partials.
    pub stage1_seconds: f64,
    /// Stage 2: range exchange and reduction, from the moment the slowest worker finished its
    /// map tasks and stage 1 until the last range was reduced (each worker times both from its
    /// receipt of the step, which the driver sends to all at once).
    pub stage2_seconds: f64,
    /// Stage 3: gathering the ranges at the driver and assembling them.
    pub stage3_seconds: f64,
    /// Centroid bytes received by all members.
    pub broadcast_bytes: u64,
    /// Bytes sent between workers in stage 2.
    pub stage2_bytes: u64,
    /// Bytes the driver received in stage 3.
    pub stage3_bytes: u64,
    /// Map tasks over all workers.
    pub tasks: u64,
    /// Members that completed the iteration.
    pub workers: usize,
    /// Attempts (1 when nothing failed).
    pub attempts: u32,
    /// Members dropped during this iteration.
    pub dropped: Vec<String>,
    /// What went wrong in failed attempts.
    pub failures: Vec<String>,
    /// Seconds spent measuring the links again before this iteration (`--order auto`, when
    /// the broadcast had slowed down by more than 20%).
    pub recalibrated: Option<f64>,
}

impl StepReport {
    /// Header of [`StepReport::csv_row`] (after the iteration column).
    pub const CSV_HEADER: &'static str = "workers,attempts,broadcast_seconds,map_seconds,stage1_seconds,stage2_seconds,stage3_seconds,broadcast_bytes,stage2_bytes,stage3_bytes,map_tasks,dropped";

    /// One CSV row of the report (columns of [`StepReport::CSV_HEADER`]).
    pub fn csv_row(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            self.workers,
            self.attempts,
            self.broadcast_seconds,
            self.map_seconds,
            self.stage1_seconds,
            self.stage2_seconds,
            self.stage3_seconds,
            self.broadcast_bytes,
            self.stage2_bytes,
            self.stage3_bytes,
            self.tasks,
            self.dropped.join(";")
        )
    }

    /// The per-iteration line's stage part: seconds per stage, then bytes per stage.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "broadcast {:.3} map {:.3} agg1 {:.3} agg2 {:.3} agg3 {:.3} bytes {}/{}/{}",
            self.broadcast_seconds,
            self.map_seconds,
            self.stage1_seconds,
            self.stage2_seconds,
            self.stage3_seconds,
            self.broadcast_bytes,
            self.stage2_bytes,
            self.stage3_bytes
        );
        if !self.dropped.is_empty() {
            line.push_str(" dropped ");
            line.push_str(&self.dropped.join(","));
        }
        if let Some(s) = self.recalibrated {
            line.push_str(&format!(" recalibrated {s:.3}"));
        }
        line
    }
}

/// The assembled result of one iteration.
#[derive(Debug, Clone)]
pub struct StepResult {
    /// Means of all centroids (`k x dims`; zeros where a cluster is empty).
    pub means: Vec<f32>,
    /// Vectors per centroid.
    pub counts: Vec<u64>,
    /// Inertia, added per map unit in key order.
    pub inertia: f64,
    /// Vectors whose label pruning kept (0 without pruning).
    pub kept: usize,
    /// Time and traffic (default on one process).
    pub report: StepReport,
}

impl StepResult {
    /// Ends the iteration on `state` ([`State::advance`], shared by every engine) and returns
    /// the report.
    pub fn apply(self, state: &mut State, params: &Params, started: Instant) -> StepReport {
        state.advance(
            params,
            self.means,
            &self.counts,
            self.inertia,
            started,
            self.kept,
        );
        self.report
    }
}

/// What the k-means loop needs of wherever the vectors are: one process, MPI ranks, workers.
pub trait Engine {
    /// What goes wrong on this engine.
    type Error;

    /// Runs iteration `iteration` (counted from 1) from `centroids` over every vector: the
    /// means and counts of every centroid, the inertia.
    fn step(&mut self, iteration: u64, centroids: &Centroids) -> Result<StepResult, Self::Error>;

    /// The rows of the global `indices`, in that order (`k x dims` values for `k` indices).
    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, Self::Error>;
}

/// Runs iterations from `state` until `params.max_iter` or convergence on `engine`: the one
/// k-means loop. `on_iteration` sees every new state with the iteration's report (to log and
/// checkpoint it); an error from it stops the run.
pub fn fit_with<En, E>(
    engine: &mut En,
    params: &Params,
    mut state: State,
    on_iteration: &mut dyn FnMut(&State, &StepReport) -> Result<(), E>,
) -> Result<State, E>
where
    En: Engine + ?Sized,
    E: From<En::Error>,
{
    while state.iteration < params.max_iter && !state.converged {
        let started = Instant::now();
        let result = engine.step(state.iteration + 1, &state.centroids)?;
        let report = result.apply(&mut state, params, started);
        on_iteration(&state, &report)?;
    }
    Ok(state)
}

/// Runs iterations from `start` (or from the initial centroids) until `max_iter` or convergence.
///
/// `on_iteration` sees the state after every iteration (to log and checkpoint it); an error from
/// it stops the run.
pub fn fit<E: From<KMeansError>>(
    parts: &[Rows<'_>],
    params: &Params,
    start: Option<State>,
    on_iteration: &mut dyn FnMut(&State) -> Result<(), E>,
) -> Result<State, E> {
    let n: usize = parts.iter().map(Rows::rows).sum();
    let dims = check_dims(parts)?;
    if params.k > n {
        return Err(KMeansError::TooFewVectors { k: params.k, n }.into());
    }
    let state = match start {
        Some(state) => {
            if state.centroids.k() != params.k || state.centroids.dims() != dims {
                return Err(KMeansError::InitShape {
                    got_k: state.centroids.k(),
                    got_dims: state.centroids.dims(),
                    k: params.k,
                    dims,
                }
                .into());
            }
            state
        }
        None => State {
            iteration: 0,
            centroids: initial_centroids(parts, params.k, &params.init, params.seed)?,
            history: Vec::new(),
            converged: false,
        },
    };
    let mut engine = Local::new(Shard::numbered(parts), params)?;
    fit_with(&mut engine, params, state, &mut |state, _| {
        on_iteration(state)
    })
}

/// The engine of one process: every map task on this machine's threads, stage 1 in shared
/// memory.
#[derive(Debug)]
pub struct Local<'a> {
    shards: Vec<Shard<'a>>,
    scale: i32,
    threads: usize,
    params: (usize, super::Assignment),
    pruner: Option<Pruner>,
    /// The rows quantised once (int8), inside the first iteration's time.
    quantized: Option<Vec<QuantRows>>,
}

impl<'a> Local<'a> {
    /// The engine over `shards` (checked: one dims, sums in range) for a run of `params`.
    pub fn new(shards: Vec<Shard<'a>>, params: &Params) -> Result<Self, KMeansError> {
        let scale = super::data_scale(&shards)?;
        Ok(Self {
            shards,
            scale,
            threads: params.threads,
            params: (params.k, params.assignment),
            pruner: params.assignment.pruned().then(Pruner::default),
            quantized: None,
        })
    }
}

impl Engine for Local<'_> {
    type Error = KMeansError;

    fn step(&mut self, _iteration: u64, centroids: &Centroids) -> Result<StepResult, KMeansError> {
        let (k, assignment) = self.params;
        if self.quantized.is_none() && assignment.keeps_codes() {
            let rows: Vec<_> = (self.shards.par_iter())
                .map(|s| QuantRows::new(s.rows))
                .collect();
            self.quantized = Some(rows);
        }
        let rows: Vec<&QuantRows> = self.quantized.iter().flatten().collect();
        let codes = self.quantized.is_some().then_some(&rows[..]);
        let mode = Mode::of(assignment, k, self.pruner.as_mut(), codes);
        let (partial, kept) = local_step(&self.shards, centroids, self.scale, self.threads, mode);
        let counts = partial.counts();
        let means = partial::means(&partial.sums(), &counts, centroids.dims(), self.scale);
        Ok(StepResult {
            means,
            counts: counts.into_owned(),
            inertia: partial.inertia(),
            kept,
            report: StepReport::default(),
        })
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, KMeansError> {
        let parts: Vec<_> = self.shards.iter().map(|s| s.rows).collect();
        let n: usize = parts.iter().map(|p| p.rows()).sum();
        let mut out = Vec::with_capacity(indices.len() * parts.first().map_or(0, |p| p.dims()));
        for &i in indices {
            if i >= n {
                return Err(KMeansError::TooFewVectors { k: i + 1, n });
            }
            super::push_global_row(&parts, i, &mut out);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kmeans::{Assignment, Init};
    use crate::partition::Rows;

    #[test]
    fn local_rows_are_the_rows_of_the_concatenated_partitions_and_outside_is_an_error() {
        let a: Vec<f32> = (0..6).map(|v| v as f32).collect();
        let b: Vec<f32> = (6..10).map(|v| v as f32).collect();
        let parts = [Rows::dense(&a, 2), Rows::dense(&b, 2)];
        let params = Params {
            k: 2,
            max_iter: 1,
            tol: 0.0,
            seed: 1,
            init: Init::Random,
            threads: 1,
            assignment: Assignment::default(),
        };
        let mut local = Local::new(Shard::numbered(&parts), &params).expect("engine");
        assert_eq!(
            local.rows(&[4, 0, 3]).expect("rows"),
            [8.0, 9.0, 0.0, 1.0, 6.0, 7.0]
        );
        assert!(matches!(
            local.rows(&[5]),
            Err(KMeansError::TooFewVectors { n: 5, .. })
        ));
    }

    /// u8 partitions are held as codes and decoded a unit at a time: every assignment gives
    /// the run on their decoded values, bit for bit.
    #[test]
    fn codes_cluster_exactly_as_their_decoded_values_on_every_assignment() {
        use crate::kmeans::Kernel;
        use crate::partition::Codes;
        let (dims, rows, head) = (24, 300, 8);
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 33) as u32
        };
        // Half the clusters' bytes stay at or below 127 (the kernel's codes are then the bytes
        // themselves), half reach 239 (quantised from their values).
        let centres: Vec<u8> = (0..6 * dims)
            .map(|i| (next() % if i < 3 * dims { 88 } else { 200 }) as u8)
            .collect();
        // Two partitions of records laid out as in a file: 8 bytes of ids, then the codes.
        let records: Vec<Vec<u8>> = (0..2)
            .map(|_| {
                (0..rows)
                    .flat_map(|r| {
                        let c = r % 6;
                        let ids = (0..head).map(|_| 0xA5);
                        let row: Vec<u8> = (0..dims)
                            .map(|d| centres[c * dims + d].saturating_add((next() % 40) as u8))
                            .collect();
                        ids.chain(row)
                    })
                    .collect()
            })
            .collect();
        let codes: Vec<Rows<'_>> = records
            .iter()
            .map(|b| Rows::U8(Codes::new(&b[head..], rows, dims, dims + head)))
            .collect();
        let decoded: Vec<Vec<f32>> = codes
            .iter()
            .map(|c| {
                let mut buf = Vec::new();
                c.to_f32(&mut buf);
                buf
            })
            .collect();
        let values: Vec<Rows<'_>> = decoded.iter().map(|d| Rows::dense(d, dims)).collect();
        for assignment in [
            Assignment::Full(Kernel::F32),
            Assignment::Full(Kernel::Int8),
            Assignment::Pruned(Kernel::F32),
            Assignment::Pruned(Kernel::Int8),
            Assignment::Approx {
                lists: 3,
                probes: 2,
                kernel: Kernel::F32,
            },
            Assignment::Approx {
                lists: 3,
                probes: 2,
                kernel: Kernel::Int8,
            },
        ] {
            let params = Params {
                k: 10,
                max_iter: 5,
                tol: 0.0,
                seed: 3,
                init: Init::PlusPlus { sample: None },
                threads: 2,
                assignment,
            };
            let run = |parts: &[Rows<'_>]| {
                fit::<KMeansError>(parts, &params, None, &mut |_| Ok(())).expect("fit")
            };
            let (held, wide) = (run(&codes), run(&values));
            let bits = |s: &State| -> Vec<u32> {
                s.centroids.as_slice().iter().map(|v| v.to_bits()).collect()
            };
            assert_eq!(bits(&held), bits(&wide), "{assignment:?}");
            assert_eq!(held.history.len(), wide.history.len(), "{assignment:?}");
            for (a, b) in held.history.iter().zip(&wide.history) {
                assert_eq!(a.inertia.to_bits(), b.inertia.to_bits(), "{assignment:?}");
            }
        }
    }
}
