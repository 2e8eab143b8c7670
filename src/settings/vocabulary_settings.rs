//! Settings of partition and k-means, and where k-means runs ([`Backend`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use vocab_cluster::collective::Algorithm;
use vocab_cluster::collective::calibration::Order;
use vocab_cluster::net::transport::Kind as TransportKind;
use vocab_pipeline::kmeans::InitMethod;
use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::kmeans::Search;
use vocab_pipeline::store::Element;

use vocab_pipeline::kmeans::{Assignment, Init, Params};
use vocab_pipeline::store::Format;

use crate::options::KmeansOptions;

use super::rules::{Invalid, Kind, MAX_LOCAL_NODES, apart, at_least, output, within};

/// Settings of the partition stage.
#[derive(Debug, Clone)]
pub struct PartitionSettings {
    /// Feature file to split.
    pub features: PathBuf,
    /// Folder of the partitions.
    pub out: PathBuf,
    /// Number of partitions.
    pub parts: usize,
    /// Value storage.
    pub element: Element,
}

impl PartitionSettings {
    /// Checks the settings (`parts = None`: 4 per core).
    pub fn new(
        features: &Path,
        out: &Path,
        parts: Option<usize>,
        element: Element,
    ) -> Result<Self, Invalid> {
        let parts = parts.unwrap_or_else(|| 4 * rayon::current_num_threads());
        at_least("parts", parts, 1, "")?;
        apart("out", out, Kind::Folder, &[("features", features)])?;
        Ok(Self {
            features: features.to_path_buf(),
            out: out.to_path_buf(),
            parts,
            element,
        })
    }
}

/// Settings of a k-means run.
#[derive(Debug, Clone)]
pub struct KmeansSettings {
    /// The partitions, where it runs and how its members assign their vectors; `team.out` is
    /// the vocabulary file.
    pub team: TeamSettings,
    /// Vocabulary format.
    pub format: Format,
    /// Number of centroids.
    pub k: usize,
    /// Iterations at most.
    pub iterations: u64,
    /// Relative inertia change that stops the run.
    pub tol: f64,
    /// Seed.
    pub seed: u64,
    /// Initialisation.
    pub init: InitMethod,
    /// Initial centroids instead of `init`.
    pub init_centroids: Option<PathBuf>,
    /// Continue from the checkpoint beside `team.out`.
    pub resume: bool,
    /// Fault injection: exit after checkpointing this iteration.
    pub exit_after_iteration: Option<u64>,
}

/// Where the distributed stages run (`--engine`, `--cluster`, `--local-nodes`, `[kmeans] nodes`): this process, TCP workers, MPI ranks.
#[derive(Debug, Clone, PartialEq)]
pub enum Backend {
    /// In this process.
    Local,
    /// On TCP workers: those of a cluster file, or N loopback workers started for the run.
    Tcp {
        /// The cluster file (`None`: loopback workers).
        cluster: Option<PathBuf>,
        /// Loopback workers to start when there is no cluster file.
        local_nodes: usize,
    },
    /// On the ranks of the MPI job this process is rank 0 of (its rack map read when the job
    /// started).
    Mpi,
}

impl Backend {
    /// Distributed: the vectors are mapped by other processes.
    pub fn distributed(&self) -> bool {
        !matches!(self, Self::Local)
    }

    /// Loopback workers this engine starts (at least 1 without a cluster file; 0 otherwise).
    pub fn local_nodes(&self) -> usize {
        match self {
            Self::Tcp {
                cluster: None,
                local_nodes,
            } => (*local_nodes).max(1),
            _ => 0,
        }
    }

    /// Processes of the run that share this machine's memory (one process, or its loopback
    /// workers); none when the nodes are other machines, whose memory is not known here.
    pub fn nodes_here(&self) -> Option<u64> {
        match self {
            Self::Local => Some(1),
            Self::Tcp { cluster: None, .. } => Some(self.local_nodes().max(1) as u64),
            Self::Tcp { .. } | Self::Mpi => None,
        }
    }

    /// The MPI ranks.
    pub fn is_mpi(&self) -> bool {
        matches!(self, Self::Mpi)
    }

    /// The cluster file of TCP workers (none for loopback workers).
    pub fn cluster_file(&self) -> Option<&Path> {
        match self {
            Self::Tcp {
                cluster: Some(path),
                ..
            } => Some(path),
            _ => None,
        }
    }

