//! `[kmeans]` and `vocab kmeans`: how a vocabulary is learned, and (a config's keys) where.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use vocab_cluster::collective::Algorithm;
use vocab_cluster::collective::calibration::Order;
use vocab_pipeline::kmeans::{InitMethod, Kernel, Params, Search};

use super::{DEFAULT_PROBES, is_default, is_default_probes};

/// How k-means runs: `vocab kmeans`'s options and a config's `[kmeans]`, the same type. The
/// config's sizes and nodes are its own keys (`vocab kmeans` takes `--k` and its team flags).
#[derive(Debug, Clone, PartialEq, clap::Args, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct KmeansOptions {
    /// Vocabulary sizes, one vocabulary each (a config's; none for a run of Fisher vectors,
    /// which learns mixtures).
    #[arg(skip = KmeansOptions::default().k)]
    pub k: Vec<usize>,
    /// Iterations at most.
    #[arg(long, value_name = "N", default_value_t = KmeansOptions::default().iterations)]
    pub iterations: u64,
    /// Stop when the relative change of inertia falls below this.
    #[arg(long, value_name = "TOL", default_value_t = KmeansOptions::default().tol)]
    pub tol: f64,
    /// Seed of initialisation and empty-cluster splits.
    #[arg(long, value_name = "S", default_value_t = KmeansOptions::default().seed,
          value_parser = crate::options::parse_seed)]
    pub seed: u64,
    /// Initialisation.
    #[arg(long, value_enum, default_value_t = KmeansOptions::default().init)]
    pub init: InitMethod,
    /// Loopback workers started for a run when no cluster file is given (a config's; 0: the
    /// single-process engine, no runtime; `vocab kmeans` takes `--local-nodes`).
    #[arg(skip = KmeansOptions::default().nodes)]
    pub nodes: usize,
    /// Broadcast algorithm of the centroids (a config's; `vocab kmeans --broadcast`).
    #[arg(skip = KmeansOptions::default().broadcast)]
    pub broadcast: Algorithm,
    /// Stage-1 (local) aggregation (a config's; `vocab kmeans --no-local-aggregation`).
    #[arg(skip = KmeansOptions::default().local_aggregation)]
    pub local_aggregation: bool,
    /// Cluster file, relative to the config, to run on instead of loopback workers (a
    /// config's; `vocab kmeans --cluster`).
    #[arg(skip = KmeansOptions::default().cluster)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<PathBuf>,
    /// Prune the assignment with Yinyang bounds (centroids in groups, a lower bound per group):
    /// the nearest centroid still, up to float ties, with far fewer distance computations once
    /// centroids settle, on any engine (the bounds stay at the workers). Keeps 4 bytes of bounds
    /// per group per vector: min(k/10, 1024) groups with f32, k/16 up to 512 with int8.
    /// [default: true with --kernel int8 (as fast or faster over a run, the same labels as its
    /// full pass), false with f32]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prune: Option<bool>,
    /// Kernel of the full assignment passes (also on cluster workers; with --prune, of the full
    /// passes pruning still makes: the first iteration and searches too wide to pay off), or
    /// with --assign approx of the search of the probed lists (int8: the rows of many map units
    /// searched together, list by list, each given the nearest member of its lists exactly).
    #[arg(long, value_enum, default_value_t = KmeansOptions::default().kernel)]
    #[serde(skip_serializing_if = "is_default")]
    pub kernel: Kernel,
    /// Exact or approximate assignment (approx: for vocabularies of hundreds of thousands to
    /// millions of words, minutes per iteration instead of hours).
    #[arg(long, value_enum, default_value_t = KmeansOptions::default().assign)]
    #[serde(skip_serializing_if = "is_default")]
    pub assign: Search,
    /// Lists of the approximate search's index [default: sqrt(k)].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lists: Option<u32>,
    /// Lists the approximate search visits per vector: more finds the nearest more often and
    /// costs more.
    #[arg(long, value_name = "N", default_value_t = KmeansOptions::default().probes)]
    #[serde(skip_serializing_if = "is_default_probes")]
    pub probes: u32,
    /// Rack of each host for `--engine mpi` (a config's `[kmeans.racks]`, `"host" = "rack"`
    /// lines; the `--racks` file overrides it): the chain keeps a rack's ranks together. Hosts
    /// not listed are racks of their own.
    #[arg(skip = KmeansOptions::default().racks)]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub racks: BTreeMap<String, String>,
    /// Chain order on a distributed engine (a config's; `vocab kmeans --order`): `racks` or
    /// `auto` (measured links).
    #[arg(skip = KmeansOptions::default().order)]
    #[serde(skip_serializing_if = "is_default")]
    pub order: Order,
}

impl Default for KmeansOptions {
    fn default() -> Self {
        let params = Params::default();
        Self {
            k: Vec::new(),
            iterations: params.max_iter,
            tol: params.tol,
            seed: params.seed,
            init: InitMethod::default(),
            nodes: 2,
            broadcast: Algorithm::default(),
            local_aggregation: true,
            cluster: None,
            prune: None,
            kernel: Kernel::default(),
            assign: Search::default(),
            lists: None,
            probes: DEFAULT_PROBES,
            racks: BTreeMap::new(),
            order: Order::default(),
        }
    }
}
