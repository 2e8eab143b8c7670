//! Experiment configs (`configs/*.toml`): every stage's settings in one file, validated up front.
//!
//! Unknown keys and values of the wrong type are errors from the TOML parser, which names the key
//! and the line; rules the types cannot express (k of 0, a dataset with both a path and a
//! generator, ...) are checked here and name the key and its line too. `vocab config show`
//! prints the resolved file with every default filled in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::options::EncodeOptions;
use crate::settings::{self, FeaturesConfig, Invalid};
use vocab_cluster::collective::Algorithm;
use vocab_cluster::collective::calibration::Order;
use vocab_pipeline::encode::Norm;
use vocab_pipeline::kernel_map::Mapping;
use vocab_pipeline::kmeans::InitMethod;
use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::kmeans::Search;
use vocab_pipeline::store::Element;
use vocab_pipeline::svm::Solver;

/// A whole config file, with defaults filled in.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the photos come from.
    pub dataset: DatasetConfig,
    /// The vocabulary's patch sample (random patches of the training photos).
    #[serde(default)]
    pub features: FeaturesConfig,
    /// Partitions of the sample for map tasks.
    #[serde(default)]
    pub partition: PartitionConfig,
    /// Vocabularies built from the partitions.
    pub kmeans: KmeansConfig,
    /// Mixtures for Fisher vectors (`[encode] method = "fisher"`), learned from the partitions
    /// instead of vocabularies.
    #[serde(default, skip_serializing_if = "MixtureConfig::is_unused")]
    pub mixture: MixtureConfig,
    /// Dense encoding of every photo over each vocabulary.
    #[serde(default)]
    pub encode: EncodeOptions,
    /// Split, SVMs and evaluation per attribute.
    #[serde(default)]
    pub classify: ClassifyConfig,
    /// Assumptions for `vocab run --plan` where the data is not at hand.
    #[serde(default)]
    pub plan: PlanConfig,
}

/// `[dataset]`: a folder of photos, or the generated synthetic set.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// Photo folder, relative to the config file (or given with `vocab run --dataset`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// Labels CSV, relative to the config file [default: `labels.csv` in the photo folder].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<PathBuf>,
    /// Generate the synthetic set into the work directory instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<SyntheticConfig>,
    /// A test folder, relative to the config (or `vocab run --test`): the vocabulary and the
    /// models learn from every photo of the dataset, and every labelled photo here is scored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<PathBuf>,
    /// The test folder's labels CSV, relative to the config [default: `labels.csv` in it].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_labels: Option<PathBuf>,
}

/// `[dataset.synthetic]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticConfig {
    /// Photos per scene kind.
    #[serde(default = "default_per_kind")]
    pub per_kind: usize,
    /// Generator seed.
    #[serde(default = "default_synth_seed")]
    pub seed: u64,
}

fn default_per_kind() -> usize {
    10
}

fn default_synth_seed() -> u64 {
    7
}

/// `[partition]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionConfig {
    /// Number of partitions.
    pub parts: usize,
    /// Value storage: f32 or u8.
    pub element: Element,
    /// Where partitions are made when k-means runs on nodes: on the nodes from the patches they
    /// described (the default), or at the driver from the gathered sample (a folder every node
    /// reads at the same path).
    #[serde(skip_serializing_if = "PartitionAt::is_nodes")]
    pub at: PartitionAt,
    /// With `at = "nodes"`: the folder, as every node sees it, under which nodes keep their
    /// partitions (default: `nodes/` in the work directory); `{node}` in it stands for the
    /// node's name (its name in the cluster file, its host under MPI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<PathBuf>,
}

/// Where a run's partitions are made (`[partition] at`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PartitionAt {
    /// The driver gathers the sample and splits it (the partitions in its work directory).
    Driver,
    /// Each node keeps the patches it described and the nodes cut them into partitions where
    /// they are mapped; the sample never gathers at the driver (`vocab_cluster::jobs::born`).
    #[default]
    Nodes,
}

impl PartitionAt {
    fn is_nodes(&self) -> bool {
        *self == Self::Nodes
    }
}

impl Default for PartitionConfig {
    fn default() -> Self {
        Self {
            parts: 8,
            element: Element::F32,
            at: PartitionAt::Nodes,
            folder: None,
        }
    }
}

