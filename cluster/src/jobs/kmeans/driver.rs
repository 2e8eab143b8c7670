//! The k-means job on the worker daemons: the TCP driver is member 0 of a team of the cluster
//! file's nodes and runs the job's root half there with `root_maps` off (the workers cache the
//! partitions and reduce the centroid ranges, the driver broadcasts, gathers and updates). A
//! member lost mid-iteration is dropped and the iteration redone from the same centroids on a
//! new team ([`Crew::recover`]); because the sums are exact integers, the redone iteration gives
//! bit-identical results with any membership.

use std::collections::BTreeMap;

use vocab_pipeline::kmeans::engine::{Engine, StepReport, StepResult};
use vocab_pipeline::kmeans::{Assignment, Centroids};
use vocab_pipeline::mixture::{Engine as MixtureEngine, Moments, Statistic};
use vocab_pipeline::partition::Manifest;

use super::layout::{self, Deal};
use super::root::Root;
use crate::collective::calibration::{Auto, Calibration};
use crate::collective::topology::Saved;
use crate::collective::{Algorithm, BroadcastPlan};
use crate::engine::crew::{self, Attempt, Crew, DriverError};
use crate::engine::exit;
use crate::net::auth::Secret;
use crate::net::config::Cluster;
use crate::net::transport::tcp::TcpTransport;

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
    pub auto: Option<Auto>,
    /// Links measured before (`<cluster>.links.json`), reused while they cover the team.
    pub known: Option<Saved>,
    /// How partitions are dealt: blocks from a shared folder, or where they are
    /// ([`Deal::Found`]: each team asks its members, so partitions stay with the
    /// workers holding them across teams).
    pub deal: Deal,
    /// How partitions born on the nodes are made again when no worker holds them
    /// ([`layout::Options::remake`]).
    pub remake: Option<std::sync::Arc<crate::jobs::born::Recipes>>,
}

