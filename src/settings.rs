//! Each stage's settings, checked in exactly one place whatever their source.
//!
//! A stage's command (`vocab features`, `vocab encode`, ...) and `vocab run` build the same
//! settings type, one from clap's arguments, the other from a config section; the checks are the
//! constructors here. A rule broken is an [`Invalid`] naming the setting by its config key; the
//! command line shows it as a flag (`--pyramid 9: ...`), a config as its section, key and line
//! (`[encode] pyramid = 9, line 4: ...`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use vocab_pipeline::encode::{EncodeParams, Norm, Soft};
use vocab_pipeline::features::FeatureParams;
use vocab_pipeline::kmeans::{Assignment, Init, Params, approx};
use vocab_pipeline::params::Broken;
use vocab_pipeline::patch::Sampling;
use vocab_pipeline::store::Format;

use crate::options::{
    AssignArg, BroadcastAlgorithm, DEFAULT_MAX_MPIX, ElementArg, EncodeOptions, EngineArg,
    InitMethod, KernelArg, KernelMapArg, Mode, NormArg, OrderArg, SolverArg, is_default_mpix,
};

/// Frequencies of a kernel map at most.
pub const MAX_MAP_ORDER: usize = 10;

/// A setting that breaks a rule: its config key (the flag is the key with dashes), the value
/// given and the rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{key} = {value}: {rule}")]
pub struct Invalid {
    /// The config key, e.g. `per_image`.
    pub key: &'static str,
    /// The value given, as the user wrote it.
    pub value: String,
    /// What the setting must be.
    pub rule: String,
}

impl Invalid {
    fn new(key: &'static str, value: impl std::fmt::Display, rule: impl Into<String>) -> Self {
        Self {
            key,
            value: value.to_string(),
            rule: rule.into(),
        }
    }

    /// The command line's `--per-image 0: must be at least 1`.
    pub fn flag(&self) -> String {
        format!(
            "--{} {}: {}",
            self.key.replace('_', "-"),
            self.value,
            self.rule
        )
    }
}

impl<E: Broken> From<E> for Invalid {
    fn from(e: E) -> Self {
        Self {
            key: e.key(),
            value: e.value(),
            rule: e.rule(),
        }
    }
}

/// Lets `?` turn an [`Invalid`] into a command-line error.
pub trait OrFlag<T> {
    /// The error as a flag's error.
    fn or_flag(self) -> anyhow::Result<T>;
}

impl<T> OrFlag<T> for Result<T, Invalid> {
    fn or_flag(self) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::anyhow!(e.flag()))
    }
}

fn at_least(key: &'static str, value: usize, min: usize, what: &str) -> Result<(), Invalid> {
    if value < min {
        return Err(Invalid::new(
            key,
            value,
            format!("must be at least {min}{what}"),
        ));
    }
    Ok(())
}

/// The parameters of a photo stage's description, checked ([`FeatureParams::check`]): where
/// patches are cut (`mode`: `per_image` random ones seeded by `seed`, or a grid of `stride`),
/// the downscale limit and the pixel limit in megapixels.
pub fn feature_params(
    mode: Mode,
    (per_image, stride, seed): (usize, usize, u64),
    max_side: Option<usize>,
    max_mpix: u64,
) -> Result<FeatureParams, Invalid> {
    let params = FeatureParams {
        sampling: match mode {
            Mode::Random => Sampling::Random { per_image, seed },
            Mode::Dense => Sampling::Dense { stride },
        },
        max_side,
        max_pixels: pixels(max_mpix)?,
    };
    params.check()?;
    Ok(params)
}

/// A pixel limit in megapixels, in pixels (the rule of a limit of 0 is the parameters').
fn pixels(max_mpix: u64) -> Result<u64, Invalid> {
    max_mpix
        .checked_mul(1_000_000)
        .ok_or_else(|| Invalid::new("max_pixels", max_mpix, "1 or more megapixels"))
}