/// `[kmeans]`: one vocabulary per entry of `k`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KmeansConfig {
    /// Vocabulary sizes (none for a run of Fisher vectors, which learns mixtures).
    #[serde(default)]
    pub k: Vec<usize>,
    /// Iterations at most.
    #[serde(default = "default_iterations")]
    pub iterations: u64,
    /// Relative inertia change that stops a run.
    #[serde(default = "default_tol")]
    pub tol: f64,
    /// Seed.
    #[serde(default)]
    pub seed: u64,
    /// Initialisation.
    #[serde(default = "default_init")]
    pub init: InitMethod,
    /// Loopback workers started for the run when no cluster file is given (0: the single-process
    /// engine, no runtime).
    #[serde(default = "default_nodes")]
    pub nodes: usize,
    /// Broadcast algorithm of the centroids.
    #[serde(default = "default_broadcast")]
    pub broadcast: Algorithm,
    /// Stage-1 (local) aggregation.
    #[serde(default = "default_true")]
    pub local_aggregation: bool,
    /// Cluster file (relative to the config) to run on instead of loopback workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<PathBuf>,
    /// Yinyang-pruned assignment (`vocab kmeans --prune`), on any engine (the bounds stay at
    /// the workers).
    #[serde(default, skip_serializing_if = "is_default")]
    pub prune: bool,
    /// Kernel of the full assignment passes (`vocab kmeans --kernel`), pruned or not.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kernel: Kernel,
    /// Exact or approximate assignment (`vocab kmeans --assign`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub assign: Search,
    /// Lists of the approximate search's index (`--lists`; default sqrt(k)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lists: Option<u32>,
    /// Lists the approximate search visits per vector (`--probes`).
    #[serde(
        default = "default_probes",
        skip_serializing_if = "crate::options::is_default_probes"
    )]
    pub probes: u32,
    /// Rack of each host for `--engine mpi` (`[kmeans.racks]`, `"host" = "rack"` lines; the
    /// `--racks` file overrides it): the chain keeps a rack's ranks together. Hosts not
    /// listed are racks of their own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub racks: BTreeMap<String, String>,
    /// Chain order on a distributed engine (`vocab kmeans --order`): `racks` or `auto`
    /// (measured links).
    #[serde(default, skip_serializing_if = "is_default")]
    pub order: Order,
}

/// `[mixture]`: the Gaussian mixtures of Fisher vectors (`[encode] method = "fisher"`), each
/// learned from the partitions by `vocab mixture`'s PCA and EM on the run's engine (`[kmeans]`
/// says where: `nodes`, `cluster`, `broadcast`, `order`), one encoding per size.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MixtureConfig {
    /// Gaussians of each mixture.
    #[serde(default = "default_components")]
    pub components: Vec<usize>,
    /// Principal components the patches are projected onto.
    #[serde(default = "default_pca_dims")]
    pub pca_dims: usize,
    /// EM steps at most.
    #[serde(default = "default_em_iterations")]
    pub iterations: usize,
    /// Smallest move of the mean log-likelihood that goes on.
    #[serde(default = "default_em_tol")]
    pub tol: f64,
    /// Seed of the first means.
    #[serde(default = "default_em_seed")]
    pub seed: u64,
    /// Added to every variance.
    #[serde(default = "default_reg")]
    pub reg: f64,
}

impl Default for MixtureConfig {
    fn default() -> Self {
        Self {
            components: default_components(),
            pca_dims: default_pca_dims(),
            iterations: default_em_iterations(),
            tol: default_em_tol(),
            seed: default_em_seed(),
            reg: default_reg(),
        }
    }
}

impl MixtureConfig {
    /// Whether it is the default (left out of `config show` unless a run uses it).
    fn is_unused(&self) -> bool {
        *self == Self::default()
    }

    /// How the mixture of `components` Gaussians is learned.
    pub fn params(&self, components: usize) -> vocab_pipeline::mixture::Params {
        vocab_pipeline::mixture::Params {
            components,
            pca_dims: self.pca_dims,
            max_iter: self.iterations,
            tol: self.tol,
            seed: self.seed,
            reg: self.reg,
        }
    }
}

fn default_components() -> Vec<usize> {
    vec![64]
}

fn default_pca_dims() -> usize {
    64
}

fn default_em_iterations() -> usize {
    100
}

fn default_em_tol() -> f64 {
    1e-3
}

fn default_em_seed() -> u64 {
    1
}

fn default_reg() -> f64 {
    1e-6
}

impl Config {
    /// Whether the run encodes Fisher vectors (over mixtures) rather than over vocabularies.
    pub fn fisher(&self) -> bool {
        self.encode.method == vocab_pipeline::encode::Pooling::Fisher
    }

