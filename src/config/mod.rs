//! Experiment configs (`configs/*.toml`): every stage's settings in one file, validated up front.
//!
//! Unknown keys and values of the wrong type are errors from the TOML parser, which names the key
//! and the line; rules the types cannot express (k of 0, a dataset with both a path and a
//! generator, ...) are checked here and name the key and its line too. `vocab config show`
//! prints the resolved file with every default filled in.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::options::{
    ClassifyOptions, EncodeOptions, FeaturesOptions, KmeansOptions, MixtureOptions,
    SyntheticOptions,
};
use crate::settings::{self, Invalid};
use vocab_pipeline::encode::Norm;
use vocab_pipeline::kernel_map::Mapping;
use vocab_pipeline::store::Element;

/// A whole config file, with defaults filled in.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the photos come from.
    pub dataset: DatasetConfig,
    /// The vocabulary's patch sample (random patches of the training photos).
    #[serde(default)]
    pub features: FeaturesOptions,
    /// Partitions of the sample for map tasks.
    #[serde(default)]
    pub partition: PartitionConfig,
    /// Vocabularies built from the partitions (one per entry of `k`), and where the run's
    /// distributed stages go.
    pub kmeans: KmeansOptions,
    /// Mixtures for Fisher vectors (`[encode] method = "fisher"`), learned from the partitions
    /// instead of vocabularies.
    #[serde(default)]
    pub mixture: MixtureOptions,
    /// Dense encoding of every photo over each vocabulary.
    #[serde(default)]
    pub encode: EncodeOptions,
    /// Split, SVMs and evaluation per attribute.
    #[serde(default)]
    pub classify: ClassifyOptions,
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
    pub synthetic: Option<SyntheticOptions>,
    /// A test folder, relative to the config (or `vocab run --test`): the vocabulary and the
    /// models learn from every photo of the dataset, and every labelled photo here is scored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<PathBuf>,
    /// The test folder's labels CSV, relative to the config [default: `labels.csv` in it].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_labels: Option<PathBuf>,
    /// With `[features] from`: the descriptors made elsewhere of the test folder's photos, a
    /// folder mirroring the test folder's, relative to the config (or `vocab run --test-from`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_from: Option<PathBuf>,
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
            element: Element::default(),
            at: PartitionAt::Nodes,
            folder: None,
        }
    }
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
    /// Measure this machine's rates when planning (about a second); false: the reference
    /// machine's, the same plan everywhere.
    pub calibrate: bool,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            photos: None,
            classes: None,
            map_tasks_per_node: 8,
            link_mbit: 1000.0,
            calibrate: true,
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

/// A config file's path and text, for errors that name the section, the key and its line.
struct ConfigText<'a> {
    path: &'a Path,
    text: &'a str,
}

impl ConfigText<'_> {
    /// `message` about `key` in `[section]`, with the key's line when the text holds it.
    fn fail(&self, section: &str, key: &str, message: &str) -> anyhow::Error {
        let at =
            line_of(self.text, section, key).map_or(String::new(), |line| format!(", line {line}"));
        anyhow::anyhow!(
            "invalid config {}: [{section}] {key}{at}: {message}",
            self.path.display()
        )
    }

    /// A stage's own check (crate::settings) broken in `[section]`, with the key's line.
    fn invalid(&self, section: &str, e: Invalid) -> anyhow::Error {
        self.fail(section, e.key, &e.rule)
    }
}

/// A hint for a single value where a key takes a list (`k = 64`: write `k = [64]`), from the
/// line the parser's error points at; empty for any other error.
fn list_hint(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e
        .span()
        .filter(|_| e.message().contains("expected a sequence"))
    else {
        return String::new();
    };
    let start = text[..span.start.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("");
    match line.split_once('=') {
        Some((key, value)) => {
            let (key, value) = (key.trim(), value.split('#').next().unwrap_or("").trim());
            format!(" ({key} takes a list: write `{key} = [{value}]`)")
        }
        None => String::new(),
    }
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text = vocab_pipeline::input::read_text(path, vocab_pipeline::input::MAX_RECORD_BYTES)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let mut config: Config = toml::from_str(&text).map_err(|e| {
        let hint = list_hint(&text, &e);
        anyhow::Error::new(e).context(format!("invalid config {}{hint}", path.display()))
    })?;
    // Descriptors made elsewhere: their folder, relative to the config.
    if let Some(from) = &mut config.features.from {
        *from = path.parent().unwrap_or(Path::new(".")).join(&*from);
    }
    let at = ConfigText { path, text: &text };
    // One patch side, `[features] patch`, for both (`[encode]`'s only as `config show` says it).
    if config.encode.patch.is_some() && config.encode.patch != config.features.patch {
        let why = "the encoding describes photos as the sample did: set patch in [features] alone";
        return Err(at.fail("encode", "patch", why));
    }
    config.encode.patch = config.features.patch;
    dataset_rules(&config, &at)?;
    sample_rules(&config, &at)?;
    dictionary_rules(&config, &at)?;
    encode_rules(&config, &at)?;
    classify_rules(&config, &at)?;
    plan_rules(&config, &at)?;
    Ok(config)
}

/// `[dataset]`: a photo folder or the synthetic set, not both, and the synthetic set's own
/// rules.
fn dataset_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let d = &config.dataset;
    match (&d.path, &d.synthetic) {
        (Some(_), Some(_)) => {
            return Err(at.fail(
                "dataset",
                "synthetic",
                "`path` and `synthetic` both given; choose one",
            ));
        }
        (None, None) => bail!(
            "invalid config {}: [dataset] needs `path` (a photo folder) or `synthetic`",
            at.path.display()
        ),
        _ => {}
    }
    if let Some(s) = &d.synthetic {
        settings::PhotoSetSettings::new(Path::new(""), s.per_kind, s.seed)
            .map_err(|e| at.invalid("dataset", e))?;
    }
    Ok(())
}

