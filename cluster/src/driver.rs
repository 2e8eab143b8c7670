//! The driver of distributed k-means on the worker daemons: membership, failure detection and
//! recovery around the SPMD engine (`crate::spmd`), which runs each iteration.
//!
//! The driver forms a team (`crate::net::transport::tcp::team`): itself as member 0, the cluster
//! file's nodes in chain order after it, linked pairwise over authenticated connections. The
//! SPMD root runs on that team with `root_maps` off: the workers cache the partitions
//! (contiguous, even blocks in chain order) and reduce the centroid ranges, the driver
//! broadcasts, gathers and updates.
//!
//! A member that breaks a link, falls silent for the I/O timeout, or cannot be reached while a
//! team forms fails the attempt: the driver drops the team (its links close, so every worker
//! leaves it), pings every member, drops the ones that do not answer, forms a new team under a
//! new epoch (the workers keep the partitions they already hold), and redoes the iteration from
//! the same centroids. Because the sums are exact integers, the redone iteration gives
//! bit-identical results with any membership.

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use thiserror::Error;
use tokio::task::JoinSet;
use vocab_pipeline::features::Outcome;
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kmeans::{Assignment, Centroids, Engine, StepResult};
use vocab_pipeline::partition::Manifest;

use crate::collective::Algorithm;
use crate::collective::topology::tree::Tree;
use crate::collective::{BroadcastPlan, CollectiveError};
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::peer::ping;
use crate::net::transport::tcp::TcpTransport;
use crate::net::transport::tcp::team::{FormError, form};
use crate::photos::{MemberTime, PhotoRoot, PhotoStage, Value};
use crate::spmd::{self, EngineError, Root};

/// The name the driver authenticates with.
pub const DRIVER: &str = "driver";

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
    #[error("{what} failed at node {node} after {attempts} attempts: {reason}")]
    Failed {
        /// What failed: `starting the job`, `iteration 3`, `broadcast`.
        what: String,
        /// Attempts made.
        attempts: u32,
        /// The node blamed last.
        node: String,
        /// What happened.
        reason: String,
    },
    /// Every member was dropped.
    #[error("no workers left (dropped: {})", .0.join(", "))]
    NoWorkers(Vec<String>),
    /// The engine failed in a way retrying cannot mend (data out of range, counts that do
    /// not add up, a protocol error).
    #[error(transparent)]
    Engine(EngineError),
    /// The driver's own runtime could not start.
    #[error("cannot start the driver's runtime: {0}")]
    Runtime(std::io::Error),
}

/// How the driver runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The partition folder, as the workers see it.
    pub dir: String,
    /// Broadcast algorithm for the centroids.
    pub algorithm: Algorithm,
    /// Stage-1 aggregation (off: every map task ships its own partial sums).
    pub stage1: bool,
    /// How the workers assign their vectors. The int8 kernel's labels do not depend on the
    /// partition layout, so its distributed runs match its single-process runs bit for bit as
    /// well; pruned runs keep their bounds at the workers, beside the partitions.
    pub assignment: Assignment,
    /// Build the chain from measured links (`--order auto`) instead of the cluster file's
    /// order; measured again whenever a new team forms.
    pub auto: Option<spmd::Auto>,
    /// Links measured before (`<cluster>.links.json`), reused while they cover the team.
    pub known: Option<crate::collective::topology::Saved>,
    /// How partitions are dealt: blocks from a shared folder, or where they are
    /// ([`spmd::Deal::Found`]: each team asks its members, so partitions stay with the
    /// workers holding them across teams).
    pub deal: spmd::Deal,
    /// How partitions born on the nodes are made again when no worker holds them
    /// ([`spmd::Options::remake`]).
    pub remake: Option<std::sync::Arc<crate::born::Recipes>>,
}

/// A failed attempt that a new team may mend.
#[derive(Debug)]
struct Failure {
    node: String,
    reason: String,
}

enum Attempt {
    Fatal(DriverError),
    Retry(Failure),
}

/// What a run with recovery returns beside its value.
#[derive(Debug)]
struct Recovered<T> {
    value: T,
    attempts: u32,
    dropped: Vec<String>,
    failures: Vec<String>,
}

/// Membership of the daemons' teams, and recovery from lost members: shared by k-means
/// ([`Driver`]) and the broadcast benchmark ([`Broadcaster`]).
struct Crew {
    runtime: tokio::runtime::Runtime,
    cluster: Cluster,
    secret: Secret,
    /// Live workers, in chain order.
    members: Vec<String>,
    dropped: Vec<String>,
    job: u64,
    epoch: u64,
}