/// A connected driver with its members' partitions loaded.
pub struct Driver {
    crew: Crew,
    options: layout::Options,
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
    options: &layout::Options,
    manifest: &Manifest,
    job: u64,
) -> Result<Root<'static>, Attempt> {
    crew::begin(transport, |transport, members| {
        Root::start(
            Box::new(transport),
            &members,
            options.clone(),
            manifest.clone(),
            job,
        )
    })
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
        let options = layout::Options {
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
            let saved = Saved::new(&names, &c.links, c.seconds);
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
    pub fn calibration(&self) -> Option<(&Calibration, Vec<String>)> {
        let names = self.crew.names();
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
            |root| Root::rows(root, indices),
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
        self.reported(
            &format!("iteration {iteration}"),
            |root| root.step(iteration, centroids),
            |result| &mut result.report,
        )
    }

    /// Sums a mixture or PCA `statistic` over every vector, recovering from failed members.
    pub fn moments(&mut self, step: u64, statistic: &Statistic) -> Result<Moments, DriverError> {
        let what = match statistic {
            Statistic::Covariance { .. } => "the covariance".to_string(),
            Statistic::Mixture { .. } => format!("EM step {}", step.saturating_sub(1)),
        };
        self.reported(
            &what,
            |root| root.moments(step, statistic),
            |moments| &mut moments.report,
        )
    }

    /// Runs `work` on the current team (`what` for messages), recovering from failed members,
    /// and fills in its report's membership and attempts (`report` finds it in the result).
    fn reported<T>(
        &mut self,
        what: &str,
        work: impl FnMut(&mut Root<'static>) -> Result<T, crate::engine::EngineError>,
        report: impl Fn(&mut T) -> &mut StepReport,
    ) -> Result<T, DriverError> {
        let (options, manifest, job) = (&self.options, &self.manifest, self.crew.job);
        let done = self.crew.recover(
            what,
            &mut self.root,
            |t| start_job(t, options, manifest, job),
            work,
        )?;
        self.remember_links();
        self.note_remade();
        let mut value = done.value;
        let r = report(&mut value);
        // Members that mapped: the workers (the team counts the driver too).
        r.workers = self.crew.members.len();
        r.attempts = done.attempts;
        r.dropped = done.dropped;
        r.failures = done.failures;
        Ok(value)
    }

    /// The vectors of the job and their dims (the manifest's).
    pub fn shape(&self) -> (u64, usize) {
        (self.manifest.count, self.manifest.dims)
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

impl MixtureEngine for Driver {
    type Error = DriverError;

    fn moments(&mut self, step: u64, statistic: &Statistic) -> Result<Moments, DriverError> {
        Driver::moments(self, step, statistic)
    }

    fn rows(&mut self, indices: &[usize]) -> Result<Vec<f32>, DriverError> {
        Driver::rows(self, indices)
    }

    fn shape(&self) -> (u64, usize) {
        Driver::shape(self)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Let the workers leave the team at once instead of noticing the closed links.
        if let Some(root) = self.root.take() {
            let _ = exit(root.transport());
        }
    }
}

#[cfg(test)]
mod tests {
    use vocab_pipeline::kmeans::{
        self, Init, KMeansError, Kernel, Params, State, initial_centroids,
    };
    use vocab_pipeline::partition::{PartitionSet, read_manifest};

    use super::*;
    use crate::jobs::kmeans::tests::dataset;
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
            deal: Deal::Blocks,
            remake: None,
        };
        Driver::connect(cluster, Secret::from_bytes(SECRET), options, manifest)
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
            centroids: initial_centroids(&set.vectors(), k, &Init::Random, 3).expect("init"),
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
                    kernel: Kernel::F32,
                },
            ),
            (
                2,
                false,
                Algorithm::Mst,
                40,
                Assignment::Approx {
                    lists: 0,
                    probes: 2,
                    kernel: Kernel::Int8,
                },
            ),
        ] {
            let params = Params {
                assignment,
                ..params(k)
            };
            let local =
                kmeans::engine::fit::<KMeansError>(&set.vectors(), &params, None, &mut |_| Ok(()))
                    .expect("local");
            let (cluster, _workers) = workers(&rt, n);
            let options = Options {
                dir: parts.display().to_string(),
                algorithm,
                stage1,
                assignment,
                auto: None,
                known: None,
                deal: Deal::Blocks,
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
            let state = vocab_pipeline::kmeans::engine::fit_with::<_, DriverError>(
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
            super::super::tests::assert_same_run(&state, &local, assignment, &what);
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

    /// The paper ran 125 nodes; 64 in-process workers here link 2,016 pairs at once (before
    /// the workers' admission waited instead of evicting, 48 never formed). u8 partitions, held
    /// as codes at every worker.
    #[test]
    fn sixty_four_workers_form_at_the_first_attempt_and_give_the_local_centroids() {
        let started = std::time::Instant::now();
        let rt = runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        // Values in [0, 1] around 6 centres, as u8 partitions hold them.
        let features = tmp.path().join("f.bin");
        let mut w = vocab_pipeline::store::FeatureWriter::create(
            &features,
            vocab_pipeline::store::Format::Bin,
            16,
        )
        .expect("create");
        let mut seed = 5u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        };
        for i in 0..1280u32 {
            let row: Vec<f32> = (0..16)
                .map(|d| (((i % 6) as f32 + d as f32 / 16.0) / 7.0 + next() * 0.1).min(1.0))
                .collect();
            w.write(i, 0, 0, &row).expect("write");
        }
        w.finish().expect("finish");
        let parts = tmp.path().join("parts");
        vocab_pipeline::partition::split(
            &features,
            128,
            &parts,
            vocab_pipeline::store::Element::U8,
        )
        .expect("split");
        let set = PartitionSet::open(&parts).expect("open");
        let params = Params {
            max_iter: 3,
            ..params(12)
        };
        let local =
            kmeans::engine::fit::<KMeansError>(&set.vectors(), &params, None, &mut |_| Ok(()))
                .expect("local");
        let (cluster, workers) = workers(&rt, 64);
        let mut driver = connect(
            cluster,
            &parts.display().to_string(),
            read_manifest(&parts).expect("manifest"),
        )
        .expect("connect");
        let mut reports = Vec::new();
        let state = kmeans::engine::fit_with::<_, DriverError>(
            &mut driver,
            &params,
            start(&set, 12),
            &mut |_, r| {
                reports.push(r.clone());
                Ok(())
            },
        )
        .expect("fit");
        let what = "64 workers, u8 partitions";
        super::super::tests::assert_same_run(&state, &local, params.assignment, what);
        assert_eq!((reports[0].workers, reports[0].attempts), (64, 1));
        drop((driver, workers));
        // Bounded: forming and three iterations take about a second here.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }

    /// The mixture on TCP workers (the driver only drives): the single process's, bit for bit.
    #[test]
    fn mixtures_on_workers_are_the_local_mixture_bit_for_bit() {
        use vocab_pipeline::mixture::{Params as MixtureParams, fit_with};
        let rt = runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let params = MixtureParams {
            components: 5,
            pca_dims: 6,
            max_iter: 4,
            tol: 0.0,
            seed: 9,
            reg: 1e-6,
        };
        let local = crate::jobs::kmeans::tests::local_mixture(&parts, &params);
        let (cluster, _workers) = workers(&rt, 3);
        let mut driver = connect(
            cluster,
            &parts.display().to_string(),
            read_manifest(&parts).expect("manifest"),
        )
        .expect("connect");
        let mut reports = Vec::new();
        let fitted = fit_with::<_, Box<dyn std::error::Error>>(&mut driver, &params, &mut |s| {
            reports.push(s.report.clone());
            Ok(())
        })
        .expect("fit");
        crate::jobs::kmeans::tests::assert_same_mixture(&fitted, &local, "3 workers");
        assert!(reports.iter().all(|r| (r.workers, r.attempts) == (3, 1)));
    }

    #[test]
    fn a_dead_member_is_dropped_and_the_iteration_redone_with_the_same_result() {
        let rt = runtime();
        let tmp = tempfile::tempdir().expect("tmp");
        let parts = dataset(tmp.path());
        let set = PartitionSet::open(&parts).expect("open");
        let local =
            kmeans::engine::fit::<KMeansError>(&set.vectors(), &params(12), None, &mut |_| Ok(()))
                .expect("local");
        // A fourth node that is in the cluster file but never listens: a port on 127.0.0.2,
        // where no test's worker listens (they bind 127.0.0.1), so none can take it over.
        let ghost = std::net::TcpListener::bind("127.0.0.2:0")
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
        let state = vocab_pipeline::kmeans::engine::fit_with::<_, DriverError>(
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
}