/// `[features]` and `[partition]`: the patch sample's and its partitions' own rules.
fn sample_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    config
        .features
        .params()
        .map_err(|e| at.invalid("features", e))?;
    settings::PartitionSettings::new(
        Path::new(""),
        Path::new(""),
        Some(config.partition.parts),
        config.partition.element,
    )
    .map_err(|e| at.invalid("partition", e))?;
    // vocab mirrors a photo before describing it; descriptors made elsewhere would need files
    // of the mirrored photos.
    if config.features.from.is_some() && config.classify.mirror {
        return Err(at.fail(
            "features",
            "from",
            "no mirror images of descriptors made elsewhere (their files describe the photos as \
             they are): drop [classify] mirror",
        ));
    }
    Ok(())
}

/// `[kmeans] nodes`, then the dictionaries the run learns: `[mixture] components` for Fisher
/// vectors, else `[kmeans] k`, at least one size and every size by its stage's rules.
fn dictionary_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let km = &config.kmeans;
    if km.nodes > 0 {
        settings::Backend::of(None, None, Some(km.nodes)).map_err(|e| {
            // `--local-nodes` on the command line, `nodes` here.
            at.invalid("kmeans", settings::Invalid { key: "nodes", ..e })
        })?;
    }
    if config.fisher() {
        let m = &config.mixture;
        if m.components.is_empty() {
            return Err(at.fail("mixture", "components", "list mixture sizes of at least 1"));
        }
        for &g in &m.components {
            // The photos' descriptors: no more principal components than a descriptor's
            // values (the count of vectors is known only when the sample is).
            // Descriptors made elsewhere: their dimension is known when their files are read.
            let dims = match config.features.from {
                Some(_) => vocab_pipeline::descriptors::MAX_DIMS,
                None => vocab_pipeline::hog::DIMS,
            };
            m.params(g)
                .check_for(u64::MAX, dims)
                .map_err(|e| at.invalid("mixture", settings::Invalid::from(e)))?;
        }
    } else {
        if km.k.is_empty() {
            return Err(at.fail("kmeans", "k", "list vocabulary sizes of at least 1"));
        }
        let assignment = km.assignment().map_err(|e| at.invalid("kmeans", e))?;
        for &k in &km.k {
            settings::kmeans_rules(k, (km.iterations, km.tol), Some(km.init), assignment)
                .map_err(|e| at.invalid("kmeans", e))?;
        }
    }
    Ok(())
}

/// `[encode]`: the encoding's rules, with those that need the dictionary's size (VLAD's and
/// Fisher vectors' lengths) for every size, before any is learned.
fn encode_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let encoding = config
        .encode_params()
        .map_err(|err| at.invalid("encode", err))?;
    for &k in config.sizes() {
        encoding
            .check(Some(k))
            .map_err(|err| at.invalid("encode", settings::Invalid::from(err)))?;
    }
    Ok(())
}

/// `[classify]`: the SVMs' and the protocol's rules (and `[dataset] test_labels` only with the
/// test folder the protocol scores), a kernel map only over L1-normalised histograms, and no
/// attribute named `path`.
fn classify_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    let (d, e) = (&config.dataset, &config.encode);
    settings::svm_rules(None, config.classify.cv, config.classify.map_order)
        .map_err(|e| at.invalid("classify", e))?;
    let c = &config.classify;
    settings::protocol_rules(c.trials, c.train_per_class, d.test.is_some())
        .map_err(|e| at.invalid("classify", e))?;
    if d.test_labels.is_some() && d.test.is_none() {
        return Err(at.fail(
            "dataset",
            "test_labels",
            "names the labels of a test folder: set `test` too",
        ));
    }
    if config.classify.kernel_map != Mapping::None && e.norm != Norm::L1 {
        return Err(at.fail(
            "classify",
            "kernel_map",
            "takes L1-normalised histograms: set [encode] norm = \"l1\"",
        ));
    }
    if config.classify.kernel_map != Mapping::None
        && e.method != vocab_pipeline::encode::Pooling::Bow
    {
        return Err(at.fail(
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
        return Err(at.fail(
            "classify",
            "attributes",
            "`path` is the photo column, not an attribute",
        ));
    }
    Ok(())
}

/// `[plan]`: a positive link rate, and map tasks per node from 1 to the threads a node runs.
fn plan_rules(config: &Config, at: &ConfigText) -> anyhow::Result<()> {
    if config.plan.link_mbit.is_nan()
        || config.plan.link_mbit <= 0.0
        || config.plan.map_tasks_per_node == 0
    {
        return Err(at.fail(
            "plan",
            "link_mbit",
            "link_mbit and map_tasks_per_node must be positive",
        ));
    }
    if config.plan.map_tasks_per_node > settings::MAX_THREADS {
        return Err(at.fail(
            "plan",
            "map_tasks_per_node",
            &format!(
                "must be at most {} (threads a node runs)",
                settings::MAX_THREADS
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