impl Crew {
    fn new(cluster: Cluster, secret: Secret) -> Result<Self, DriverError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vocab-driver")
            .enable_all()
            .build()
            .map_err(DriverError::Runtime)?;
        let members = cluster.chain_nodes().map(|n| n.name.clone()).collect();
        Ok(Self {
            runtime,
            cluster,
            secret,
            members,
            dropped: Vec::new(),
            job: rand::random::<u64>() >> 1,
            epoch: 0,
        })
    }

    /// Forms a team of the driver and the live workers under a new epoch.
    fn form(&mut self) -> Result<TcpTransport, Attempt> {
        self.epoch += 1;
        let formed = self.runtime.block_on(form(
            &self.cluster,
            &self.secret,
            DRIVER,
            &self.members,
            self.job,
            self.epoch,
        ));
        formed.map_err(|e| match e {
            FormError::Refused { node, reason } => {
                Attempt::Fatal(DriverError::Refused { node, reason })
            }
            FormError::Unreachable { node, reason } => Attempt::Retry(Failure { node, reason }),
        })
    }

    /// Pings every member and drops the ones that do not answer.
    fn drop_dead(&mut self) -> Result<(), DriverError> {
        let alive = self.runtime.block_on(async {
            let mut set = JoinSet::new();
            for (j, name) in self.members.iter().enumerate() {
                let Some(node) = self.cluster.nodes.iter().find(|n| n.name == *name).cloned()
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
            alive
        });
        let mut j = 0;
        self.members.retain(|m| {
            let keep = alive[j];
            j += 1;
            if !keep {
                self.dropped.push(m.clone());
            }
            keep
        });
        if self.members.is_empty() {
            return Err(DriverError::NoWorkers(self.dropped.clone()));
        }
        Ok(())
    }

    /// Runs `work` on the session in `session`, started by `start` on a new team when there
    /// is none, until it succeeds, fails for good, or the cluster's retries run out. After a
    /// failure the session is dropped (its links close, so every worker leaves the team), the
    /// silent members are dropped, and the next attempt starts on a new team. `what` names the
    /// work in errors.
    fn recover<S, T>(
        &mut self,
        what: &str,
        session: &mut Option<S>,
        mut start: impl FnMut(TcpTransport) -> Result<S, Attempt>,
        mut work: impl FnMut(&mut S) -> Result<T, EngineError>,
    ) -> Result<Recovered<T>, DriverError> {
        let dropped_before = self.dropped.len();
        let mut failures = Vec::new();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let names: Vec<String> = std::iter::once(DRIVER.to_string())
                .chain(self.members.iter().cloned())
                .collect();
            let s = match session {
                Some(s) => s,
                None => match self.form().and_then(&mut start) {
                    Ok(s) => session.insert(s),
                    Err(Attempt::Fatal(e)) => return Err(e),
                    Err(Attempt::Retry(f)) => {
                        self.failed(what, attempts, f, &mut failures)?;
                        continue;
                    }
                },
            };
            match work(s).map_err(|e| classify(e, &names)) {
                Ok(value) => {
                    return Ok(Recovered {
                        value,
                        attempts,
                        dropped: self.dropped[dropped_before..].to_vec(),
                        failures,
                    });
                }
                Err(Attempt::Fatal(e)) => return Err(e),
                Err(Attempt::Retry(f)) => {
                    *session = None;
                    self.failed(what, attempts, f, &mut failures)?;
                }
            }
        }
    }

    /// Books a failed attempt: backs off, drops the members that do not answer a ping, and
    /// gives up when the retries are spent. The driver sees only its own links, so the member
    /// that reported a failure may be the neighbour of the one that died: a member that does
    /// not answer is named instead.
    fn failed(
        &mut self,
        what: &str,
        attempts: u32,
        f: Failure,
        failures: &mut Vec<String>,
    ) -> Result<(), DriverError> {
        failures.push(format!("{}: {}", f.node, f.reason));
        std::thread::sleep(Duration::from_millis(50 << (attempts - 1).min(6)));
        let before = self.dropped.len();
        let alive = self.drop_dead();
        if attempts > self.cluster.settings.retries {
            let (node, reason) = match self.dropped.get(before) {
                Some(dead) if *dead != f.node => (
                    dead.clone(),
                    format!("it does not answer; {} reported: {}", f.node, f.reason),
                ),
                _ => (f.node, f.reason),
            };
            return Err(DriverError::Failed {
                what: what.to_string(),
                attempts,
                node,
                reason,
            });
        }
        alive
    }
}

/// A connected driver with its members' partitions loaded.
pub struct Driver {
    crew: Crew,
    options: spmd::Options,
    manifest: Manifest,
    /// The SPMD root on the current team; `None` after a failure until a new team forms.
    root: Option<Root<'static>>,
    scale: i32,
    /// Partitions made again from their photos on the way (partition, worker).
    remade: Vec<(u32, String)>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("members", &self.crew.members)
            .field("dropped", &self.crew.dropped)
            .field("job", &self.crew.job)
            .field("epoch", &self.crew.epoch)
            .finish()
    }
}

/// Starts the k-means job on a new team: every member's hello, then the load.
fn start_job(
    transport: TcpTransport,
    options: &spmd::Options,
    manifest: &Manifest,
    job: u64,
) -> Result<Root<'static>, Attempt> {
    let names = transport.names().to_vec();
    spmd::hello(&transport)
        .and_then(|members| {
            Root::start(
                Box::new(transport),
                &members,
                options.clone(),
                manifest.clone(),
                job,
            )
        })
        .map_err(|e| classify(e, &names))
}

