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
    /// Other descriptors joined with the one above in every photo's vector (`[[join]]`, each a
    /// part of its own sample, dictionaries and encodings; `vocab join`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub join: Vec<JoinPart>,
}

/// `[[join]]`: a descriptor whose encodings are joined with the run's own (each part times 1 /
/// sqrt(parts)): the same dictionary sizes, mixture and encoding settings, with its own
/// descriptor, sample and grid.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JoinPart {
    /// The part's descriptor.
    pub descriptor: vocab_pipeline::features::Descriptor,
    /// Its sample's descriptors per photo [default: `[features] per_image`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_image: Option<usize>,
    /// Its encoding's grid step in pixels [default: `[encode] stride`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<usize>,
    /// Its patch side (HOG's) [default: none, the photo as it is].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<usize>,
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

    /// The config of each part of the run's vectors: itself (without its `[[join]]`), then one
    /// per `[[join]]`, whose descriptor, sample size, grid and patch side replace its own.
    pub fn parts(&self) -> Vec<Config> {
        let own = Config {
            join: Vec::new(),
            ..self.clone()
        };
        let mut parts = vec![own.clone()];
        for part in &self.join {
            let mut config = own.clone();
            config.features.descriptor = part.descriptor;
            config.encode.descriptor = part.descriptor;
            config.features.per_image = part.per_image.unwrap_or(self.features.per_image);
            config.encode.stride = part.stride.unwrap_or(self.encode.stride);
            config.features.patch = part.patch;
            config.encode.patch = part.patch;
            parts.push(config);
        }
        parts
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
    rules::described_alike(&mut config, &at)?;
    rules::dataset_rules(&config, &at)?;
    rules::sample_rules(&config, &at)?;
    rules::dictionary_rules(&config, &at)?;
    rules::encode_rules(&config, &at)?;
    rules::classify_rules(&config, &at)?;
    rules::plan_rules(&config, &at)?;
    rules::join_rules(&config, &at)?;
    Ok(config)
}

mod rules;
#[cfg(test)]
mod tests;