    /// The file measured links are kept beside (`--order auto`): the cluster file, or under
    /// MPI the vocabulary `out`; none for loopback workers and one process.
    pub fn links_beside<'p>(&'p self, out: &'p Path) -> Option<&'p Path> {
        match self {
            Self::Mpi => Some(out),
            _ => self.cluster_file(),
        }
    }

    /// Where k-means runs, for the plan and the memory checks: nodes, racks, whether they
    /// share this machine, a description (a cluster file is read for its nodes and racks).
    pub fn nodes(&self) -> anyhow::Result<NodeCount> {
        Ok(match self {
            Self::Local => NodeCount {
                nodes: 1,
                racks: 1,
                here: true,
                name: "one process".into(),
            },
            Self::Tcp {
                cluster: Some(path),
                ..
            } => {
                let c = vocab_cluster::net::config::Cluster::load(path)
                    .with_context(|| format!("planning with {}", path.display()))?;
                let mut racks: Vec<&str> = c.nodes.iter().map(|n| n.rack.as_str()).collect();
                racks.sort_unstable();
                racks.dedup();
                NodeCount {
                    nodes: c.nodes.len() as u64,
                    racks: racks.len(),
                    here: false,
                    name: format!("cluster {}", path.display()),
                }
            }
            Self::Tcp { local_nodes, .. } => NodeCount {
                nodes: *local_nodes as u64,
                racks: 1,
                here: true,
                name: format!("{local_nodes} loopback workers"),
            },
            Self::Mpi => NodeCount {
                nodes: 1,
                racks: 1,
                here: false,
                name: "the MPI ranks".into(),
            },
        })
    }
}

/// Where k-means runs ([`Backend::nodes`]): nodes, racks and a description.
#[derive(Debug, Clone)]
pub struct NodeCount {
    /// Nodes that map (1 for MPI ranks, whose number is known only under mpirun).
    pub nodes: u64,
    /// Racks.
    pub racks: usize,
    /// Whether every node is on this machine (its memory is what they share).
    pub here: bool,
    /// For people: `one process`, `3 loopback workers`, `cluster FILE`, `the MPI ranks`.
    pub name: String,
}

/// The rules of a k-means run of `k` words that settings can break before anything runs, by
/// [`Params::check`] (`init`: the method, when the first centroids are not given).
pub fn kmeans_rules(
    k: usize,
    (iterations, tol): (u64, f64),
    init: Option<InitMethod>,
    assignment: Assignment,
) -> Result<(), Invalid> {
    let params = Params {
        k,
        max_iter: iterations,
        tol,
        seed: 0,
        init: match init {
            Some(InitMethod::PlusPlus) => Init::PlusPlus { sample: None },
            // Given centroids are checked when they are read.
            Some(InitMethod::Random) | None => Init::Random,
        },
        threads: 0,
        assignment,
    };
    Ok(params.check()?)
}

/// The assignment of `--assign` / `--lists` / `--probes` with `--prune` / `--kernel` (and the
/// same config keys): the approximate search has its own kernel and no pruning.
pub fn assignment_of(
    prune: bool,
    kernel: Kernel,
    assign: Search,
    lists: Option<u32>,
    probes: u32,
) -> Result<Assignment, Invalid> {
    match assign {
        Search::Exact => {
            if let Some(l) = lists {
                return Err(Invalid::new(
                    "lists",
                    l,
                    "sets up the approximate search: add assign approx",
                ));
            }
            Ok(Assignment::new(prune, kernel))
        }
        Search::Approx => {
            if prune {
                return Err(Invalid::new(
                    "prune",
                    true,
                    "bounds the exact search; the approximate one searches its probed lists \
                     (drop one of them)",
                ));
            }
            if kernel != Kernel::F32 {
                return Err(Invalid::new(
                    "kernel",
                    "int8",
                    "is a kernel of the exact search; the approximate one uses f32",
                ));
            }
            at_least("probes", probes as usize, 1, " list")?;
            if let Some(l) = lists {
                at_least("lists", l as usize, 1, " list")?;
            }
            Ok(Assignment::Approx {
                lists: lists.unwrap_or(0),
                probes,
            })
        }
    }
}

