//! k-means on a team: [`start`] starts the library's `jobs::kmeans::Team` on the nodes
//! `crate::nodes::start` gives (the MPI ranks of this job, or TCP workers: a cluster file's, or
//! loopback workers started for the run) with the options `vocab kmeans` sets; [`fit`] runs the
//! one k-means loop (`kmeans::engine::fit_with`) on it, with the lines, links and recall every
//! team reports alike.

use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use vocab_cluster::collective::BroadcastPlan;
use vocab_cluster::jobs::born::{RECIPES, Recipes};
use vocab_cluster::jobs::kmeans::{self as kmeans_job, Deal, Options};
use vocab_pipeline::kmeans::approx::Recall;
use vocab_pipeline::kmeans::engine::{Engine, StepReport};
use vocab_pipeline::kmeans::{self, KMeansError, Params, State};
use vocab_pipeline::partition::{Manifest, PartitionSet, Rows};

use crate::links::{auto_order, links_file, read_links, save_links};
use crate::nodes::Place;
use crate::ranks::Mpi;
use crate::settings::{KmeansSettings, TeamSettings};

/// Vectors on which an approximate run's assignment is compared with the exact one.
pub const RECALL_SAMPLE: usize = 1000;

/// A k-means job started on its nodes, as `vocab kmeans` drives it: the library's team (the
/// k-means [`Engine`]) and what is said of its nodes (loopback workers started for the run stop
/// when it ends: after the team lets them go, fields drop in order).
pub struct Team<'a> {
    /// The library's team.
    pub job: kmeans_job::Team<'a>,
    _place: Place,
}

/// Starts the k-means job of `args` on its nodes: the MPI ranks (`mpi`: this process is rank
/// 0, which maps too), or the TCP workers of `args.engine` (loopback workers started now, their
/// logs beside the vocabulary), each member caching its share of the partitions `at`.
pub fn start<'a>(
    args: &TeamSettings,
    at: At<'_>,
    mpi: Option<&'a Mpi<'a>>,
    (name, broadcast_bytes): (&str, f64),
    out: &RefCell<&mut dyn Write>,
) -> anyhow::Result<Team<'a>> {
    let dir = members_dir(args)?.display().to_string();
    let (auto, known) = (
        auto_order(args, broadcast_bytes),
        links_file(args).and_then(|p| read_links(&p)),
    );
    let logs = vocab_pipeline::features::manifest_path(&args.out, "workers");
    let clock = Instant::now();
    let started = crate::nodes::start(&args.engine, mpi, &logs)?;
    let up = clock.elapsed().as_secs_f64();
    if let Some((n, logs)) = &started.place.loopback {
        writeln!(
            out.borrow_mut(),
            "{name}: {n} loopback workers, logs in {}",
            logs.display()
        )?;
    }
    let options = Options {
        dir,
        plan: BroadcastPlan {
            algorithm: args.broadcast,
            chunk: args.chunk_size,
            chains: 2,
        },
        stage1: args.local_aggregation,
        assignment: args.assignment,
        racks: started.racks,
        // Rank 0 is a compute rank like the others (the TCP driver only drives).
        root_maps: true,
        auto,
        known,
        deal: at.deal(),
        remake: remake_of(args)?,
    };
    let place = started.place;
    let job = kmeans_job::Team::start(started.nodes, options, at.manifest().clone())
        .with_context(|| format!("starting {name} on {}", place.whence))?;
    writeln!(
        out.borrow_mut(),
        "{name}: team formed in {:.2} s (nodes up in {up:.2} s, then joined and partitions opened)",
        clock.elapsed().as_secs_f64()
    )?;
    Ok(Team { job, _place: place })
}

/// Runs the k-means of `params` from `start` (or from first centroids sampled at `at`) on
/// `team`; returns the state and, when the vectors lie only at the members, the recall of
/// approximate assignment measured from rows they send.
pub fn fit(
    team: &mut Team<'_>,
    args: &KmeansSettings,
    at: At<'_>,
    params: &Params,
    start: Option<State>,
    out: &RefCell<&mut dyn Write>,
    on_state: &mut dyn FnMut(&State, Option<&StepReport>) -> anyhow::Result<()>,
) -> anyhow::Result<(State, Option<Recall>)> {
    let team = &mut team.job;
    let whence = team.whence();
    let state = first_state(at, params, start, &mut |indices| {
        (team.rows(indices)).with_context(|| format!("reading the first centroids from {whence}"))
    })?;
    if let Some((c, names, _)) = team.calibration() {
        writeln!(out.borrow_mut(), "{}", c.describe(&names))?;
    }
    writeln!(
        out.borrow_mut(),
        "kmeans: on {}, broadcast {}, local aggregation {}",
        team.describe(),
        args.team.broadcast.name(),
        if args.team.local_aggregation {
            "on"
        } else {
            "off"
        },
    )?;
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
    keep_links(team, &args.team);
    done
}

/// Saves the links a team measured where the next run finds them (`--order auto`).
pub fn keep_links(team: &kmeans_job::Team<'_>, args: &TeamSettings) {
    if let (Some((c, _, labels)), Some(path)) = (team.calibration(), links_file(args)) {
        save_links(&path, c, &labels);
    }
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
            let vectors = set.vectors();
            let n: usize = vectors.iter().map(Rows::rows).sum();
            if params.k > n {
                return Err(KMeansError::TooFewVectors { k: params.k, n }.into());
            }
            kmeans::initial_centroids(&vectors, params.k, &params.init, params.seed)?
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
fn members_dir(args: &TeamSettings) -> anyhow::Result<PathBuf> {
    if args.placed.is_some() {
        return Ok(args.features.clone());
    }
    std::fs::canonicalize(&args.features)
        .with_context(|| format!("cannot resolve {}", args.features.display()))
}

/// The recipes beside the manifest of partitions born on the nodes (`vocab run` writes them),
/// so that partitions no node holds any more are made again from their photos.
fn remake_of(args: &TeamSettings) -> anyhow::Result<Option<std::sync::Arc<Recipes>>> {
    let Some(here) = &args.placed else {
        return Ok(None);
    };
    let path = here.join(RECIPES);
    if !path.is_file() {
        return Ok(None);
    }
    let text = vocab_pipeline::input::read_text(&path, vocab_pipeline::input::MAX_RECORD_BYTES)
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
    let (At::Nodes(m), Some((lists, probes))) = (at, args.team.assignment.approx(args.k)) else {
        return Ok(None);
    };
    kmeans::approx::recall_by(
        m.count as usize,
        &state.centroids,
        (lists, probes, args.team.assignment.kernel()),
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
