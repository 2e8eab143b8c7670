//! Experiment configs (`configs/*.toml`) and `vocab run`.
//!
//! This is the orchestrator's first shape: it validates the whole file up front (unknown keys and
//! bad values are errors naming the key and line), then runs the stages that exist so far
//! (dataset, features) into a work directory. Later stages add their own sections.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::cli::{
    ElementArg, FileFormat, InitMethod, KmeansArgs, Mode, PartitionArgs, PhotosArgs, RunArgs,
};
use crate::progress::Ui;
use crate::stages::{self, FeatureSettings};

/// A whole config file as written (defaults filled in by serde).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Where the photos come from.
    pub dataset: DatasetConfig,
    /// The vocabulary's patch sample.
    #[serde(default)]
    pub features: FeaturesConfig,
    /// Partitions of the sample for map tasks.
    #[serde(default)]
    pub partition: PartitionConfig,
    /// Vocabularies built from the partitions.
    pub kmeans: Option<KmeansConfig>,
}

/// `[partition]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PartitionConfig {
    /// Number of partitions (default: 4 per core).
    pub parts: Option<usize>,
    /// Value storage: f32 (default) or u8.
    pub element: ElementArg,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        Self {
            parts: None,
            element: ElementArg::F32,
        }
    }
}

/// `[kmeans]`: one vocabulary per entry of `k`.
#[derive(Debug, Deserialize)]
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
    /// Prune the assignment with Hamerly's bounds.
    #[serde(default)]
    pub prune: bool,
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

/// `[dataset]`: a folder of photos, or the generated synthetic set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// Photo folder, relative to the config file.
    pub path: Option<PathBuf>,
    /// Labels CSV, relative to the config file.
    pub labels: Option<PathBuf>,
    /// Generate the synthetic set into the work directory instead.
    pub synthetic: Option<SyntheticConfig>,
}

/// `[dataset.synthetic]`.
#[derive(Debug, Deserialize)]
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

/// `[features]`, with the defaults of `vocab features`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesConfig {
    /// Sampling mode.
    pub mode: Mode,
    /// Random patches per photo.
    pub per_image: usize,
    /// Dense grid step.
    pub stride: usize,
    /// Sampling seed.
    pub seed: u64,
    /// Output format.
    pub format: FileFormat,
    /// Downscale limit.
    pub max_side: Option<usize>,
}

impl Default for FeaturesConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Random,
            per_image: 5,
            stride: 8,
            seed: 0,
            format: FileFormat::Bin,
            max_side: None,
        }
    }
}

/// Reads and validates a config file.
pub fn load(path: &Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let config: Config =
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
    match (&config.dataset.path, &config.dataset.synthetic) {
        (Some(_), Some(_)) => bail!(
            "invalid config {}: [dataset] has both `path` and `synthetic`; choose one",
            path.display()
        ),
        (None, None) => bail!(
            "invalid config {}: [dataset] needs `path` (a photo folder) or `synthetic`",
            path.display()
        ),
        _ => {}
    }
    if let Some(km) = &config.kmeans {
        if km.k.is_empty() || km.k.contains(&0) {
            bail!(
                "invalid config {}: [kmeans] k must list sizes of at least 1",
                path.display()
            );
        }
    }
    Ok(config)
}

/// `vocab run CONFIG`.
pub fn run(args: &RunArgs, ui: &Ui) -> anyhow::Result<()> {
    let started = Instant::now();
    let config = load(&args.config)?;
    let base = args.config.parent().unwrap_or(Path::new("."));
    let work = args.work.clone().unwrap_or_else(|| {
        let stem = args
            .config
            .file_stem()
            .map_or("run".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("work").join(stem)
    });
    std::fs::create_dir_all(&work)
        .with_context(|| format!("cannot create work directory {}", work.display()))?;

    let (photos, labels) = match (&config.dataset.synthetic, &config.dataset.path) {
        (Some(synthetic), _) => {
            let out = work.join("photos");
            stages::photos(&PhotosArgs {
                out: out.clone(),
                per_kind: synthetic.per_kind,
                seed: synthetic.seed,
            })?;
            (out.clone(), Some(out.join("labels.csv")))
        }
        (None, Some(path)) => (
            base.join(path),
            config.dataset.labels.as_ref().map(|l| base.join(l)),
        ),
        (None, None) => unreachable!("checked by load"),
    };

    let f = &config.features;
    let out = work.join(match f.format {
        FileFormat::Text => "features.txt",
        FileFormat::Bin => "features.bin",
    });
    let settings = FeatureSettings::new(
        &photos,
        labels.as_deref(),
        &out,
        Some(f.format),
        f.mode,
        f.per_image,
        f.stride,
        f.seed,
        f.max_side,
    )
    .with_context(|| format!("[features] of {}", args.config.display()))?;
    stages::features(&settings, ui)?;

    if let Some(km) = &config.kmeans {
        let parts_dir = work.join("parts");
        crate::kmeans::partition(&PartitionArgs {
            features: out.clone(),
            parts: config.partition.parts,
            out: parts_dir.clone(),
            element: config.partition.element,
        })?;
        for &k in &km.k {
            crate::kmeans::run(
                &KmeansArgs {
                    features: parts_dir.clone(),
                    k,
                    iterations: km.iterations,
                    tol: km.tol,
                    seed: km.seed,
                    init: km.init,
                    init_centroids: None,
                    prune: km.prune,
                    resume: false,
                    cluster: None,
                    local_nodes: None,
                    broadcast: crate::cli::BroadcastAlgorithm::Chain,
                    no_local_aggregation: false,
                    format: Some(FileFormat::Bin),
                    out: work.join(format!("vocabulary-k{k}.bin")),
                },
                ui,
            )
            .with_context(|| format!("[kmeans] k = {k} of {}", args.config.display()))?;
        }
    }
    println!(
        "run: {} finished in {:.1} s; outputs in {}",
        args.config.display(),
        started.elapsed().as_secs_f64(),
        work.display()
    );
    Ok(())
}
