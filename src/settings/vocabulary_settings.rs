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
    /// A feature file or a partition folder.
    pub features: PathBuf,
    /// Vocabulary file.
    pub out: PathBuf,
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
    /// How vectors are assigned (`--prune`, `--kernel`).
    pub assignment: Assignment,
    /// Continue from the checkpoint beside `out`.
    pub resume: bool,
    /// Where it runs.
    pub engine: Backend,
    /// Broadcast algorithm of a distributed run.
    pub broadcast: Algorithm,
    /// Stage-1 (local) aggregation of a distributed run.
    pub local_aggregation: bool,
    /// Chain order of a distributed run.
    pub order: Order,
    /// Chunk size of the pipelined collectives under MPI.
    pub chunk_size: usize,
    /// Fault injection: exit after checkpointing this iteration.
    pub exit_after_iteration: Option<u64>,
    /// The partitions lie at the nodes (born there, `[partition] at = "nodes"`): `features`
    /// names their folder as the nodes see it (`{node}`, `{rank}` expanded by each), this the
    /// folder here with their manifest; shares are dealt where the partitions are and the first
    /// centroids read from the nodes.
    pub placed: Option<PathBuf>,
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

/// The engine of `--engine`, `--cluster` and `--local-nodes`.
pub fn engine_of(
    engine: Option<TransportKind>,
    cluster: Option<&Path>,
    local_nodes: Option<usize>,
) -> Result<Backend, Invalid> {
    Ok(match (engine, cluster, local_nodes) {
        (Some(TransportKind::Mpi), None, None) => Backend::Mpi,
        (Some(TransportKind::Mpi), _, _) => {
            return Err(Invalid::new(
                "engine",
                "mpi",
                "runs on the ranks of the MPI job; --cluster and --local-nodes are for \
                 --engine tcp",
            ));
        }
        (_, Some(cluster), _) => Backend::Tcp {
            cluster: Some(cluster.to_path_buf()),
            local_nodes: 0,
        },
        (_, None, Some(n)) => {
            within("local_nodes", n, (1, MAX_LOCAL_NODES), " worker")?;
            Backend::Tcp {
                cluster: None,
                local_nodes: n,
            }
        }
        (Some(TransportKind::Tcp), None, None) => Backend::Tcp {
            cluster: None,
            local_nodes: 1,
        },
        (None, None, None) => Backend::Local,
    })
}

/// The engine and the chunk size of a job's team flags (`--engine`, `--cluster`,
/// `--local-nodes`, `--racks`, `--chunk-size`).
pub fn team_of(args: &crate::cli::TeamArgs) -> Result<(Backend, usize), Invalid> {
    let engine = engine_of(args.engine, args.cluster.as_deref(), args.local_nodes)?;
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
    Ok((engine, chunk_size))
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
    /// The folder here of partitions that lie at the nodes (see [`KmeansSettings::placed`]).
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
        let (engine, chunk_size) = team_of(&args.team)?;
        let params = vocab_pipeline::mixture::Params {
            components: args.components,
            pca_dims: args.pca_dims,
            max_iter: args.iterations,
            tol: args.tol,
            seed: args.seed,
            reg: args.reg,
        };
        params.check()?;
        team_rules(&engine, args.team.order, &args.features, None)?;
        Ok(Self {
            params,
            team: TeamSettings {
                features: args.features.clone(),
                placed: None,
                out: args.out.clone(),
                engine,
                broadcast: args.team.broadcast,
                local_aggregation: !args.team.no_local_aggregation,
                order: args.team.order,
                chunk_size,
                assignment: Assignment::default(),
            },
        })
    }
}

impl KmeansSettings {
    /// Where the run goes, as starting its team needs it.
    pub fn team(&self) -> TeamSettings {
        TeamSettings {
            features: self.features.clone(),
            placed: self.placed.clone(),
            out: self.out.clone(),
            engine: self.engine.clone(),
            broadcast: self.broadcast,
            local_aggregation: self.local_aggregation,
            order: self.order,
            chunk_size: self.chunk_size,
            assignment: self.assignment,
        }
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
        let (engine, chunk_size) = team_of(&args.team)?;
        Self {
            features: args.features.clone(),
            out: args.out.clone(),
            format: super::rules::vectors_out("out", &args.out, args.format)?,
            k: args.k,
            iterations: args.iterations,
            tol: args.tol,
            seed: args.seed,
            init: args.init,
            init_centroids: args.init_centroids.clone(),
            assignment: assignment_of(
                args.prune,
                args.kernel,
                args.assign,
                args.lists,
                args.probes,
            )?,
            resume: args.resume,
            engine,
            broadcast: args.team.broadcast,
            local_aggregation: !args.team.no_local_aggregation,
            order: args.team.order,
            chunk_size,
            exit_after_iteration: args.exit_after_iteration,
            placed: None,
        }
        .checked()
    }

    /// Checks the rules across settings.
    pub fn checked(self) -> Result<Self, Invalid> {
        let init = self.init_centroids.is_none().then_some(self.init);
        kmeans_rules(self.k, (self.iterations, self.tol), init, self.assignment)?;
        team_rules(
            &self.engine,
            self.order,
            &self.features,
            self.placed.as_deref(),
        )?;
        Ok(self)
    }
}
