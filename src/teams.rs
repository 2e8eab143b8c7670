//! k-means on a team: the MPI ranks of this job, or TCP workers (a cluster file's, or loopback
//! workers started for the run). [`start`] is the one place `vocab kmeans` picks where a
//! distributed run goes; [`fit`] runs the one k-means loop (`kmeans::engine::fit_with`) on
//! whatever it started, with the lines, links and recall every team reports alike.

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use vocab_cluster::collective::BroadcastPlan;
use vocab_cluster::collective::calibration::{Calibration, labels};
use vocab_cluster::jobs::born::{RECIPES, Recipes};
use vocab_cluster::jobs::kmeans::{Deal, Driver, DriverOptions, Options, Root};
use vocab_pipeline::kmeans::approx::Recall;
use vocab_pipeline::kmeans::engine::{Engine, StepReport, StepResult};
use vocab_pipeline::kmeans::{self, Centroids, KMeansError, Params, State};
use vocab_pipeline::partition::{Manifest, Matrix, PartitionSet};

use crate::daemons::Loopback;
use crate::links::{auto_order, links_file, read_links, save_links};
use crate::ranks::Mpi;
use crate::settings::KmeansSettings;

/// Vectors on which an approximate run's assignment is compared with the exact one.
pub const RECALL_SAMPLE: usize = 1000;

/// A k-means job started on a team, as `vocab kmeans` drives it: the k-means [`Engine`] (errors
/// as `anyhow`), and what the run reports of the team.
pub trait Team: Engine<Error = anyhow::Error> {
    /// The team, for messages: `the MPI ranks`, `the workers`.
    fn whence(&self) -> &'static str;

    /// The line saying where the run goes: members in chain order, broadcast, aggregation.
    fn describe(&self, args: &KmeansSettings) -> String;

    /// The links measured (`--order auto`), with the members' names for people and their
    /// labels in saved links.
    fn calibration(&self) -> Option<(&Calibration, Vec<String>, Vec<String>)>;

    /// Partitions no member held that were made again from their photos (partition, host).
    fn remade(&self) -> &[(u32, String)];
}

/// The MPI ranks: this process is rank 0; it drives and maps its share, the others map theirs.
struct Ranks<'a> {
    root: Root<'a>,
    mpi: &'a Mpi<'a>,
}

impl Engine for Ranks<'_> {
    type Error = anyhow::Error;

    fn step(&mut self, iteration: u64, centroids: &Centroids) -> anyhow::Result<StepResult> {
        Ok(self.root.step(iteration, centroids)?)
    }

    fn rows(&mut self, indices: &[usize]) -> anyhow::Result<Vec<f32>> {
        Ok(self.root.rows(indices)?)
    }
}

impl Team for Ranks<'_> {
    fn whence(&self) -> &'static str {
        "the MPI ranks"
    }

    fn describe(&self, args: &KmeansSettings) -> String {
        // The chain as `rank@host`, with the host's rack where the map names one.
        let rack_of = |member: &str| {
            let host = member.split_once('@').map_or(member, |(_, h)| h);
            (self.mpi.racks.get(host))
                .map_or_else(|| member.to_string(), |r| format!("{member} ({r})"))
        };
        let chain: Vec<String> = self.root.members().iter().map(|m| rack_of(m)).collect();
        format!(
            "kmeans: on {} MPI ranks (chain {}), broadcast {}, local aggregation {}",
            self.mpi.transport.size(),
            chain.join(", "),
            args.broadcast.name(),
            if args.local_aggregation { "on" } else { "off" },
        )
    }

    fn calibration(&self) -> Option<(&Calibration, Vec<String>, Vec<String>)> {
        let hosts = &self.mpi.members.hosts;
        let names = (hosts.iter().enumerate())
            .map(|(r, h)| format!("{r}@{h}"))
            .collect();
        (self.root.calibration()).map(|c| (c, names, labels(hosts)))
    }

    fn remade(&self) -> &[(u32, String)] {
        self.root.remade()
    }
}

/// TCP workers: the driver on this process, the map and reduce on the workers. Loopback
/// workers started for the run stop when it ends (after the driver has let them go).
struct Workers {
    driver: Driver,
    _local: Option<Loopback>,
}

impl Engine for Workers {
    type Error = anyhow::Error;

    fn step(&mut self, iteration: u64, centroids: &Centroids) -> anyhow::Result<StepResult> {
        Ok(self.driver.step(iteration, centroids)?)
    }

    fn rows(&mut self, indices: &[usize]) -> anyhow::Result<Vec<f32>> {
        Ok(self.driver.rows(indices)?)
    }
}