    /// The sizes the run learns a dictionary of: the mixtures' Gaussians for Fisher vectors,
    /// else the vocabularies' words.
    pub fn sizes(&self) -> &[usize] {
        if self.fisher() {
            &self.mixture.components
        } else {
            &self.kmeans.k
        }
    }

    /// The encoding's checked parameters (Fisher vectors: over the mixtures' projected dims).
    pub fn encode_params(&self) -> Result<vocab_pipeline::encode::EncodeParams, Invalid> {
        let projected = self.fisher().then_some(self.mixture.pca_dims);
        self.encode.params_for(projected)
    }
}

impl KmeansConfig {
    /// The assignment `prune`, `kernel`, `assign`, `lists` and `probes` choose.
    pub fn assignment(&self) -> Result<vocab_pipeline::kmeans::Assignment, settings::Invalid> {
        settings::assignment_of(
            self.prune,
            self.kernel,
            self.assign,
            self.lists,
            self.probes,
        )
    }
}

fn default_probes() -> u32 {
    crate::options::DEFAULT_PROBES
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn default_iterations() -> u64 {
    20
}

fn default_tol() -> f64 {
    1e-4
}

fn default_init() -> InitMethod {
    InitMethod::Random
}

fn default_nodes() -> usize {
    2
}

fn default_broadcast() -> Algorithm {
    Algorithm::Chain
}

fn default_true() -> bool {
    true
}

/// `[classify]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// Attributes (label columns) to learn [default: every column but `path`].
    pub attributes: Vec<String>,
    /// Column the split is stratified by [default: the first attribute].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_by: Option<String>,
    /// Seed of the split (and of the CV folds); trial t (from 1) splits with seed + t - 1.
    pub split_seed: u64,
    /// Training photos of each `split_by` value, the rest held out [default: half of each
    /// value trains]. The field's protocol for 15 scenes: 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_per_class: Option<usize>,
    /// Random splits, each learning its own vocabularies and models from its own training
    /// photos; the report gives the mean and standard deviation over them.
    pub trials: usize,
    /// Folds of the cross-validation that chooses C on the training half.
    pub cv: usize,
    /// SVM solver: dcd or linfa.
    pub solver: Solver,
    /// Explicit kernel map before the linear SVM: none, chi2, intersection or js (for L1
    /// histograms: `[encode] norm = "l1"`).
    pub kernel_map: Mapping,
    /// Frequencies of the kernel map after the first (2 N + 1 values per bin).
    pub map_order: usize,
    /// Train on each training photo's mirror image too (left to right): the run encodes the
    /// training photos mirrored as well, and each mirror image trains in its photo's
    /// cross-validation fold (`vocab train --mirrored`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mirror: bool,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        Self {
            attributes: Vec::new(),
            split_by: None,
            split_seed: 1,
            train_per_class: None,
            trials: 1,
            cv: 5,
            solver: Solver::Dcd,
            kernel_map: Mapping::None,
            map_order: 3,
            mirror: false,
        }
    }
}

/// `[plan]`: what `vocab run --plan` assumes where it cannot look.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlanConfig {
    /// Photos in the collection, when the folder is not readable here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub photos: Option<u64>,
    /// Values of `split_by` (classes) among them, for `train_per_class` without the labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<u64>,
    /// Map tasks per node (default: the node's threads).
    pub map_tasks_per_node: usize,
    /// Link rate of every node, Mbit/s.
    pub link_mbit: f64,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            photos: None,
            classes: None,
            map_tasks_per_node: 8,
            link_mbit: 1000.0,
        }
    }
}