/// An output file's folder must exist (outputs are written beside their destination, then
/// renamed; a mistyped folder is named up front rather than after the work is done).
pub fn output(key: &'static str, path: &Path) -> Result<(), Invalid> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    match parent {
        Some(dir) if !dir.is_dir() => Err(Invalid::new(
            key,
            path.display(),
            format!("the folder {} does not exist", dir.display()),
        )),
        _ => Ok(()),
    }
}

/// Text for `.txt`/`.text` files, binary otherwise.
pub fn format_for(path: &Path) -> Format {
    match path.extension().and_then(|e| e.to_str()) {
        Some(ext) if ext.eq_ignore_ascii_case("txt") || ext.eq_ignore_ascii_case("text") => {
            Format::Text
        }
        _ => Format::Bin,
    }
}

/// Settings of the features stage.
#[derive(Debug, Clone)]
pub struct FeatureSettings {
    /// Photo folder.
    pub input: PathBuf,
    /// Optional labels CSV restricting the photos.
    pub labels: Option<PathBuf>,
    /// Feature file.
    pub out: PathBuf,
    /// Output format.
    pub format: Format,
    /// Sampling and decoding parameters.
    pub params: FeatureParams,
}

impl FeatureSettings {
    /// From `vocab features`.
    pub fn from_args(args: &crate::cli::FeaturesArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        let shape = (args.per_image, args.stride, args.seed);
        Ok(Self {
            input: args.input.clone(),
            labels: args.labels.clone(),
            out: args.out.clone(),
            format: args
                .format
                .map_or_else(|| format_for(&args.out), Format::from),
            params: feature_params(args.mode, shape, args.max_side, args.max_pixels)?,
        })
    }

    /// From a config's `[features]`: random patches of the photos `labels` lists.
    pub fn from_config(
        f: &FeaturesConfig,
        input: &Path,
        labels: &Path,
        out: &Path,
    ) -> Result<Self, Invalid> {
        Ok(Self {
            input: input.to_path_buf(),
            labels: Some(labels.to_path_buf()),
            out: out.to_path_buf(),
            format: f.format.into(),
            params: f.params()?,
        })
    }
}

/// `[features]` of a config: the vocabulary's sample, random patches of the training photos.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FeaturesConfig {
    /// Random patches per training photo.
    pub per_image: usize,
    /// Sampling seed.
    pub seed: u64,
    /// Feature file format.
    pub format: crate::options::FileFormat,
    /// Downscale photos whose longer side exceeds this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_side: Option<usize>,
    /// Skip photos declaring more megapixels than this (not in the cache key at its default).
    #[serde(skip_serializing_if = "is_default_mpix")]
    pub max_pixels: u64,
}

impl FeaturesConfig {
    /// The checked parameters of the sample's description (random patches).
    pub fn params(&self) -> Result<FeatureParams, Invalid> {
        let shape = (self.per_image, 8, self.seed);
        feature_params(Mode::Random, shape, self.max_side, self.max_pixels)
    }
}

impl Default for FeaturesConfig {
    fn default() -> Self {
        Self {
            per_image: 5,
            seed: 0,
            format: crate::options::FileFormat::Bin,
            max_side: None,
            max_pixels: DEFAULT_MAX_MPIX,
        }
    }
}

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
    pub element: ElementArg,
}

impl PartitionSettings {
    /// Checks the settings (`parts = None`: 4 per core).
    pub fn new(
        features: &Path,
        out: &Path,
        parts: Option<usize>,
        element: ElementArg,
    ) -> Result<Self, Invalid> {
        let parts = parts.unwrap_or_else(|| 4 * rayon::current_num_threads());
        at_least("parts", parts, 1, "")?;
        Ok(Self {
            features: features.to_path_buf(),
            out: out.to_path_buf(),
            parts,
            element,
        })
    }
}