impl Team for Workers {
    fn whence(&self) -> &'static str {
        "the workers"
    }

    fn describe(&self, args: &KmeansSettings) -> String {
        let (members, dropped) = (self.driver.members(), self.driver.dropped());
        format!(
            "kmeans: on {} workers ({}){}, broadcast {}, local aggregation {}",
            members.len(),
            members.join(", "),
            if dropped.is_empty() {
                String::new()
            } else {
                format!(", dropped {}", dropped.join(", "))
            },
            args.broadcast.name(),
            if args.local_aggregation { "on" } else { "off" },
        )
    }

    fn calibration(&self) -> Option<(&Calibration, Vec<String>, Vec<String>)> {
        (self.driver.calibration()).map(|(c, names)| (c, names.clone(), names))
    }

    fn remade(&self) -> &[(u32, String)] {
        self.driver.remade()
    }
}

/// Starts the k-means job of `args` on its team: the MPI ranks (`mpi`: this process is rank 0),
/// or the TCP workers of `args.engine` (loopback workers started now, their logs beside the
/// vocabulary), each member caching its share of the partitions `at`.
pub fn start<'a>(
    args: &KmeansSettings,
    at: At<'_>,
    mpi: Option<&'a Mpi<'a>>,
    out: &RefCell<&mut dyn Write>,
) -> anyhow::Result<Box<dyn Team + 'a>> {
    let dir = members_dir(args)?.display().to_string();
    let (auto, known) = (
        auto_order(args, at.manifest()),
        links_file(args).and_then(|p| read_links(&p)),
    );
    if let Some(mpi) = mpi {
        let options = Options {
            dir,
            plan: BroadcastPlan {
                algorithm: args.broadcast,
                chunk: args.chunk_size,
                chains: 2,
            },
            stage1: args.local_aggregation,
            assignment: args.assignment,
            racks: mpi.racks.clone(),
            // Rank 0 is a compute rank like the others.
            root_maps: true,
            auto,
            known,
            deal: at.deal(),
            remake: remake_of(args)?,
        };
        let job = rand::random::<u64>() >> 1;
        let root = Root::start(
            Box::new(mpi.transport),
            &mpi.members,
            options,
            at.manifest().clone(),
            job,
        )
        .context("starting k-means on the MPI ranks")?;
        return Ok(Box::new(Ranks { root, mpi }));
    }
    let logs = vocab_pipeline::features::manifest_path(&args.out, "workers");
    let (cluster_path, local) = crate::daemons::workers_of(&args.engine, &logs)?;
    if local.is_some() {
        writeln!(
            out.borrow_mut(),
            "kmeans: {} loopback workers, logs in {}",
            args.engine.local_nodes(),
            logs.display()
        )?;
    }
    let (cluster, secret) = crate::daemons::load(&cluster_path)?;
    let options = DriverOptions {
        dir,
        algorithm: args.broadcast,
        stage1: args.local_aggregation,
        assignment: args.assignment,
        auto,
        known,
        deal: at.deal(),
        remake: remake_of(args)?,
    };
    let driver =
        Driver::connect(cluster, secret, options, at.manifest().clone()).with_context(|| {
            format!(
                "starting k-means on the cluster of {}",
                cluster_path.display()
            )
        })?;
    Ok(Box::new(Workers {
        driver,
        _local: local,
    }))
}

/// Runs the k-means of `params` from `start` (or from first centroids sampled at `at`) on
/// `team`; returns the state and, when the vectors lie only at the members, the recall of
/// approximate assignment measured from rows they send.
pub fn fit(
    team: &mut dyn Team,
    args: &KmeansSettings,
    at: At<'_>,
    params: &Params,
    start: Option<State>,
    out: &RefCell<&mut dyn Write>,
    on_state: &mut dyn FnMut(&State, Option<&StepReport>) -> anyhow::Result<()>,
) -> anyhow::Result<(State, Option<Recall>)> {
    let whence = team.whence();
    let state = first_state(at, params, start, &mut |indices| {
        (team.rows(indices)).with_context(|| format!("reading the first centroids from {whence}"))
    })?;
    if let Some((c, names, _)) = team.calibration() {
        writeln!(out.borrow_mut(), "{}", c.describe(&names))?;
    }
    writeln!(out.borrow_mut(), "{}", team.describe(args))?;
    let done = kmeans::engine::fit_with::<_, anyhow::Error>(team, params, state, &mut |s, r| {
        on_state(s, Some(r))
    });
    write_remade(out, team.remade())?;
    let done = done.and_then(|state| {
        let recall = remote_recall(args, at, &state, &mut |picks| {
            (team.rows(picks)).with_context(|| format!("reading the recall sample from {whence}"))
        })?;
        Ok((state, recall))
    });
    if let (Some((c, _, labels)), Some(path)) = (team.calibration(), links_file(args)) {
        save_links(&path, c, &labels);
    }
    done
}

