//! The driver of distributed k-means: membership, partition assignment, the iteration, failure
//! detection and recovery.
//!
//! One iteration ([`Driver::step`]):
//! 1. **broadcast** the centroids down the chain (or another [`Algorithm`]) to every member;
//! 2. send each member a [`Step`]; it maps its cached partitions, merges its map tasks' partials
//!    (**stage 1**), exchanges centroid ranges with the other members and reduces its own range
//!    (**stage 2**), and answers with that range's counts and means (**stage 3**, a gather);
//! 3. assemble the ranges; the caller finishes the update (empty-cluster splits need every count).
//!
//! Members are the cluster file's nodes in chain order; partitions are dealt out in contiguous,
//! even blocks in that order. A member that breaks a connection, times out (no heartbeat within
//! the I/O timeout) or is dropped by the broadcast fails the attempt: the driver pings every
//! member, drops the ones that do not answer, deals the partitions out again under a new epoch,
//! and redoes the iteration from the same centroids. Because the sums are exact integers, the
//! redone iteration gives bit-identical results with any membership.

use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;
use tokio::task::JoinSet;
use vocab_pipeline::kmeans::partial::inertia_of;
use vocab_pipeline::kmeans::{Centroids, Kernel, Params, State, fixed_scale};
use vocab_pipeline::partition::Manifest;

use crate::aggregate::{place_result, range_of, result_len};
use crate::auth::Secret;
use crate::broadcast::{Algorithm, BroadcastError, broadcast_to};
use crate::config::Cluster;
use crate::connection::Connection;
use crate::messages::{
    BUILD, Load, Loaded, Message, MessageError, Step, StepDone, recv, recv_blob, send,
};
use crate::peer::{dial_name, ping};

/// The name the driver authenticates with.
pub const DRIVER: &str = "driver";

/// How the driver runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The partition folder, as the workers see it.
    pub dir: String,
    /// Broadcast algorithm for the centroids.
    pub algorithm: Algorithm,
    /// Stage-1 aggregation (off: every map task ships its own partial sums).
    pub stage1: bool,
    /// Kernel of the workers' full pass. The int8 kernel's labels do not depend on the partition
    /// layout, so its distributed runs match its single-process runs bit for bit as well.
    pub kernel: Kernel,
}

/// Time and traffic of one iteration. Seconds of map and the aggregation stages are the slowest
/// worker's; bytes are totals over the cluster (frame headers included, except for the
/// broadcast, which counts payload bytes received by the members).
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
    /// Vectors whose label pruning kept (0: the cluster path runs the full assignment).
    pub kept: usize,
    /// Time and traffic.
    pub report: StepReport,
}

impl StepResult {
    /// Ends the iteration on `state` (`State::advance`, shared by every engine) and returns
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

/// Errors of the driver.
#[derive(Debug, Error)]
pub enum DriverError {
    /// A worker cannot take part (other build, other partitions); retrying cannot help.
    #[error("worker {node} refused: {reason}")]
    Refused {
        /// The worker.
        node: String,
        /// Why.
        reason: String,
    },
    /// Attempts exhausted.
    #[error(
        "iteration {iteration} failed after {attempts} attempts; last failure at {node}: {reason}"
    )]
    Failed {
        /// Iteration.
        iteration: u64,
        /// Attempts made.
        attempts: u32,
        /// The node blamed last.
        node: String,
        /// What happened.
        reason: String,
    },
    /// The data's values span too wide a range for exact fixed-point sums.
    #[error(transparent)]
    Range(#[from] vocab_pipeline::kmeans::partial::RangeError),
    /// Every member was dropped.
    #[error("no workers left (dropped: {})", .0.join(", "))]
    NoWorkers(Vec<String>),
    /// The workers' partitions do not add up to the manifest.
    #[error("the workers hold {got} vectors, the partition manifest lists {want}")]
    Count {
        /// Vectors reported.
        got: u64,
        /// Vectors in the manifest.
        want: u64,
    },
}

