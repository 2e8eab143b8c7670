//! Settings of partition, k-means and the mixture, and their rules.

use std::path::{Path, PathBuf};

use vocab_pipeline::kmeans::InitMethod;
use vocab_pipeline::kmeans::Kernel;
use vocab_pipeline::kmeans::Search;
use vocab_pipeline::store::Element;

use vocab_pipeline::kmeans::{Assignment, Init, Params};
use vocab_pipeline::store::Format;

use crate::options::KmeansOptions;

use super::rules::{Invalid, Kind, apart, at_least, output};
use super::team_settings::{TeamSettings, team_rules};

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
/// same config keys): the approximate search searches its lists by either kernel, without
/// pruning; the exact one is pruned when `prune` says so, and by default with the integer kernel
/// ([`Assignment::exact`]).
pub fn assignment_of(
    prune: Option<bool>,
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
            Ok(Assignment::exact(prune, kernel))
        }
        Search::Approx => {
            if prune == Some(true) {
                return Err(Invalid::new(
                    "prune",
                    true,
                    "bounds the exact search; the approximate one searches its probed lists \
                     (drop one of them)",
                ));
            }
            at_least("probes", probes as usize, 1, " list")?;
            if let Some(l) = lists {
                at_least("lists", l as usize, 1, " list")?;
            }
            Ok(Assignment::Approx {
                lists: lists.unwrap_or(0),
                probes,
                kernel,
            })
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
    /// Take up the run from the checkpoint beside `team.out`.
    pub resume: bool,
    /// Fault injection: exit after checkpointing this EM step.
    pub exit_after_iteration: Option<u64>,
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
        team_rules(&team.engine, team.order, &team.features, None)?;
        Ok(Self {
            params,
            team,
            resume: args.resume,
            exit_after_iteration: args.exit_after_iteration,
        })
    }
}

impl KmeansSettings {
    /// `k` words by `options` (its learning keys: where it runs is `team`'s), over
    /// `team.features` into `team.out`; [`KmeansSettings::checked`] checks them.
    pub fn new(k: usize, options: &KmeansOptions, team: TeamSettings, format: Format) -> Self {
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
        let default = Assignment::default();
        let mut team = TeamSettings::of(&args.team, &args.features, &args.out, default)?;
        let format = super::rules::vectors_out("out", &args.out, args.format)?;
        team.assignment = args.options.assignment()?;
        Self {
            init_centroids: args.init_centroids.clone(),
            resume: args.resume,
            exit_after_iteration: args.exit_after_iteration,
            ..Self::new(args.k, &args.options, team, format)
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
