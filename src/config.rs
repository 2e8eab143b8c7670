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

use crate::cli::{
    BroadcastAlgorithm, ElementArg, FileFormat, InitMethod, KernelArg, KernelMapArg, NormArg,
    SolverArg,
};

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
    /// Dense encoding of every photo over each vocabulary.
    #[serde(default)]
    pub encode: EncodeConfig,
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

/// `[features]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesConfig {
    /// Random patches per training photo.
    pub per_image: usize,
    /// Sampling seed.
    pub seed: u64,
    /// Feature file format.
    pub format: FileFormat,
    /// Downscale photos whose longer side exceeds this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_side: Option<usize>,
    /// Skip photos declaring more megapixels than this (not in the cache key at its default).
    #[serde(skip_serializing_if = "is_default_mpix")]
    pub max_pixels: u64,
}

impl Default for FeaturesConfig {
    fn default() -> Self {
        Self {
            per_image: 5,
            seed: 0,
            format: FileFormat::Bin,
            max_side: None,
            max_pixels: DEFAULT_MAX_MPIX,
        }
    }
}

/// `[partition]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionConfig {
    /// Number of partitions.
    pub parts: usize,
    /// Value storage: f32 or u8.
    pub element: ElementArg,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        Self {
            parts: 8,
            element: ElementArg::F32,
        }
    }
}

/// `[kmeans]`: one vocabulary per entry of `k`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KmeansConfig {
    /// Vocabulary sizes.
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
    pub broadcast: BroadcastAlgorithm,
    /// Stage-1 (local) aggregation.
    #[serde(default = "default_true")]
    pub local_aggregation: bool,
    /// Cluster file (relative to the config) to run on instead of loopback workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<PathBuf>,
    /// Yinyang-pruned assignment (`vocab kmeans --prune`); single-process engine only
    /// (`nodes = 0`, no cluster).
    #[serde(default, skip_serializing_if = "is_default")]
    pub prune: bool,
    /// Kernel of the full assignment pass (`vocab kmeans --kernel`); `int8` not with `prune`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub kernel: KernelArg,
    /// Rack of each host for `--engine mpi` (`[kmeans.racks]`, `"host" = "rack"` lines; the
    /// `--racks` file overrides it): the chain keeps a rack's ranks together. Hosts not
    /// listed are racks of their own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub racks: BTreeMap<String, String>,
    /// Chain order on a distributed engine (`vocab kmeans --order`): `racks` or `auto`
    /// (measured links).
    #[serde(default, skip_serializing_if = "is_default")]
    pub order: crate::cli::OrderArg,
}

/// Default pixel limit of the photo stages, in megapixels.
pub const DEFAULT_MAX_MPIX: u64 = vocab_pipeline::image_io::MAX_PIXELS / 1_000_000;

fn is_default_mpix(v: &u64) -> bool {
    *v == DEFAULT_MAX_MPIX
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

fn default_broadcast() -> BroadcastAlgorithm {
    BroadcastAlgorithm::Chain
}

fn default_true() -> bool {
    true
}

/// `[encode]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncodeConfig {
    /// Dense grid step in pixels.
    pub stride: usize,
    /// Histogram normalisation.
    pub norm: NormArg,
    /// Spatial pyramid levels (1 = plain bag of words).
    pub pyramid: usize,
    /// Downscale photos whose longer side exceeds this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_side: Option<usize>,
    /// Skip photos declaring more megapixels than this (not in the cache key at its default).
    #[serde(skip_serializing_if = "is_default_mpix")]
    pub max_pixels: u64,
    /// Soft assignment over this many nearest words (0: hard; not in the cache key at 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub soft: usize,
    /// How fast a soft weight falls with distance (not in the cache key at its default).
    #[serde(skip_serializing_if = "is_default_sharpness")]
    pub sharpness: f32,
}