#[derive(Debug)]
struct Member {
    name: String,
    conn: Option<Connection>,
}

#[derive(Debug)]
struct Failure {
    node: String,
    reason: String,
}

enum Attempt {
    Fatal(DriverError),
    Retry(Failure),
}

impl From<DriverError> for Attempt {
    fn from(e: DriverError) -> Self {
        Self::Fatal(e)
    }
}

/// A connected driver with its members' partitions loaded.
#[derive(Debug)]
pub struct Driver {
    cluster: Cluster,
    secret: Secret,
    options: Options,
    manifest: Manifest,
    members: Vec<Member>,
    dropped: Vec<String>,
    job: u64,
    epoch: u64,
    broadcasts: u64,
    scale: i32,
    stale: bool,
}

impl Driver {
    /// Connects to every node of `cluster` and has each load its share of the partitions of
    /// `manifest` (the driver's copy; workers must hold the same). Unreachable nodes are dropped;
    /// a node of another build or with other partitions is an error.
    pub async fn connect(
        cluster: Cluster,
        secret: Secret,
        options: Options,
        manifest: Manifest,
    ) -> Result<Self, DriverError> {
        let members = cluster
            .chain_nodes()
            .map(|n| Member {
                name: n.name.clone(),
                conn: None,
            })
            .collect();
        let mut driver = Self {
            cluster,
            secret,
            options,
            manifest,
            members,
            dropped: Vec::new(),
            job: rand::random::<u64>() >> 1,
            epoch: 0,
            broadcasts: 0,
            scale: 0,
            stale: true,
        };
        let mut attempts = 0;
        loop {
            attempts += 1;
            match driver.reload().await {
                Ok(()) => return Ok(driver),
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(f)) => {
                    if attempts > driver.cluster.settings.retries {
                        return Err(DriverError::Failed {
                            iteration: 0,
                            attempts,
                            node: f.node,
                            reason: f.reason,
                        });
                    }
                    driver.drop_dead().await?;
                }
            }
        }
    }

    /// The fixed-point scale of the partial sums (from the workers' data).
    pub fn scale(&self) -> i32 {
        self.scale
    }

    /// Current members, in chain (and range) order.
    pub fn members(&self) -> Vec<String> {
        self.members.iter().map(|m| m.name.clone()).collect()
    }

    /// Members dropped so far.
    pub fn dropped(&self) -> &[String] {
        &self.dropped
    }

    /// Partitions of member `j` of `w`: a contiguous, even block in manifest order.
    fn share(&self, j: usize, w: usize) -> Vec<u32> {
        let p = self.manifest.partitions.len();
        (p * j / w..p * (j + 1) / w).map(|i| i as u32).collect()
    }

    /// (Re)connects every member and has it load its share.
    async fn reload(&mut self) -> Result<(), Attempt> {
        self.epoch += 1;
        let w = self.members.len();
        let io_timeout = Duration::from_millis(self.cluster.settings.io_timeout_ms);
        let mut set = JoinSet::new();
        let shares: Vec<Vec<u32>> = (0..w).map(|j| self.share(j, w)).collect();
        for ((j, m), partitions) in self.members.iter_mut().enumerate().zip(shares) {
            m.conn = None;
            let load = Load {
                job: self.job,
                dir: self.options.dir.clone(),
                manifest: self.manifest.digest(),
                partitions,
                build: BUILD.into(),
            };
            let (cluster, secret, name) =
                (self.cluster.clone(), self.secret.clone(), m.name.clone());
            set.spawn(async move {
                let result = async {
                    let mut conn = dial_name(&cluster, &name, &secret, DRIVER)
                        .await
                        .map_err(|e| MessageError::Unreachable(e.to_string()))?;
                    send(&mut conn, &Message::Load(load)).await?;
                    // Opening and verifying partitions reads them: allow one timeout per GB.
                    match recv(&mut conn, io_timeout * 4).await? {
                        Message::Loaded(loaded) => Ok((conn, loaded)),
                        other => Err(MessageError::Unexpected(other.name().into())),
                    }
                }
                .await;
                (j, result)
            });
        }
        let mut loaded: Vec<Option<Loaded>> = vec![None; w];
        let mut failure = None;
        while let Some(joined) = set.join_next().await {
            let (j, result) = joined.map_err(|e| {
                Attempt::Retry(Failure {
                    node: "driver".into(),
                    reason: e.to_string(),
                })
            })?;
            match result {
                Ok((conn, l)) => {
                    self.members[j].conn = Some(conn);
                    loaded[j] = Some(l);
                }
                // A refusal to load is about the data, not liveness: retrying cannot help.
                Err(MessageError::Remote(reason)) => {
                    return Err(Attempt::Fatal(DriverError::Refused {
                        node: self.members[j].name.clone(),
                        reason,
                    }));
                }
                Err(e) => {
                    failure.get_or_insert(Failure {
                        node: self.members[j].name.clone(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        if let Some(f) = failure {
            return Err(Attempt::Retry(f));
        }
        let (mut rows, mut peak, mut bins) = (0u64, 0f32, Vec::new());
        for (m, l) in self.members.iter().zip(&loaded) {
            let Some(l) = l else { continue };
            if l.build != BUILD {
                return Err(DriverError::Refused {
                    node: m.name.clone(),
                    reason: format!(
                        "it runs {}, the driver runs {BUILD}; start the same build on every node",
                        l.build
                    ),
                }
                .into());
            }
            if l.manifest != self.manifest.digest() {
                return Err(DriverError::Refused {
                    node: m.name.clone(),
                    reason: format!(
                        "its partitions at {} have manifest digest {:08x}, the driver's {:08x} \
                         (other data or another partitioning; copy the driver's folder)",
                        self.options.dir,
                        l.manifest,
                        self.manifest.digest()
                    ),
                }
                .into());
            }
            rows += l.rows;
            peak = peak.max(f32::from_bits(l.max_abs_bits));
            bins = vocab_pipeline::kmeans::partial::add_bins(bins, &l.magnitudes);
        }
        if rows != self.manifest.count {
            return Err(DriverError::Count {
                got: rows,
                want: self.manifest.count,
            }
            .into());
        }
        self.scale = fixed_scale(peak, rows);
        vocab_pipeline::kmeans::partial::check_range(self.scale, &bins, peak)
            .map_err(DriverError::from)?;
        self.stale = false;
        Ok(())
    }

    /// Pings every member and drops the ones that do not answer.
    async fn drop_dead(&mut self) -> Result<(), DriverError> {
        let mut set = JoinSet::new();
        for (j, m) in self.members.iter().enumerate() {
            let Some(node) = self
                .cluster
                .nodes
                .iter()
                .find(|n| n.name == m.name)
                .cloned()
            else {
                continue;
            };
            let (cluster, secret) = (self.cluster.clone(), self.secret.clone());
            set.spawn(async move { (j, ping(&cluster, &node, &secret, DRIVER).await.is_ok()) });
        }
        let mut alive = vec![false; self.members.len()];
        while let Some(Ok((j, ok))) = set.join_next().await {
            alive[j] = ok;
        }
        let mut j = 0;
        self.members.retain(|m| {
            let keep = alive[j];
            j += 1;
            if !keep {
                self.dropped.push(m.name.clone());
            }
            keep
        });
        self.stale = true;
        if self.members.is_empty() {
            return Err(DriverError::NoWorkers(self.dropped.clone()));
        }
        Ok(())
    }

    /// Runs iterations from `state` until `params.max_iter` or convergence, as
    /// `vocab_pipeline::kmeans::fit` does on one node (same update, same stopping rule).
    /// `on_iteration` sees every new state with its report; an error from it stops the run.
    pub async fn fit<E: From<DriverError>>(
        &mut self,
        params: &Params,
        mut state: State,
        on_iteration: &mut dyn FnMut(&State, &StepReport) -> Result<(), E>,
    ) -> Result<State, E> {
        while state.iteration < params.max_iter && !state.converged {
            let started = Instant::now();
            let result = self.step(state.iteration + 1, &state.centroids).await?;
            let report = result.apply(&mut state, params, started);
            on_iteration(&state, &report)?;
        }
        Ok(state)
    }

    /// Runs iteration `iteration` from `centroids`, recovering from failed members.
    pub async fn step(
        &mut self,
        iteration: u64,
        centroids: &Centroids,
    ) -> Result<StepResult, DriverError> {
        let dropped_before = self.dropped.len();
        let mut failures = Vec::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let outcome = if self.stale {
                match self.reload().await {
                    Ok(()) => self.attempt(iteration, centroids).await,
                    Err(a) => Err(a),
                }
            } else {
                self.attempt(iteration, centroids).await
            };
            match outcome {
                Ok(mut result) => {
                    result.report.attempts = attempts;
                    result.report.dropped = self.dropped[dropped_before..].to_vec();
                    result.report.failures = failures;
                    return Ok(result);
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(f)) => {
                    failures.push(format!("{}: {}", f.node, f.reason));
                    if attempts > self.cluster.settings.retries {
                        return Err(DriverError::Failed {
                            iteration,
                            attempts,
                            node: f.node,
                            reason: f.reason,
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(50 << (attempts - 1).min(6))).await;
                    self.drop_dead().await?;
                }
            }
        }
    }

    async fn attempt(
        &mut self,
        iteration: u64,
        centroids: &Centroids,
    ) -> Result<StepResult, Attempt> {
        let (k, dims) = (centroids.k(), centroids.dims());
        let names = self.members();
        let w = names.len();
        let mut data = Vec::with_capacity(k * dims * 4);
        for v in centroids.as_slice() {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let data = Bytes::from(data);
        self.broadcasts += 1;
        let id = self.job.wrapping_add(self.broadcasts);
        let started = Instant::now();
        let sent = broadcast_to(
            &self.cluster,
            &self.secret,
            DRIVER,
            id,
            data.clone(),
            self.options.algorithm,
            names.clone(),
        )
        .await;
        let report = match sent {
            Ok(r) => r,
            Err(BroadcastError::Failed { node, reason, .. }) => {
                self.stale = true;
                return Err(Attempt::Retry(Failure { node, reason }));
            }
            Err(BroadcastError::NoNodes(dropped)) => {
                return Err(Attempt::Fatal(DriverError::NoWorkers(dropped)));
            }
        };
        if let Some(node) = report.dropped.first() {
            self.stale = true;
            return Err(Attempt::Retry(Failure {
                node: node.clone(),
                reason: "unreachable during the broadcast".into(),
            }));
        }
        let broadcast_seconds = started.elapsed().as_secs_f64();
        let step = Step {
            job: self.job,
            epoch: self.epoch,
            iteration,
            centroids: id,
            k: k as u64,
            dims: dims as u64,
            scale: self.scale,
            workers: names.clone(),
            stage1: self.options.stage1,
            int8: self.options.kernel == Kernel::Int8,
        };
        let io_timeout = Duration::from_millis(self.cluster.settings.io_timeout_ms);
        let mut set = JoinSet::new();
        for (j, m) in self.members.iter_mut().enumerate() {
            let Some(mut conn) = m.conn.take() else {
                self.stale = true;
                return Err(Attempt::Retry(Failure {
                    node: m.name.clone(),
                    reason: "no connection".into(),
                }));
            };
            let step = step.clone();
            set.spawn(async move {
                let result = member_step(&mut conn, &step, j, io_timeout).await;
                (j, conn, result)
            });
        }
        let mut replies = Vec::with_capacity(w);
        let mut failure = None;
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((j, conn, Ok(reply))) => {
                    self.members[j].conn = Some(conn);
                    replies.push(reply);
                }
                Ok((j, _, Err(e))) => {
                    failure.get_or_insert(Failure {
                        node: names[j].clone(),
                        reason: e.to_string(),
                    });
                    // The attempt is lost: stop waiting for the others (they may be waiting for
                    // the failed member until their own timeout); every member is reconnected.
                    set.abort_all();
                }
                Err(e) if e.is_cancelled() => {}
                Err(e) => {
                    failure.get_or_insert(Failure {
                        node: "driver".into(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        if let Some(f) = failure {
            self.stale = true;
            return Err(Attempt::Retry(f));
        }
        let assembling = Instant::now();
        let (mut counts, mut means) = (vec![0u64; k], vec![0f32; k * dims]);
        let mut units = Vec::new();
        let mut report = StepReport {
            broadcast_seconds,
            broadcast_bytes: data.len() as u64 * w as u64,
            workers: w,
            ..StepReport::default()
        };
        let mut kept = 0;
        let mut gather = 0f64;
        let (mut mapped, mut reduced) = (0f64, 0f64);
        for reply in &replies {
            let done = &reply.done;
            let r = (done.end - done.start) as usize;
            place_result(
                &mut counts,
                &mut means,
                done.start as usize,
                r,
                dims,
                0,
                &reply.blob,
            )
            .map_err(|reason| {
                Attempt::Retry(Failure {
                    node: names[reply.member].clone(),
                    reason,
                })
            })?;
            units.extend(
                done.units
                    .iter()
                    .map(|&(key, bits)| (key, f64::from_bits(bits))),
            );
            report.map_seconds = report.map_seconds.max(done.map_seconds);
            report.stage1_seconds = report.stage1_seconds.max(done.stage1_seconds);
            mapped = mapped.max(done.mapped_at);
            reduced = reduced.max(done.reduced_at);
            report.stage2_bytes += done.stage2_bytes;
            report.stage3_bytes += reply.bytes;
            report.tasks += done.tasks;
            kept += done.kept as usize;
            gather = gather.max(reply.seconds);
        }
        let total: u64 = counts.iter().sum();
        if total != self.manifest.count {
            return Err(Attempt::Fatal(DriverError::Count {
                got: total,
                want: self.manifest.count,
            }));
        }
        let inertia = inertia_of(&units);
        report.stage2_seconds = (reduced - mapped).max(0.0);
        report.stage3_seconds = gather + assembling.elapsed().as_secs_f64();
        Ok(StepResult {
            means,
            counts,
            inertia,
            kept,
            report,
        })
    }
}

/// A member's stage-3 answer.
#[derive(Debug)]
struct Reply {
    member: usize,
    done: StepDone,
    blob: Vec<u8>,
    seconds: f64,
    bytes: u64,
}

/// Sends `step` to member `j` and collects its answer (heartbeats keep the deadline fresh).
async fn member_step(
    conn: &mut Connection,
    step: &Step,
    j: usize,
    io_timeout: Duration,
) -> Result<Reply, MessageError> {
    send(conn, &Message::Step(step.clone())).await?;
    let mut mark = conn.bytes_read();
    loop {
        match recv(conn, io_timeout).await? {
            Message::Working => mark = conn.bytes_read(),
            Message::StepDone(done) => {
                let started = Instant::now();
                let want = range_of(step.k as usize, step.workers.len(), j);
                if (done.start, done.end) != (want.start as u64, want.end as u64)
                    || done.len != result_len(want.len(), step.dims as usize)
                {
                    return Err(MessageError::Malformed(format!(
                        "answered range {}..{} ({} bytes), expected {}..{}",
                        done.start, done.end, done.len, want.start, want.end
                    )));
                }
                let mut blob = Vec::with_capacity(done.len as usize);
                recv_blob(conn, step.iteration, done.len, io_timeout, |_, data| {
                    blob.extend_from_slice(data);
                    Ok(())
                })
                .await?;
                return Ok(Reply {
                    member: j,
                    done,
                    blob,
                    seconds: started.elapsed().as_secs_f64(),
                    bytes: conn.bytes_read() - mark,
                });
            }
            other => return Err(MessageError::Unexpected(other.name().into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::net::TcpListener;
    use vocab_pipeline::kmeans::{self, Init, KMeansError, initial_centroids};
    use vocab_pipeline::partition::{PartitionSet, read_manifest, split};
    use vocab_pipeline::store::{Element, Format};

    use super::*;
    use crate::worker::Worker;

    const SECRET: &[u8] = b"driver-test-secret-0123";

    async fn workers(n: usize) -> (Cluster, Vec<Arc<Worker>>) {
        let settings = "chunk_size = 4096\nretries = 2\nconnect_timeout_ms = 500\n";
        crate::worker::start_workers(n, 2, settings, SECRET).await
    }

    /// A driver on `cluster` for the partitions in `dir` (chain broadcast, stage 1 on).
    async fn connect(
        cluster: Cluster,
        dir: &str,
        manifest: Manifest,
    ) -> Result<Driver, DriverError> {
        let options = Options {
            dir: dir.into(),
            algorithm: Algorithm::Chain,
            stage1: true,
            kernel: Kernel::F32,
        };
        Driver::connect(cluster, Secret::from_bytes(SECRET), options, manifest).await
    }

    /// Features around blobs, split into 7 partitions.
    fn dataset(dir: &std::path::Path) -> std::path::PathBuf {
        let features = dir.join("f.bin");
        vocab_pipeline::synth::generate_features(&features, Format::Bin, 3000, 24, 9, 5)
            .expect("features");
        let parts = dir.join("parts");
        split(&features, 7, &parts, Element::F32).expect("split");
        parts
    }

    fn params(k: usize) -> Params {
        Params {
            k,
            max_iter: 6,
            tol: 0.0,
            seed: 3,
            init: Init::Random,
            threads: 2,
            ..Params::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn distributed_runs_give_the_local_centroids_bit_for_bit() {
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        for (n, stage1, algorithm, k, kernel) in [
            (1, true, Algorithm::Chain, 20, Kernel::F32),
            (2, true, Algorithm::Chain, 20, Kernel::F32),
            (4, false, Algorithm::Mst, 20, Kernel::F32),
            // Fewer centroids than workers: one worker reduces an empty range.
            (4, true, Algorithm::Chain, 3, Kernel::F32),
            (3, true, Algorithm::Chain, 20, Kernel::Int8),
        ] {
            let params = Params {
                kernel,
                ..params(k)
            };
            let local = kmeans::fit::<KMeansError>(&set.matrices(), &params, None, &mut |_| Ok(()))
                .expect("local");
            let (cluster, _workers) = workers(n).await;
            let options = Options {
                dir: parts.display().to_string(),
                algorithm,
                stage1,
                kernel,
            };
            let mut driver = Driver::connect(
                cluster,
                Secret::from_bytes(SECRET),
                options,
                read_manifest(&parts).expect("manifest"),
            )
            .await
            .expect("connect");
            let start = State {
                iteration: 0,
                centroids: initial_centroids(&set.matrices(), k, &Init::Random, 3).expect("init"),
                history: Vec::new(),
                converged: false,
            };
            let mut reports = Vec::new();
            let state = driver
                .fit::<DriverError>(&params, start, &mut |_, r| {
                    reports.push(r.clone());
                    Ok(())
                })
                .await
                .expect("fit");
            assert_eq!(
                state.centroids, local.centroids,
                "{n} workers, k = {k}, {kernel:?}"
            );
            let bits = |s: &State| {
                s.history
                    .iter()
                    .map(|h| h.inertia.to_bits())
                    .collect::<Vec<_>>()
            };
            assert_eq!(bits(&state), bits(&local), "{n} workers, k = {k}");
            let r = &reports[0];
            assert_eq!((r.workers, r.attempts), (n, 1));
            assert_eq!(r.broadcast_bytes, (k * 24 * 4 * n) as u64);
            // Each worker ships (n - 1) / n of its partial(s): (k x (dims + 1)) x 8 bytes each.
            let partial_bytes = k * 25 * 8;
            if n == 1 {
                assert_eq!(r.stage2_bytes, 0);
            } else {
                assert!(
                    r.stage2_bytes as f64
                        >= (partial_bytes * (n - 1)) as f64 * if stage1 { 1.0 } else { 2.0 }
                );
            }
            assert!(r.stage3_bytes as usize >= k * 8 + k * 24 * 4);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_member_is_dropped_and_the_iteration_redone_with_the_same_result() {
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        let local = kmeans::fit::<KMeansError>(&set.matrices(), &params(12), None, &mut |_| Ok(()))
            .expect("local");
        let (cluster, _workers) = workers(3).await;
        // A fourth node that is in the cluster file but never listens.
        let ghost = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind")
            .local_addr()
            .expect("a");
        let mut text = String::from(
            "[settings]\nchunk_size = 4096\nretries = 2\nio_timeout_ms = 5000\nconnect_timeout_ms = 500\n",
        );
        for node in &cluster.nodes {
            text.push_str(&format!(
                "[[nodes]]\nname = \"{}\"\naddress = \"{}\"\n",
                node.name, node.address
            ));
        }
        text.push_str(&format!(
            "[[nodes]]\nname = \"ghost\"\naddress = \"{ghost}\"\n"
        ));
        let with_ghost = Cluster::parse(&text, std::path::Path::new("g.toml")).expect("cluster");
        let mut driver = connect(
            with_ghost,
            &parts.display().to_string(),
            read_manifest(&parts).expect("manifest"),
        )
        .await
        .expect("connect");
        assert_eq!(driver.dropped(), ["ghost".to_string()]);
        let start = State {
            iteration: 0,
            centroids: initial_centroids(&set.matrices(), 12, &Init::Random, 3).expect("init"),
            history: Vec::new(),
            converged: false,
        };
        let state = driver
            .fit::<DriverError>(&params(12), start, &mut |_, _| Ok(()))
            .await
            .expect("fit");
        assert_eq!(state.centroids, local.centroids);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn workers_with_other_partitions_are_refused_by_name() {
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let mut manifest = read_manifest(&parts).expect("manifest");
        manifest.partitions[0].checksum ^= 1;
        let (cluster, _workers) = workers(2).await;
        let err = connect(cluster, &parts.display().to_string(), manifest)
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("worker w0 refused") && text.contains("manifest digest"),
            "{text}"
        );
        // A folder the workers cannot read is refused too, naming it.
        let (cluster, _workers) = workers(1).await;
        let err = connect(
            cluster,
            "/nonexistent/parts",
            read_manifest(&parts).expect("manifest"),
        )
        .await
        .expect_err("refused");
        assert!(err.to_string().contains("/nonexistent/parts"), "{err}");
        // A payload damaged on disk under an intact manifest: the driver maps partitions without
        // reading them, so the worker that loads the file must catch it, naming the file.
        let manifest = read_manifest(&parts).expect("manifest");
        let file = parts.join(&manifest.partitions[1].file);
        let mut bytes = std::fs::read(&file).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&file, &bytes).expect("write");
        let (cluster, _workers) = workers(2).await;
        let err = connect(cluster, &parts.display().to_string(), manifest.clone())
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains(&manifest.partitions[1].file) && text.contains("checksum"),
            "{text}"
        );
    }
}