impl Backend {
    /// The one reading of where a job runs: `--engine` (or `vocab run --engine`), a cluster
    /// file (`--cluster`, `[kmeans] cluster`) and loopback workers (`--local-nodes`,
    /// `[kmeans] nodes`): MPI ranks, TCP workers, or this process.
    pub fn of(
        engine: Option<TransportKind>,
        cluster: Option<&Path>,
        local_nodes: Option<usize>,
    ) -> Result<Self, Invalid> {
        Ok(match (engine, cluster, local_nodes) {
            (Some(TransportKind::Mpi), None, None) => Self::Mpi,
            (Some(TransportKind::Mpi), _, _) => {
                return Err(Invalid::new(
                    "engine",
                    "mpi",
                    "runs on the ranks of the MPI job; --cluster ([kmeans] cluster) and \
                     --local-nodes are for --engine tcp",
                ));
            }
            (_, Some(cluster), _) => Self::Tcp {
                cluster: Some(cluster.to_path_buf()),
                local_nodes: 0,
            },
            (_, None, Some(n)) => {
                within("local_nodes", n, (1, MAX_LOCAL_NODES), " worker")?;
                Self::Tcp {
                    cluster: None,
                    local_nodes: n,
                }
            }
            (Some(TransportKind::Tcp), None, None) => Self::Tcp {
                cluster: None,
                local_nodes: 1,
            },
            (None, None, None) => Self::Local,
        })
    }
}

/// The rules of where a job over `features` runs: a measured chain order only on a
/// distributed engine, which needs a partition folder (`placed`: the folder here of
/// partitions at the nodes).
pub fn team_rules(
    engine: &Backend,
    order: Order,
    features: &Path,
    placed: Option<&Path>,
) -> Result<(), Invalid> {
    let distributed = engine.distributed();
    if !distributed && order == Order::Auto {
        return Err(Invalid::new(
            "order",
            "auto",
            "orders the chain of a distributed run; add --local-nodes, --cluster or \
             --engine mpi",
        ));
    }
    // Partitions at the nodes: the folder there need not exist here (its manifest does).
    let here = placed.unwrap_or(features);
    if distributed && !here.is_dir() {
        return Err(Invalid::new(
            "features",
            features.display(),
            "a distributed run needs a partition folder (make one with vocab partition)",
        ));
    }
    Ok(())
}

/// Where a job over partitions runs and how its collectives go: what starting a team needs
/// (k-means' and the mixture's).
#[derive(Debug, Clone)]
pub struct TeamSettings {
    /// A feature file or a partition folder.
    pub features: PathBuf,
    /// The partitions lie at the nodes (born there, `[partition] at = "nodes"`): `features`
    /// names their folder as the nodes see it (`{node}`, `{rank}` expanded by each), this the
    /// folder here with their manifest; shares are dealt where the partitions are and the first
    /// centroids read from the nodes.
    pub placed: Option<PathBuf>,
    /// The job's output: worker logs and measured links go beside it.
    pub out: PathBuf,
    /// Where it runs.
    pub engine: Backend,
    /// Broadcast algorithm.
    pub broadcast: Algorithm,
    /// Stage-1 (local) aggregation.
    pub local_aggregation: bool,
    /// Chain order.
    pub order: Order,
    /// Chunk size of the pipelined collectives under MPI.
    pub chunk_size: usize,
    /// How k-means' members assign their vectors (the default for the mixture's).
    pub assignment: Assignment,
}

/// Chunk size of the pipelined collectives unless told (`--chunk-size`).
pub const DEFAULT_CHUNK: usize = 1 << 20;