/// The default of `sharpness` (soft assignment).
pub const DEFAULT_SHARPNESS: f32 = 10.0;

fn is_zero(v: &usize) -> bool {
    *v == 0
}

fn is_default_sharpness(v: &f32) -> bool {
    *v == DEFAULT_SHARPNESS
}

impl Default for EncodeConfig {
    fn default() -> Self {
        Self {
            stride: 8,
            norm: NormArg::L1,
            pyramid: 1,
            max_side: None,
            max_pixels: DEFAULT_MAX_MPIX,
            soft: 0,
            sharpness: DEFAULT_SHARPNESS,
        }
    }
}

/// `[classify]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// Attributes (label columns) to learn [default: every column but `path`].
    pub attributes: Vec<String>,
    /// Column the 50/50 split is stratified by [default: the first attribute].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_by: Option<String>,
    /// Seed of the split (and of the CV folds).
    pub split_seed: u64,
    /// Folds of the cross-validation that chooses C on the training half.
    pub cv: usize,
    /// SVM solver: dcd or linfa.
    pub solver: SolverArg,
    /// Explicit kernel map before the linear SVM: none, chi2, intersection or js (for L1
    /// histograms: `[encode] norm = "l1"`).
    pub kernel_map: KernelMapArg,
    /// Frequencies of the kernel map after the first (2 N + 1 values per bin).
    pub map_order: usize,
}