/// The initial state of a distributed run: the checkpoint's, or the initial centroids sampled
/// from the (header-verified) partitions here, or from rows the nodes send (`rows`) when the
/// partitions lie only there.
fn first_state(
    at: At<'_>,
    params: &Params,
    start: Option<State>,
    rows: &mut kmeans::RowsOf<'_, anyhow::Error>,
) -> anyhow::Result<State> {
    if let Some(state) = start {
        return Ok(state);
    }
    let centroids = match at {
        At::Here(set) => {
            let matrices = set.matrices();
            let n: usize = matrices.iter().map(Matrix::rows).sum();
            if params.k > n {
                return Err(KMeansError::TooFewVectors { k: params.k, n }.into());
            }
            kmeans::initial_centroids(&matrices, params.k, &params.init, params.seed)?
        }
        At::Nodes(m) => kmeans::initial_centroids_by(
            m.count as usize,
            m.dims,
            params.k,
            &params.init,
            params.seed,
            rows,
        )?,
    };
    Ok(State {
        iteration: 0,
        centroids,
        history: Vec::new(),
        converged: false,
    })
}

/// The partition folder as the members see it: `--features` resolved here, or, for partitions
/// at the nodes, as given (each member expands its `{node}` / `{rank}`; nothing to resolve here).
fn members_dir(args: &KmeansSettings) -> anyhow::Result<PathBuf> {
    if args.placed.is_some() {
        return Ok(args.features.clone());
    }
    std::fs::canonicalize(&args.features)
        .with_context(|| format!("cannot resolve {}", args.features.display()))
}

/// The recipes beside the manifest of partitions born on the nodes (`vocab run` writes them),
/// so that partitions no node holds any more are made again from their photos.
fn remake_of(args: &KmeansSettings) -> anyhow::Result<Option<std::sync::Arc<Recipes>>> {
    let Some(here) = &args.placed else {
        return Ok(None);
    };
    let path = here.join(RECIPES);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let recipes = serde_json::from_str(&text)
        .with_context(|| format!("invalid recipes in {}", path.display()))?;
    Ok(Some(std::sync::Arc::new(recipes)))
}

/// The recall of approximate assignment when the vectors lie only at the nodes (from the rows
/// of the same sample, which `rows` fetches); `None` otherwise (measured here after the run).
fn remote_recall(
    args: &KmeansSettings,
    at: At<'_>,
    state: &State,
    rows: &mut kmeans::RowsOf<'_, anyhow::Error>,
) -> anyhow::Result<Option<Recall>> {
    let (At::Nodes(m), Some(approx)) = (at, args.assignment.approx(args.k)) else {
        return Ok(None);
    };
    kmeans::approx::recall_by(
        m.count as usize,
        &state.centroids,
        approx,
        RECALL_SAMPLE,
        args.seed,
        rows,
    )
    .map(Some)
}

/// Partitions made again from their photos, for the summary.
fn write_remade(out: &RefCell<&mut dyn Write>, remade: &[(u32, String)]) -> anyhow::Result<()> {
    if !remade.is_empty() {
        let list: Vec<String> = (remade.iter())
            .map(|(p, host)| {
                format!(
                    "{} on {host}",
                    vocab_pipeline::partition::part_file(*p as usize)
                )
            })
            .collect();
        writeln!(
            out.borrow_mut(),
            "kmeans: no node held {} partition{}; made again from their photos: {}",
            remade.len(),
            if remade.len() == 1 { "" } else { "s" },
            list.join(", ")
        )?;
    }
    Ok(())
}

/// Where a distributed run's partitions are.
#[derive(Clone, Copy)]
pub enum At<'a> {
    /// In a folder this process reads too (a shared filesystem): mapped here.
    Here(&'a PartitionSet),
    /// Only at the nodes (born there): the manifest here.
    Nodes(&'a Manifest),
}

impl At<'_> {
    pub fn manifest(&self) -> &Manifest {
        match self {
            Self::Here(set) => &set.manifest,
            Self::Nodes(m) => m,
        }
    }

    /// How the shares are dealt: blocks of a shared folder, or where the partitions are.
    fn deal(&self) -> Deal {
        match self {
            Self::Here(_) => Deal::Blocks,
            Self::Nodes(_) => Deal::Found,
        }
    }
}