impl TeamSettings {
    /// From a job's team flags (`--engine`, `--cluster`, `--local-nodes`, `--racks`,
    /// `--chunk-size`, `--broadcast`, `--order`): a job over `features` writing `out`.
    pub fn of(
        args: &crate::cli::TeamArgs,
        features: &Path,
        out: &Path,
        assignment: Assignment,
    ) -> Result<Self, Invalid> {
        let engine = Backend::of(args.engine, args.cluster.as_deref(), args.local_nodes)?;
        if args.racks.is_some() && engine != Backend::Mpi {
            return Err(Invalid::new(
                "racks",
                args.racks.as_deref().unwrap_or(Path::new("")).display(),
                "a rack map for --engine mpi (a cluster file names its racks)",
            ));
        }
        let chunk_size = usize::try_from(args.chunk_size)
            .ok()
            .filter(|&c| c >= 8)
            .ok_or_else(|| Invalid::new("chunk_size", args.chunk_size, "at least 8 bytes"))?;
        team_rules(&engine, args.order, features, None)?;
        Ok(Self {
            features: features.to_path_buf(),
            placed: None,
            out: out.to_path_buf(),
            engine,
            broadcast: args.broadcast,
            local_aggregation: !args.no_local_aggregation,
            order: args.order,
            chunk_size,
            assignment,
        })
    }

    /// From a config's `[kmeans]` on `engine` (the run's, [`Backend::of`] its keys): a job over
    /// the partitions `features` (`placed`: the folder here of partitions at the nodes)
    /// writing `out`.
    pub fn of_config(
        options: &KmeansOptions,
        engine: &Backend,
        (features, placed): (&Path, Option<&Path>),
        out: &Path,
        assignment: Assignment,
    ) -> Self {
        Self {
            features: features.to_path_buf(),
            placed: placed.map(Path::to_path_buf),
            out: out.to_path_buf(),
            engine: engine.clone(),
            broadcast: options.broadcast,
            local_aggregation: options.local_aggregation,
            order: options.order,
            chunk_size: DEFAULT_CHUNK,
            assignment,
        }
    }
}

/// Settings of a mixture run (`vocab mixture`).
#[derive(Debug, Clone)]
pub struct MixtureSettings {
    /// What is learned.
    pub params: vocab_pipeline::mixture::Params,
    /// Where it runs; `team.out` is the mixture file.
    pub team: TeamSettings,
}

impl MixtureSettings {
    /// From `vocab mixture`.
    pub fn from_args(args: &crate::cli::MixtureArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        apart(
            "out",
            &args.out,
            Kind::File,
            &[("features", args.features.as_path())],
        )?;
        let team = TeamSettings::of(&args.team, &args.features, &args.out, Assignment::default())?;
        let params = args.options.params(args.components);
        params.check()?;
        Ok(Self { params, team })
    }
}

impl KmeansSettings {
    /// `k` words by `options` (its learning keys: where it runs is `team`'s), over
    /// `team.features` into `team.out`; checked.
    pub fn new(
        k: usize,
        options: &KmeansOptions,
        team: TeamSettings,
        format: Format,
    ) -> Result<Self, Invalid> {
        Self {
            team,
            format,
            k,
            iterations: options.iterations,
            tol: options.tol,
            seed: options.seed,
            init: options.init,
            init_centroids: None,
            resume: false,
            exit_after_iteration: None,
        }
        .checked()
    }

    /// From `vocab kmeans`.
    pub fn from_args(args: &crate::cli::KmeansArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        let mut inputs = vec![("features", args.features.as_path())];
        inputs.extend(
            args.init_centroids
                .as_deref()
                .map(|c| ("init_centroids", c)),
        );
        apart("out", &args.out, Kind::File, &inputs)?;
        let assignment = args.options.assignment()?;
        let team = TeamSettings::of(&args.team, &args.features, &args.out, assignment)?;
        let format = super::rules::vectors_out("out", &args.out, args.format)?;
        Self {
            init_centroids: args.init_centroids.clone(),
            resume: args.resume,
            exit_after_iteration: args.exit_after_iteration,
            ..Self::new(args.k, &args.options, team, format)?
        }
        .checked()
    }

    /// Checks the rules across settings.
    pub fn checked(self) -> Result<Self, Invalid> {
        let init = self.init_centroids.is_none().then_some(self.init);
        let t = &self.team;
        kmeans_rules(self.k, (self.iterations, self.tol), init, t.assignment)?;
        team_rules(&t.engine, t.order, &t.features, t.placed.as_deref())?;
        Ok(self)
    }
}

impl KmeansOptions {
    /// The assignment `prune`, `kernel`, `assign`, `lists` and `probes` choose.
    pub fn assignment(&self) -> Result<Assignment, Invalid> {
        assignment_of(
            self.prune,
            self.kernel,
            self.assign,
            self.lists,
            self.probes,
        )
    }
}