impl Default for ClassifyConfig {
    fn default() -> Self {
        Self {
            attributes: Vec::new(),
            split_by: None,
            split_seed: 1,
            cv: 5,
            solver: SolverArg::Dcd,
            kernel_map: KernelMapArg::None,
            map_order: 3,
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
    /// Map tasks per node (default: the node's threads).
    pub map_tasks_per_node: usize,
    /// Link rate of every node, Mbit/s.
    pub link_mbit: f64,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            photos: None,
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
    let text = std::fs::read_to_string(path)
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
    if d.synthetic.as_ref().is_some_and(|s| s.per_kind == 0) {
        return Err(fail("dataset", "synthetic", "per_kind must be at least 1"));
    }
    if config.features.max_pixels == 0 {
        return Err(fail(
            "features",
            "max_pixels",
            "must be at least 1 (megapixels)",
        ));
    }
    if config.encode.max_pixels == 0 {
        return Err(fail(
            "encode",
            "max_pixels",
            "must be at least 1 (megapixels)",
        ));
    }
    if config.features.per_image == 0 {
        return Err(fail("features", "per_image", "must be at least 1"));
    }
    if config.features.per_image > vocab_pipeline::patch::MAX_PER_IMAGE {
        return Err(fail(
            "features",
            "per_image",
            &format!("must be at most {}", vocab_pipeline::patch::MAX_PER_IMAGE),
        ));
    }
    if config.partition.parts == 0 {
        return Err(fail("partition", "parts", "must be at least 1"));
    }
    let km = &config.kmeans;
    if km.k.is_empty() || km.k.contains(&0) {
        return Err(fail("kmeans", "k", "list vocabulary sizes of at least 1"));
    }
    if km.iterations == 0 {
        return Err(fail("kmeans", "iterations", "must be at least 1"));
    }
    if km.tol.is_nan() || km.tol < 0.0 {
        return Err(fail("kmeans", "tol", "must be 0 or more"));
    }
    if km.prune && (km.nodes > 0 || km.cluster.is_some()) {
        return Err(fail(
            "kmeans",
            "prune",
            "runs on the single-process engine only: set nodes = 0 and no cluster",
        ));
    }
    if km.kernel != KernelArg::F32 && km.prune {
        return Err(fail(
            "kmeans",
            "kernel",
            "int8 is a full-pass kernel; it does not combine with prune",
        ));
    }
    let e = &config.encode;
    if e.stride == 0 {
        return Err(fail("encode", "stride", "must be at least 1"));
    }
    if !(1..=4).contains(&e.pyramid) {
        return Err(fail("encode", "pyramid", "must be 1 to 4 levels"));
    }
    if e.soft == 1 || e.soft > 64 {
        return Err(fail("encode", "soft", "must be 0 (hard) or 2 to 64 words"));
    }
    if !(e.sharpness.is_finite() && e.sharpness > 0.0) {
        return Err(fail("encode", "sharpness", "must be a positive number"));
    }
    if config.classify.cv < 2 {
        return Err(fail("classify", "cv", "needs at least 2 folds"));
    }
    if !(1..=10).contains(&config.classify.map_order) {
        return Err(fail("classify", "map_order", "must be 1 to 10"));
    }
    if config.classify.kernel_map != KernelMapArg::None && e.norm != NormArg::L1 {
        return Err(fail(
            "classify",
            "kernel_map",
            "takes L1-normalised histograms: set [encode] norm = \"l1\"",
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
    Ok(config)
}

/// `vocab config check FILE`.
pub fn check(path: &Path) -> anyhow::Result<()> {
    let config = load(path)?;
    let dataset = match (&config.dataset.path, &config.dataset.synthetic) {
        (Some(p), _) => format!("photos in {}", p.display()),
        (None, Some(s)) => format!("synthetic set, {} photos per kind", s.per_kind),
        (None, None) => unreachable!("checked by load"),
    };
    println!(
        "config {}: ok ({dataset}; vocabularies k = {:?}; {})",
        path.display(),
        config.kmeans.k,
        if config.kmeans.nodes == 0 {
            "k-means in one process".to_string()
        } else {
            format!("k-means on {} loopback workers", config.kmeans.nodes)
        }
    );
    Ok(())
}

/// `vocab config show FILE`: the resolved config, every default filled in.
pub fn show(path: &Path) -> anyhow::Result<()> {
    let config = load(path)?;
    let text = toml::to_string_pretty(&config).context("cannot print the config")?;
    println!("# {} with every default filled in\n{text}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> anyhow::Result<Config> {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).expect("write");
        load(&path)
    }

    #[test]
    fn defaults_fill_in_and_rules_name_key_and_line() {
        let c = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\n").expect("minimal");
        assert_eq!(
            (c.kmeans.nodes, c.partition.parts, c.classify.cv),
            (2, 8, 5)
        );
        let err = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4, 0]\n")
            .expect_err("k = 0")
            .to_string();
        assert!(err.contains("[kmeans] k, line 4"), "{err}");
        let err = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nkay = 3\n")
            .expect_err("unknown key");
        assert!(format!("{err:#}").contains("kay"), "{err:#}");
        let err =
            load_text("[dataset]\nsynthetic = {}\n[encode]\npyramid = 9\n[kmeans]\nk = [2]\n")
                .expect_err("pyramid")
                .to_string();
        assert!(err.contains("[encode] pyramid, line 4"), "{err}");
        let err = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nprune = true\n")
            .expect_err("prune on loopback workers")
            .to_string();
        assert!(
            err.contains("[kmeans] prune, line 5") && err.contains("nodes = 0"),
            "{err}"
        );
        let c =
            load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nprune = true\nnodes = 0\n")
                .expect("prune on one process");
        assert!(c.kmeans.prune);
        let err = load_text(
            "[dataset]\nsynthetic = {}\n[kmeans]\nkernel = \"int8\"\nk = [4]\nprune = true\nnodes = 0\n",
        )
        .expect_err("int8 with prune")
        .to_string();
        assert!(
            err.contains("[kmeans] kernel, line 4") && err.contains("prune"),
            "{err}"
        );
        let c = load_text("[dataset]\nsynthetic = {}\n[kmeans]\nk = [4]\nkernel = \"int8\"\n")
            .expect("int8 on loopback workers");
        assert_eq!((c.kmeans.kernel, c.kmeans.nodes), (KernelArg::Int8, 2));
    }
}