impl Driver {
    /// Forms a team of every node of `cluster` and has each worker load its share of the
    /// partitions of `manifest` (the driver's copy; workers must hold the same). Unreachable
    /// nodes are dropped; a node of another build or with other partitions is an error.
    ///
    /// The driver runs its links on a runtime of its own: call it from a plain thread, not
    /// from inside a tokio runtime.
    pub fn connect(
        cluster: Cluster,
        secret: Secret,
        options: Options,
        manifest: Manifest,
    ) -> Result<Self, DriverError> {
        let plan = BroadcastPlan {
            algorithm: options.algorithm,
            chunk: cluster.settings.chunk_size,
            chains: cluster.settings.chains,
        };
        let options = spmd::Options {
            dir: options.dir,
            plan,
            stage1: options.stage1,
            assignment: options.assignment,
            // Ranks follow the cluster file's chain order already.
            racks: BTreeMap::new(),
            root_maps: false,
            auto: options.auto,
            known: options.known,
            deal: options.deal,
            remake: options.remake,
        };
        let mut driver = Self {
            crew: Crew::new(cluster, secret)?,
            options,
            manifest,
            root: None,
            scale: 0,
            remade: Vec::new(),
        };
        let (options, manifest, job) = (&driver.options, &driver.manifest, driver.crew.job);
        driver.crew.recover(
            "starting the job",
            &mut driver.root,
            |t| start_job(t, options, manifest, job),
            |_| Ok(()),
        )?;
        driver.scale = driver.root.as_ref().map_or(0, Root::scale);
        driver.note_remade();
        driver.remember_links();
        Ok(driver)
    }

    /// Keeps the current team's measured links, so a team formed after a failure reuses them
    /// for the members it keeps instead of measuring again.
    fn remember_links(&mut self) {
        if let Some((c, names)) = self.calibration().filter(|(c, _)| !c.reused) {
            let saved = crate::collective::topology::Saved::new(&names, &c.links, c.seconds);
            self.options.known = Some(saved);
        }
    }

    /// Keeps what the current team made again (a new team may have, when it formed).
    fn note_remade(&mut self) {
        for r in self.root.as_ref().map(Root::remade).unwrap_or_default() {
            if !self.remade.contains(r) {
                self.remade.push(r.clone());
            }
        }
    }

    /// Partitions no worker held that were made again from their photos (partition, worker).
    pub fn remade(&self) -> &[(u32, String)] {
        &self.remade
    }

    /// The fixed-point scale of the partial sums (from the workers' data).
    pub fn scale(&self) -> i32 {
        self.scale
    }

    /// Current members, in chain (and range) order.
    pub fn members(&self) -> Vec<String> {
        self.crew.members.clone()
    }

    /// Members dropped so far.
    pub fn dropped(&self) -> &[String] {
        &self.crew.dropped
    }

    /// The current team's calibration (`auto` order), with its members' names by rank.
    pub fn calibration(&self) -> Option<(&spmd::Calibration, Vec<String>)> {
        let names = std::iter::once(DRIVER.to_string())
            .chain(self.crew.members.iter().cloned())
            .collect();
        self.root
            .as_ref()
            .and_then(Root::calibration)
            .map(|c| (c, names))
    }

    /// The rows of the global `indices` from the workers holding them (the initial centroids
    /// of partitions that lie only at the workers), recovering from failed members.
    pub fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, DriverError> {
        let (options, manifest, job) = (&self.options, &self.manifest, self.crew.job);
        let done = self.crew.recover(
            "reading the initial rows",
            &mut self.root,
            |t| start_job(t, options, manifest, job),
            |root| root.rows(indices),
        )?;
        self.note_remade();
        Ok(done.value)
    }

    /// Runs iteration `iteration` from `centroids`, recovering from failed members.
    pub fn step(
        &mut self,
        iteration: u64,
        centroids: &Centroids,
    ) -> Result<StepResult, DriverError> {
        let (options, manifest, job) = (&self.options, &self.manifest, self.crew.job);
        let done = self.crew.recover(
            &format!("iteration {iteration}"),
            &mut self.root,
            |t| start_job(t, options, manifest, job),
            |root| root.step(iteration, centroids),
        )?;
        self.remember_links();
        self.note_remade();
        let mut result = done.value;
        // Members that mapped: the workers (the team counts the driver too).
        result.report.workers = self.crew.members.len();
        result.report.attempts = done.attempts;
        result.report.dropped = done.dropped;
        result.report.failures = done.failures;
        Ok(result)
    }
}

impl Engine for Driver {
    type Error = DriverError;