impl EncodeOptions {
    /// The checked parameters of the encoding ([`EncodeParams::check`]; the approximate
    /// search's own settings by [`assignment_of`]).
    pub fn params(&self) -> Result<EncodeParams, Invalid> {
        let soft = (self.soft > 0).then_some(Soft {
            words: self.soft,
            sharpness: self.sharpness,
        });
        let approx = if self.assign == AssignArg::Approx && soft.is_some() {
            // Exact or approximate, soft or not: [`EncodeParams::check`] names the conflict.
            Some(approx::Search {
                lists: self.lists.unwrap_or(0),
                probes: self.probes,
            })
        } else {
            match assignment_of(false, self.kernel, self.assign, self.lists, self.probes)? {
                Assignment::Approx { lists, probes } => Some(approx::Search { lists, probes }),
                _ => None,
            }
        };
        let params = EncodeParams {
            features: FeatureParams {
                sampling: Sampling::Dense {
                    stride: self.stride,
                },
                max_side: self.max_side,
                max_pixels: pixels(self.max_pixels)?,
            },
            norm: match self.norm {
                NormArg::L1 => Norm::L1,
                NormArg::Hellinger => Norm::Hellinger,
            },
            levels: self.pyramid,
            soft,
            kernel: self.kernel.into(),
            scales: self.scales.clone(),
            approx,
        };
        params.check(None)?;
        Ok(params)
    }
}

/// Settings of the encode stage.
#[derive(Debug, Clone)]
pub struct EncodeSettings {
    /// Vocabulary file.
    pub vocabulary: PathBuf,
    /// Photo folder.
    pub input: PathBuf,
    /// Optional labels CSV restricting the photos.
    pub labels: Option<PathBuf>,
    /// Histogram file.
    pub out: PathBuf,
    /// The options as given (recorded beside the histograms).
    pub options: EncodeOptions,
    /// The checked parameters.
    pub params: EncodeParams,
}

