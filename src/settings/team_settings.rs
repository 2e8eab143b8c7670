//! Where a job over partitions runs ([`Backend`], read once by [`Backend::of`]) and how its
//! collectives go ([`TeamSettings`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use vocab_cluster::collective::Algorithm;
use vocab_cluster::collective::calibration::Order;
use vocab_cluster::net::transport::Kind as TransportKind;
use vocab_pipeline::kmeans::Assignment;

use super::rules::{Invalid, MAX_LOCAL_NODES, within};
use crate::options::KmeansOptions;

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
    /// `--chunk-size`, `--broadcast`, `--order`): a job over `features` writing `out` (the job's
    /// settings check [`team_rules`] after their own).
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