/// The 1-based line of `key` in `[section]` of `text`, for error messages.
fn line_of(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            current = name.trim().to_string();
        } else if current == section
            && t.split('=')
                .next()
                .is_some_and(|k| k.trim() == key && t.contains('='))
        {
            return Some(i + 1);
        }
    }
    None
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text = vocab_pipeline::input::read_text(path, vocab_pipeline::input::MAX_RECORD_BYTES)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let config: Config =
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
    let fail = |section: &str, key: &str, message: &str| -> anyhow::Error {
        let at =
            line_of(&text, section, key).map_or(String::new(), |line| format!(", line {line}"));
        anyhow::anyhow!(
            "invalid config {}: [{section}] {key}{at}: {message}",
            path.display()
        )
    };
    let d = &config.dataset;
    match (&d.path, &d.synthetic) {
        (Some(_), Some(_)) => {
            return Err(fail(
                "dataset",
                "synthetic",
                "`path` and `synthetic` both given; choose one",
            ));
        }
        (None, None) => bail!(
            "invalid config {}: [dataset] needs `path` (a photo folder) or `synthetic`",
            path.display()
        ),
        _ => {}
    }
    // The stages' own checks (crate::settings), with the key's section and line.
    let invalid = |section: &str, e: Invalid| -> anyhow::Error {
        let at =
            line_of(&text, section, e.key).map_or(String::new(), |line| format!(", line {line}"));
        anyhow::anyhow!(
            "invalid config {}: [{section}] {}{at}: {}",
            path.display(),
            e.key,
            e.rule
        )
    };
    if let Some(s) = &d.synthetic {
        settings::PhotoSetSettings::new(Path::new(""), s.per_kind, s.seed)
            .map_err(|e| invalid("dataset", e))?;
    }
    let f = &config.features;
    f.params().map_err(|e| invalid("features", e))?;
    settings::PartitionSettings::new(
        Path::new(""),
        Path::new(""),
        Some(config.partition.parts),
        config.partition.element,
    )
    .map_err(|e| invalid("partition", e))?;
    let km = &config.kmeans;
    if km.nodes > 0 {
        settings::engine_of(None, None, Some(km.nodes)).map_err(|e| {
            // `--local-nodes` on the command line, `nodes` here.
            invalid("kmeans", settings::Invalid { key: "nodes", ..e })
        })?;
    }
    if config.fisher() {
        let m = &config.mixture;
        if m.components.is_empty() {
            return Err(fail(
                "mixture",
                "components",
                "list mixture sizes of at least 1",
            ));
        }
        for &g in &m.components {
            // The photos' descriptors: no more principal components than a descriptor's
            // values (the count of vectors is known only when the sample is).
            m.params(g)
                .check_for(u64::MAX, vocab_pipeline::hog::DIMS)
                .map_err(|e| invalid("mixture", settings::Invalid::from(e)))?;
        }
    } else {
        if km.k.is_empty() {
            return Err(fail("kmeans", "k", "list vocabulary sizes of at least 1"));
        }
        let assignment = km.assignment().map_err(|e| invalid("kmeans", e))?;
        for &k in &km.k {
            settings::kmeans_rules(k, (km.iterations, km.tol), Some(km.init), assignment)
                .map_err(|e| invalid("kmeans", e))?;
        }
    }
    let e = &config.encode;
    let encoding = config
        .encode_params()
        .map_err(|err| invalid("encode", err))?;
    // The rules that need the dictionary's size (VLAD's and Fisher vectors' lengths), for every
    // size, before any is learned.
    for &k in config.sizes() {
        encoding
            .check(Some(k))
            .map_err(|err| invalid("encode", settings::Invalid::from(err)))?;
    }
    settings::svm_rules(None, config.classify.cv, config.classify.map_order)
        .map_err(|e| invalid("classify", e))?;
    let c = &config.classify;
    settings::protocol_rules(c.trials, c.train_per_class, d.test.is_some())
        .map_err(|e| invalid("classify", e))?;
    if d.test_labels.is_some() && d.test.is_none() {
        return Err(fail(
            "dataset",
            "test_labels",
            "names the labels of a test folder: set `test` too",
        ));
    }
    if config.classify.kernel_map != Mapping::None && e.norm != Norm::L1 {
        return Err(fail(
            "classify",
            "kernel_map",
            "takes L1-normalised histograms: set [encode] norm = \"l1\"",
        ));
    }
    if config.classify.kernel_map != Mapping::None
        && e.method != vocab_pipeline::encode::Pooling::Bow
    {
        return Err(fail(
            "classify",
            "kernel_map",
            &format!(
                "takes histograms, and [encode] method = \"{}\" makes signed vectors normalised \
                 for a linear SVM: drop the kernel map",
                e.method.name()
            ),
        ));
    }
    if config.classify.attributes.iter().any(|a| a == "path") {
        return Err(fail(
            "classify",
            "attributes",
            "`path` is the photo column, not an attribute",
        ));
    }
    if config.plan.link_mbit.is_nan()
        || config.plan.link_mbit <= 0.0
        || config.plan.map_tasks_per_node == 0
    {
        return Err(fail(
            "plan",
            "link_mbit",
            "link_mbit and map_tasks_per_node must be positive",
        ));
    }
    if config.plan.map_tasks_per_node > settings::MAX_THREADS {
        return Err(fail(
            "plan",
            "map_tasks_per_node",
            &format!(
                "must be at most {} (threads a node runs)",
                settings::MAX_THREADS
            ),
        ));
    }
    Ok(config)
}

#[cfg(test)]
mod tests;