    fn step(&mut self, iteration: u64, centroids: &Centroids) -> Result<StepResult, DriverError> {
        Driver::step(self, iteration, centroids)
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, DriverError> {
        Driver::rows(self, indices)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Let the workers leave the team at once instead of noticing the closed links.
        if let Some(root) = self.root.take() {
            let _ = spmd::exit(root.transport());
        }
    }
}

/// A photo stage (features or encode) on the daemons: the driver deals rounds of photos out to
/// the workers and takes their results in picture-id order (`crate::photos`). A round lost with
/// a member is redone on a new team of the members that answer; rounds already returned stay
/// returned.
pub struct PhotoDriver {
    crew: Crew,
    collection: Collection,
    stage: PhotoStage,
    vocabulary: Option<Centroids>,
    /// Features whose patches the workers keep ([`PhotoDriver::born`]), with the partition
    /// folder under which they also save their kept rounds.
    keep: Option<Option<String>>,
    root: Option<PhotoRoot<'static>>,
    /// Time per member over every team so far, by name.
    times: BTreeMap<String, MemberTime>,
    bytes: u64,
}

impl std::fmt::Debug for PhotoDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhotoDriver")
            .field("members", &self.crew.members)
            .field("dropped", &self.crew.dropped)
            .field("epoch", &self.crew.epoch)
            .finish()
    }
}

/// Starts a photo job on a new team: every member's hello, then the job (names by rank as the
/// members' labels).
fn start_photos(
    transport: TcpTransport,
    collection: &Collection,
    stage: &PhotoStage,
    vocabulary: Option<&Centroids>,
    keep: Option<Option<&str>>,
) -> Result<PhotoRoot<'static>, Attempt> {
    let names = transport.names().to_vec();
    spmd::hello(&transport)
        .and_then(|_| {
            let members = spmd::Members {
                hosts: names.clone(),
            };
            match (keep, stage) {
                (Some(dir), PhotoStage::Features(params)) => PhotoRoot::start_keeping(
                    Box::new(transport),
                    &members,
                    collection,
                    *params,
                    false,
                    dir,
                ),
                _ => PhotoRoot::start(
                    Box::new(transport),
                    &members,
                    collection,
                    stage,
                    vocabulary,
                    false,
                ),
            }
        })
        .map_err(|e| classify(e, &names))
}

impl PhotoDriver {
    /// Forms a team of every node of `cluster` and starts the photo job on it: each worker
    /// reads `collection`'s photos at the same path (it checks a few are there) and, for
    /// encode, takes the `vocabulary`. Unreachable nodes are dropped; a node that refuses the
    /// job (other build, photos missing) is an error.
    ///
    /// Call it from a plain thread, not from inside a tokio runtime.
    pub fn connect(
        cluster: Cluster,
        secret: Secret,
        collection: Collection,
        stage: PhotoStage,
        vocabulary: Option<Centroids>,
    ) -> Result<Self, DriverError> {
        Self::begin(cluster, secret, collection, stage, vocabulary, None)
    }

    /// [`PhotoDriver::connect`] for a features job whose workers keep the patches they
    /// describe and cut them into partitions where they are ([`PhotoDriver::born`]); with
    /// `dir`, they also save their kept rounds there ([`PhotoRoot::start_keeping`]).
    pub fn connect_keeping(
        cluster: Cluster,
        secret: Secret,
        collection: Collection,
        params: vocab_pipeline::features::FeatureParams,
        dir: Option<String>,
    ) -> Result<Self, DriverError> {
        let stage = PhotoStage::Features(params);
        Self::begin(cluster, secret, collection, stage, None, Some(dir))
    }

    fn begin(
        cluster: Cluster,
        secret: Secret,
        collection: Collection,
        stage: PhotoStage,
        vocabulary: Option<Centroids>,
        keep: Option<Option<String>>,
    ) -> Result<Self, DriverError> {
        let mut driver = Self {
            crew: Crew::new(cluster, secret)?,
            collection,
            stage,
            vocabulary,
            keep,
            root: None,
            times: BTreeMap::new(),
            bytes: 0,
        };
        let (c, st, v, k) = (
            &driver.collection,
            &driver.stage,
            driver.vocabulary.as_ref(),
            driver.keep.as_ref().map(Option::as_deref),
        );
        driver.crew.recover(
            "starting the photo job",
            &mut driver.root,
            |t| start_photos(t, c, st, v, k),
            |_| Ok(()),
        )?;
        Ok(driver)
    }

    /// The whole job of [`PhotoDriver::connect_keeping`]: the workers describe their shards and
    /// keep the patches ([`PhotoRoot::kept_rounds`], `progress` told the photos done), then cut
    /// them into `parts` partitions in their folders `dir` ([`PhotoRoot::cut`]). Returns each
    /// photo's size and patch count and the partitions' placing. A member lost on the way
    /// takes its patches with it: the job is done again on a new team of the members that
    /// answer.
    pub fn born(
        &mut self,
        dir: &str,
        parts: usize,
        element: vocab_pipeline::store::Element,
        source: &str,
        progress: &mut dyn FnMut(usize),
    ) -> Result<(Vec<Outcome<()>>, crate::born::Born), DriverError> {
        let (c, st, v, keep) = (
            &self.collection,
            &self.stage,
            self.vocabulary.as_ref(),
            self.keep.as_ref().map(Option::as_deref),
        );
        let done = self.crew.recover(
            "the kept features",
            &mut self.root,
            |t| start_photos(t, c, st, v, keep),
            |root| {
                let sized = root.kept_rounds(progress)?;
                let born = root.cut(dir, parts, element, source)?;
                Ok((sized, born, root.take_times(), root.take_bytes()))
            },
        )?;
        let (sized, born, times, bytes) = done.value;
        self.add(times, bytes);
        Ok((sized, born))
    }