impl EncodeSettings {
    /// Checks the options.
    pub fn new(
        vocabulary: &Path,
        input: &Path,
        labels: Option<&Path>,
        out: &Path,
        options: &EncodeOptions,
    ) -> Result<Self, Invalid> {
        output("out", out)?;
        Ok(Self {
            vocabulary: vocabulary.to_path_buf(),
            input: input.to_path_buf(),
            labels: labels.map(Path::to_path_buf),
            out: out.to_path_buf(),
            params: options.params()?,
            options: options.clone(),
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
    pub engine: Engine,
    /// Broadcast algorithm of a distributed run.
    pub broadcast: BroadcastAlgorithm,
    /// Stage-1 (local) aggregation of a distributed run.
    pub local_aggregation: bool,
    /// Chain order of a distributed run.
    pub order: OrderArg,
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

/// Where k-means runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Engine {
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

impl Engine {
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
    kernel: KernelArg,
    assign: AssignArg,
    lists: Option<u32>,
    probes: u32,
) -> Result<Assignment, Invalid> {
    match assign {
        AssignArg::Exact => {
            if let Some(l) = lists {
                return Err(Invalid::new(
                    "lists",
                    l,
                    "sets up the approximate search: add assign approx",
                ));
            }
            Ok(Assignment::new(prune, kernel.into()))
        }
        AssignArg::Approx => {
            if prune {
                return Err(Invalid::new(
                    "prune",
                    true,
                    "bounds the exact search; the approximate one searches its probed lists \
                     (drop one of them)",
                ));
            }
            if kernel != KernelArg::F32 {
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
    engine: Option<EngineArg>,
    cluster: Option<&Path>,
    local_nodes: Option<usize>,
) -> Result<Engine, Invalid> {
    Ok(match (engine, cluster, local_nodes) {
        (Some(EngineArg::Mpi), None, None) => Engine::Mpi,
        (Some(EngineArg::Mpi), _, _) => {
            return Err(Invalid::new(
                "engine",
                "mpi",
                "runs on the ranks of the MPI job; --cluster and --local-nodes are for \
                 --engine tcp",
            ));
        }
        (_, Some(cluster), _) => Engine::Tcp {
            cluster: Some(cluster.to_path_buf()),
            local_nodes: 0,
        },
        (_, None, Some(n)) => {
            at_least("local_nodes", n, 1, " worker")?;
            Engine::Tcp {
                cluster: None,
                local_nodes: n,
            }
        }
        (Some(EngineArg::Tcp), None, None) => Engine::Tcp {
            cluster: None,
            local_nodes: 1,
        },
        (None, None, None) => Engine::Local,
    })
}

impl KmeansSettings {
    /// From `vocab kmeans`.
    pub fn from_args(args: &crate::cli::KmeansArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        let engine = engine_of(args.engine, args.cluster.as_deref(), args.local_nodes)?;
        if args.racks.is_some() && engine != Engine::Mpi {
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
        Self {
            features: args.features.clone(),
            out: args.out.clone(),
            format: args
                .format
                .map_or_else(|| format_for(&args.out), Format::from),
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
            broadcast: args.broadcast,
            local_aggregation: !args.no_local_aggregation,
            order: args.order,
            chunk_size,
            exit_after_iteration: args.exit_after_iteration,
            placed: None,
        }
        .checked()
    }

    /// Checks the rules across settings.
    pub fn checked(self) -> Result<Self, Invalid> {
        let distributed = self.engine.distributed();
        let init = self.init_centroids.is_none().then_some(self.init);
        kmeans_rules(self.k, (self.iterations, self.tol), init, self.assignment)?;
        if !distributed && self.order == OrderArg::Auto {
            return Err(Invalid::new(
                "order",
                "auto",
                "orders the chain of a distributed run; add --local-nodes, --cluster or \
                 --engine mpi",
            ));
        }
        // Partitions at the nodes: the folder there need not exist here (its manifest does).
        let here = self.placed.as_deref().unwrap_or(&self.features);
        if distributed && !here.is_dir() {
            return Err(Invalid::new(
                "features",
                self.features.display(),
                "a distributed run needs a partition folder (make one with vocab partition)",
            ));
        }
        Ok(self)
    }
}

/// Settings of `vocab train` and of the run's svm stage.
#[derive(Debug, Clone)]
pub struct TrainSettings {
    /// Histogram file.
    pub histograms: PathBuf,
    /// Labels CSV.
    pub labels: PathBuf,
    /// Attribute column.
    pub attribute: String,
    /// Fixed C (`None`: chosen by cross-validation).
    pub c: Option<f64>,
    /// Folds of the cross-validation.
    pub cv: usize,
    /// Solver.
    pub solver: SolverArg,
    /// Which photos train.
    pub split: Split,
    /// Seed of the split and of cross-validation.
    pub split_seed: u64,
    /// Explicit kernel map.
    pub kernel_map: KernelMapArg,
    /// Frequencies of the kernel map.
    pub map_order: usize,
    /// Model file.
    pub out: PathBuf,
}

/// Which photos a model trains on.
#[derive(Debug, Clone, PartialEq)]
pub enum Split {
    /// Every labelled photo.
    All,
    /// A seeded stratified split holding out this fraction of each class.
    Holdout(f64),
    /// A split file.
    File(PathBuf),
}

/// The SVM rules a config can break (`c = None`: chosen by cross-validation over `cv` folds).
pub fn svm_rules(c: Option<f64>, cv: usize, map_order: usize) -> Result<(), Invalid> {
    match c {
        Some(c) if !(c.is_finite() && c > 0.0) => {
            return Err(Invalid::new("c", c, "must be a positive number"));
        }
        Some(_) => {}
        None => at_least("cv", cv, 2, " folds")?,
    }
    if !(1..=MAX_MAP_ORDER).contains(&map_order) {
        return Err(Invalid::new(
            "map_order",
            map_order,
            format!("must be 1 to {MAX_MAP_ORDER}"),
        ));
    }
    Ok(())
}

impl TrainSettings {
    /// From `vocab train`.
    pub fn from_args(args: &crate::cli::TrainArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        svm_rules(args.c, args.cv, args.map_order)?;
        let split = match (&args.split, args.holdout) {
            (Some(path), _) => Split::File(path.clone()),
            (None, Some(h)) if h > 0.0 && h < 1.0 => Split::Holdout(h),
            (None, Some(h)) => {
                return Err(Invalid::new(
                    "holdout",
                    h,
                    "a fraction between 0 and 1 (0.5 holds out half)",
                ));
            }
            (None, None) => Split::All,
        };
        Ok(Self {
            histograms: args.histograms.clone(),
            labels: args.labels.clone(),
            attribute: args.attribute.clone(),
            c: args.c,
            cv: args.cv,
            solver: args.solver,
            split,
            split_seed: args.split_seed,
            kernel_map: args.kernel_map,
            map_order: args.map_order,
            out: args.out.clone(),
        })
    }
}

/// Settings of `vocab evaluate` and of the run's scoring.
#[derive(Debug, Clone)]
pub struct EvaluateSettings {
    /// Model file.
    pub model: PathBuf,
    /// Histogram file.
    pub histograms: PathBuf,
    /// Labels CSV.
    pub labels: PathBuf,
    /// Score only the photos the model held out.
    pub held_out: bool,
}

impl EvaluateSettings {
    /// From `vocab evaluate`.
    pub fn from_args(args: &crate::cli::EvaluateArgs) -> Self {
        Self {
            model: args.model.clone(),
            histograms: args.histograms.clone(),
            labels: args.labels.clone(),
            held_out: args.held_out,
        }
    }
}

/// Settings of `vocab classify`.
#[derive(Debug, Clone)]
pub struct ClassifySettings {
    /// Model file.
    pub model: PathBuf,
    /// Photos to label.
    pub input: PathBuf,
    /// CSV to write.
    pub out: PathBuf,
}

impl ClassifySettings {
    /// From `vocab classify`.
    pub fn from_args(args: &crate::cli::ClassifyArgs) -> Result<Self, Invalid> {
        output("out", &args.out)?;
        Ok(Self {
            model: args.model.clone(),
            input: args.input.clone(),
            out: args.out.clone(),
        })
    }
}

/// Settings of the synthetic photo set (`vocab datasets photos`, a config's
/// `[dataset.synthetic]`).
#[derive(Debug, Clone)]
pub struct PhotoSetSettings {
    /// Folder of the photos and labels.csv.
    pub out: PathBuf,
    /// Photos per scene kind.
    pub per_kind: usize,
    /// Generator seed.
    pub seed: u64,
}

impl PhotoSetSettings {
    /// Checks the settings.
    pub fn new(out: &Path, per_kind: usize, seed: u64) -> Result<Self, Invalid> {
        at_least("per_kind", per_kind, 1, " photo")?;
        Ok(Self {
            out: out.to_path_buf(),
            per_kind,
            seed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_rule_names_the_flag_or_the_key_with_the_value() {
        let e = EncodeOptions {
            pyramid: 9,
            ..EncodeOptions::default()
        }
        .params()
        .expect_err("pyramid 9");
        assert_eq!(e.flag(), "--pyramid 9: must be 1 to 5 levels");
        assert_eq!(e.to_string(), "pyramid = 9: must be 1 to 5 levels");
        let e = feature_params(Mode::Random, (0, 8, 0), None, 1).expect_err("no patches");
        assert_eq!(e.key, "per_image");
        let e = feature_params(Mode::Random, (5, 8, 0), Some(8), 1).expect_err("small side");
        assert!(e.flag().starts_with("--max-side 8:"), "{}", e.flag());
        let e = feature_params(Mode::Random, (5, 8, 0), None, u64::MAX).expect_err("overflow");
        assert_eq!(e.key, "max_pixels");
        assert!(
            EncodeOptions {
                soft: 1,
                ..EncodeOptions::default()
            }
            .params()
            .is_err()
        );
        assert!(svm_rules(None, 1, 3).is_err());
        assert!(svm_rules(Some(0.0), 1, 3).is_err());
        assert!(svm_rules(Some(1.0), 1, 3).is_ok());
        let rules = |k, iterations, tol| {
            kmeans_rules(
                k,
                (iterations, tol),
                Some(InitMethod::Random),
                Assignment::default(),
            )
        };
        assert_eq!(rules(0, 10, 0.0).expect_err("k = 0").key, "k");
        assert_eq!(
            rules(4, 0, 0.0).expect_err("no iterations").key,
            "iterations"
        );
        assert_eq!(rules(4, 10, f64::NAN).expect_err("NaN").key, "tol");
        assert!(rules(4, 10, 0.0).is_ok());
    }
}