    /// Adds a team's member times and bytes to the stage's.
    fn add(&mut self, times: Vec<MemberTime>, bytes: u64) {
        for t in times {
            let entry = self.times.entry(t.host.clone()).or_insert(MemberTime {
                host: t.host,
                ..MemberTime::default()
            });
            entry.seconds += t.seconds;
            entry.photos += t.photos;
        }
        self.bytes += bytes;
    }

    /// Current members, in rank order.
    pub fn members(&self) -> Vec<String> {
        self.crew.members.clone()
    }

    /// Members dropped so far.
    pub fn dropped(&self) -> &[String] {
        &self.crew.dropped
    }

    /// Has the workers do the photos `range` and returns their results in picture-id order,
    /// redoing the round on a new team when a member is lost.
    /// With `next`, the workers start on that range early (see [`PhotoRoot::round`]).
    pub fn round<T: Value>(
        &mut self,
        range: Range<usize>,
        next: Option<Range<usize>>,
    ) -> Result<Vec<Outcome<T>>, DriverError> {
        let (c, st, v, keep) = (
            &self.collection,
            &self.stage,
            self.vocabulary.as_ref(),
            self.keep.as_ref().map(Option::as_deref),
        );
        let done = self.crew.recover(
            &format!("photos {}..{}", range.start, range.end),
            &mut self.root,
            |t| start_photos(t, c, st, v, keep),
            |root| {
                let outcomes = root.round::<T>(range.clone(), next.clone())?;
                Ok((outcomes, root.take_times(), root.take_bytes()))
            },
        )?;
        let (outcomes, times, bytes) = done.value;
        self.add(times, bytes);
        Ok(outcomes)
    }

    /// Each member's time over the stage (members dropped on the way included).
    pub fn times(&self) -> Vec<MemberTime> {
        self.times.values().cloned().collect()
    }

    /// Bytes the stage moved: the job to every member and the results to the driver.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for PhotoDriver {
    fn drop(&mut self) {
        if let Some(root) = self.root.take() {
            let _ = spmd::exit(root.transport());
        }
    }
}

/// What a broadcast of [`Broadcaster`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct BroadcastReport {
    /// Seconds of the attempt that succeeded, from the command to the last checked copy.
    pub seconds: f64,
    /// Nodes dropped because they were dead.
    pub dropped: Vec<String>,
    /// Attempts made (1 when nothing failed).
    pub attempts: u32,
    /// Workers that hold the message.
    pub nodes: usize,
}

/// The daemons' broadcast benchmark: a team of the driver and the workers on which the
/// driver broadcasts messages with the collectives of k-means, every copy checked by its
/// CRC-32, with the same recovery as [`Driver`].
pub struct Broadcaster {
    crew: Crew,
    transport: Option<TcpTransport>,
    /// What [`Broadcaster::calibrate`] chose.
    calibrated: Option<Calibrated>,
}

/// A chain and trees chosen on a team, by the names of its members then.
#[derive(Debug, Clone)]
struct Calibrated {
    names: Vec<String>,
    order: Vec<usize>,
    broadcast_tree: Tree,
    gather_tree: Tree,
}

/// The chain and the trees in ranks of a team.
type Placed = (Vec<usize>, Option<Tree>, Option<Tree>);

impl Calibrated {
    /// The chain and trees on the team of `now` (names by rank), while it has exactly the
    /// members calibrated; else rank order, the binomial tree and the direct gather.
    fn on(this: Option<&Self>, now: &[String]) -> Placed {
        let placed = this.and_then(|c| {
            // Where each current rank stood in the calibration.
            let at: Vec<usize> = now
                .iter()
                .map(|n| c.names.iter().position(|m| m == n))
                .collect::<Option<_>>()?;
            if at.len() != c.names.len() {
                return None;
            }
            let mut rank_now = vec![0; at.len()];
            for (r, &was) in at.iter().enumerate() {
                rank_now[was] = r;
            }
            let order = c.order.iter().map(|&was| rank_now[was]).collect();
            let broadcast = c.broadcast_tree.relabel(&at).ok()?;
            let gather = c.gather_tree.relabel(&at).ok()?;
            Some((order, Some(broadcast), Some(gather)))
        });
        placed.unwrap_or((Vec::new(), None, None))
    }
}

impl std::fmt::Debug for Broadcaster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broadcaster")
            .field("members", &self.crew.members)
            .finish()
    }
}

/// Starts a team for broadcasts: every member's hello.
fn start_plain(transport: TcpTransport) -> Result<TcpTransport, Attempt> {
    let names = transport.names().to_vec();
    match spmd::hello(&transport) {
        Ok(_) => Ok(transport),
        Err(e) => Err(classify(e, &names)),
    }
}

impl Broadcaster {
    /// Forms a team of every node of `cluster` (unreachable nodes are dropped).
    pub fn connect(cluster: Cluster, secret: Secret) -> Result<Self, DriverError> {
        let mut b = Self {
            crew: Crew::new(cluster, secret)?,
            transport: None,
            calibrated: None,
        };
        b.crew.recover(
            "forming the team",
            &mut b.transport,
            start_plain,
            |_| Ok(()),
        )?;
        Ok(b)
    }

    /// Members dropped so far.
    pub fn dropped(&self) -> &[String] {
        &self.crew.dropped
    }

    /// Measures every link of the team and chooses the chain for `auto`; returns the
    /// calibration with the members' names by rank (the driver first).
    pub fn calibrate(
        &mut self,
        auto: spmd::Auto,
    ) -> Result<(spmd::Calibration, Vec<String>), DriverError> {
        let chunk = self.crew.cluster.settings.chunk_size;
        let done = self
            .crew
            .recover("calibration", &mut self.transport, start_plain, |t| {
                spmd::calibrate_links(t, auto.probe)
            })?;
        let (links, seconds) = done.value;
        let names: Vec<String> = std::iter::once(DRIVER.to_string())
            .chain(self.crew.members.iter().cloned())
            .collect();
        let calibration = spmd::Calibration::choose(links, seconds, auto, chunk);
        self.calibrated = Some(Calibrated {
            names: names.clone(),
            order: calibration.order.clone(),
            broadcast_tree: calibration.broadcast_tree.clone(),
            gather_tree: calibration.gather_tree.clone(),
        });
        Ok((calibration, names))
    }

    /// Broadcasts `data` to every worker by `algorithm` (chunks and chains from the cluster
    /// file), down the chain (or, for `mst`, the tree) of the last
    /// [`Broadcaster::calibrate`] while its members are all in the team, else in the cluster
    /// file's order; a member lost on the way is dropped and the broadcast redone.
    pub fn broadcast(
        &mut self,
        data: &[u8],
        algorithm: Algorithm,
    ) -> Result<BroadcastReport, DriverError> {
        let plan = BroadcastPlan {
            algorithm,
            chunk: self.crew.cluster.settings.chunk_size,
            chains: self.crew.cluster.settings.chains,
        };
        self.timed("broadcast", |t, (order, tree, _)| {
            spmd::broadcast_checked(t, plan, data, &order, tree.as_ref())
        })
    }

    /// Gathers a piece of `bytes` from every worker at the driver, up the gather tree of the
    /// last [`Broadcaster::calibrate`] while its members are all in the team, else directly;
    /// every piece checked. A member lost on the way is dropped and the gather redone.
    pub fn gather(&mut self, bytes: u64) -> Result<BroadcastReport, DriverError> {
        self.timed("gather", |t, (order, _, tree)| {
            spmd::gather_checked(t, bytes, &order, tree.as_ref())
        })
    }

    /// Runs the collective `what` (seconds) with recovery, on the calibrated layout of the
    /// current team.
    fn timed(
        &mut self,
        what: &str,
        run: impl Fn(&TcpTransport, Placed) -> Result<f64, EngineError>,
    ) -> Result<BroadcastReport, DriverError> {
        let calibrated = self.calibrated.as_ref();
        let done = self
            .crew
            .recover(what, &mut self.transport, start_plain, |t| {
                run(t, Calibrated::on(calibrated, t.names()))
            })?;
        Ok(BroadcastReport {
            seconds: done.value,
            dropped: done.dropped,
            attempts: done.attempts,
            nodes: self.crew.members.len(),
        })
    }
}

impl Drop for Broadcaster {
    fn drop(&mut self) {
        if let Some(t) = self.transport.take() {
            let _ = spmd::exit(&t);
        }
    }
}

/// Sorts an engine error on the team `names` into what a new team may mend (a member lost)
/// and what it cannot.
fn classify(e: EngineError, names: &[String]) -> Attempt {
    let name = |m: usize| {
        names
            .get(m)
            .cloned()
            .unwrap_or_else(|| format!("member {m}"))
    };
    match e {
        EngineError::Collective(CollectiveError::Transport(t)) => {
            let node = t.suspect().map_or_else(|| DRIVER.to_string(), name);
            Attempt::Retry(Failure {
                node,
                reason: t.to_string(),
            })
        }
        EngineError::Refused { rank, reason, .. } => Attempt::Fatal(DriverError::Refused {
            node: name(rank),
            reason,
        }),
        other => Attempt::Fatal(DriverError::Engine(other)),
    }
}

#[cfg(test)]
mod tests {
    use vocab_pipeline::kmeans::{
        self, Init, KMeansError, Kernel, Params, State, initial_centroids,
    };
    use vocab_pipeline::partition::{PartitionSet, read_manifest, split};
    use vocab_pipeline::store::{Element, Format};

    use super::*;
    use crate::worker::Worker;

    const SECRET: &[u8] = b"driver-test-secret-0123";

    /// `n` in-process workers on loopback, served by `rt`.
    fn workers(rt: &tokio::runtime::Runtime, n: usize) -> (Cluster, Vec<std::sync::Arc<Worker>>) {
        let settings = "chunk_size = 4096\nretries = 2\nconnect_timeout_ms = 500\n";
        rt.block_on(crate::worker::start_workers(n, 2, settings, SECRET))
    }

    use crate::net::transport::tcp::test_runtime as runtime;

    /// A driver on `cluster` for the partitions in `dir` (chain broadcast, stage 1 on).
    fn connect(cluster: Cluster, dir: &str, manifest: Manifest) -> Result<Driver, DriverError> {
        let options = Options {
            dir: dir.into(),
            algorithm: Algorithm::Chain,
            stage1: true,
            assignment: Assignment::default(),
            auto: None,
            known: None,
            deal: spmd::Deal::Blocks,
            remake: None,
        };
        Driver::connect(cluster, Secret::from_bytes(SECRET), options, manifest)
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

    fn start(set: &PartitionSet, k: usize) -> State {
        State {
            iteration: 0,
            centroids: initial_centroids(&set.matrices(), k, &Init::Random, 3).expect("init"),
            history: Vec::new(),
            converged: false,
        }
    }

    #[test]
    fn distributed_runs_give_the_local_centroids_bit_for_bit() {
        let rt = runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        let (f32, int8) = (
            Assignment::Full(Kernel::F32),
            Assignment::Full(Kernel::Int8),
        );
        for (n, stage1, algorithm, k, assignment) in [
            (1, true, Algorithm::Chain, 20, f32),
            (2, true, Algorithm::Chain, 20, f32),
            (4, false, Algorithm::Mst, 20, f32),
            // Fewer centroids than workers: one worker reduces an empty range.
            (4, true, Algorithm::Chain, 3, f32),
            (3, true, Algorithm::MultiChain, 20, int8),
            // Half as many centroids as vectors: map tasks touch few of a range's centroids
            // and ship sparse pieces.
            (3, false, Algorithm::Chain, 1500, f32),
            (2, true, Algorithm::Chain, 1500, f32),
            // Pruned on the workers, their bounds kept beside their partitions.
            (
                3,
                true,
                Algorithm::Chain,
                20,
                Assignment::Pruned(Kernel::F32),
            ),
            (
                2,
                false,
                Algorithm::Mst,
                20,
                Assignment::Pruned(Kernel::Int8),
            ),
            // Approximate: each worker indexes the broadcast centroids itself.
            (
                3,
                true,
                Algorithm::Chain,
                40,
                Assignment::Approx {
                    lists: 0,
                    probes: 2,
                },
            ),
        ] {
            let params = Params {
                assignment,
                ..params(k)
            };
            let local = kmeans::fit::<KMeansError>(&set.matrices(), &params, None, &mut |_| Ok(()))
                .expect("local");
            let (cluster, _workers) = workers(&rt, n);
            let options = Options {
                dir: parts.display().to_string(),
                algorithm,
                stage1,
                assignment,
                auto: None,
                known: None,
                deal: spmd::Deal::Blocks,
                remake: None,
            };
            let mut driver = Driver::connect(
                cluster,
                Secret::from_bytes(SECRET),
                options,
                read_manifest(&parts).expect("manifest"),
            )
            .expect("connect");
            let mut reports = Vec::new();
            let state = vocab_pipeline::kmeans::fit_with::<_, DriverError>(
                &mut driver,
                &params,
                start(&set, k),
                &mut |_, r| {
                    reports.push(r.clone());
                    Ok(())
                },
            )
            .expect("fit");
            let what = format!("{n} workers, k = {k}, {}", assignment.name());
            crate::spmd::assert_same_run(&state, &local, assignment, &what);
            let r = &reports[0];
            assert_eq!((r.workers, r.attempts), (n, 1));
            assert_eq!(r.broadcast_bytes, (k * 24 * 4 * n) as u64);
            // Each worker ships n - 1 of the n ranges of its partial(s), a piece per range and
            // partial, at most dense: (centroids x (dims + 1) + 1) x 8 bytes.
            let partial_bytes = k * 25 * 8;
            let most = r.tasks as usize * (partial_bytes + 8 * n);
            if n == 1 {
                assert_eq!(r.stage2_bytes, 0);
            } else if k > 1000 {
                // 3,000 vectors over 1,500 centroids: sparse pieces, under half the dense size
                // (a touched centroid costs dims + 2 words instead of dims + 1).
                assert!(
                    r.stage2_bytes > 0 && (r.stage2_bytes as usize) < most / 2,
                    "{n} workers, k = {k}: {} bytes of at most {most}",
                    r.stage2_bytes
                );
            } else {
                assert!(r.stage2_bytes > 0 && r.stage2_bytes as usize <= most);
            }
            assert!(r.stage3_bytes as usize >= k * 8 + k * 24 * 4);
        }
    }

    #[test]
    fn a_dead_member_is_dropped_and_the_iteration_redone_with_the_same_result() {
        let rt = runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        let local = kmeans::fit::<KMeansError>(&set.matrices(), &params(12), None, &mut |_| Ok(()))
            .expect("local");
        // A fourth node that is in the cluster file but never listens.
        let ghost = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("a");
        let settings = format!(
            "chunk_size = 4096\nretries = 2\nconnect_timeout_ms = 500\n\
             [[nodes]]\nname = \"ghost\"\naddress = \"{ghost}\"\n"
        );
        let (with_ghost, _workers) =
            rt.block_on(crate::worker::start_workers(3, 2, &settings, SECRET));
        let mut driver = connect(
            with_ghost,
            &parts.display().to_string(),
            read_manifest(&parts).expect("manifest"),
        )
        .expect("connect");
        assert_eq!(driver.dropped(), ["ghost".to_string()]);
        let state = vocab_pipeline::kmeans::fit_with::<_, DriverError>(
            &mut driver,
            &params(12),
            start(&set, 12),
            &mut |_, _| Ok(()),
        )
        .expect("fit");
        assert_eq!(state.centroids, local.centroids);
    }

    #[test]
    fn workers_with_other_partitions_are_refused_by_name() {
        let rt = runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let mut manifest = read_manifest(&parts).expect("manifest");
        manifest.partitions[0].checksum ^= 1;
        let (cluster, _workers) = workers(&rt, 2);
        let err = connect(cluster, &parts.display().to_string(), manifest).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("worker w0 refused") && text.contains("manifest digest"),
            "{text}"
        );
        // A folder the workers cannot read is refused too, naming it.
        let (cluster, _workers) = workers(&rt, 1);
        let err = connect(
            cluster,
            "/nonexistent/parts",
            read_manifest(&parts).expect("manifest"),
        )
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
        let (cluster, _workers) = workers(&rt, 2);
        let err =
            connect(cluster, &parts.display().to_string(), manifest.clone()).expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains(&manifest.partitions[1].file) && text.contains("checksum"),
            "{text}"
        );
    }

    fn message(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn every_algorithm_delivers_the_whole_message_to_every_worker() {
        let rt = runtime();
        let settings = "chunk_size = 65536\nchains = 3\nretries = 2\n";
        let (cluster, _workers) = rt.block_on(crate::worker::start_workers(5, 2, settings, SECRET));
        let mut b = Broadcaster::connect(cluster, Secret::from_bytes(SECRET)).expect("connect");
        for (i, algorithm) in [
            Algorithm::Chain,
            Algorithm::Simple,
            Algorithm::Mst,
            Algorithm::MultiChain,
        ]
        .into_iter()
        .enumerate()
        {
            // Every copy is checked by its CRC at the root: a report means all arrived whole.
            let report = b
                .broadcast(&message(1_000_003 + i), algorithm)
                .expect("broadcast");
            assert_eq!(
                (report.nodes, report.attempts, report.dropped.len()),
                (5, 1, 0),
                "{algorithm:?}"
            );
        }
        // An empty message is a message too.
        b.broadcast(&[], Algorithm::Chain).expect("empty");
    }

    #[test]
    fn a_dead_worker_is_dropped_or_without_retries_named() {
        let rt = runtime();
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr");
        let settings = format!(
            "chunk_size = 65536\nretries = 2\nconnect_timeout_ms = 500\n\
             [[nodes]]\nname = \"ghost\"\naddress = \"{dead}\"\nrack = \"r0\"\n"
        );
        let (cluster, _workers) =
            rt.block_on(crate::worker::start_workers(3, 1, &settings, SECRET));
        let mut b =
            Broadcaster::connect(cluster.clone(), Secret::from_bytes(SECRET)).expect("connect");
        assert_eq!(b.dropped(), ["ghost".to_string()]);
        let report = b
            .broadcast(&message(300_000), Algorithm::Chain)
            .expect("broadcast");
        assert_eq!(report.nodes, 3);
        // Without retries the same fault is an error naming the node.
        let mut strict = cluster.clone();
        strict.settings.retries = 0;
        let err = Broadcaster::connect(strict, Secret::from_bytes(SECRET)).expect_err("strict");
        assert!(err.to_string().contains("ghost"), "{err}");
    }

    #[test]
    fn a_driver_with_the_wrong_secret_cannot_form_a_team() {
        let rt = runtime();
        let (cluster, _workers) = workers(&rt, 2);
        let outsider = Secret::from_bytes(b"not-the-cluster-secret!!".to_vec());
        let err = Broadcaster::connect(cluster, outsider).expect_err("refused");
        assert!(err.to_string().contains("w0"), "{err}");
    }
}
