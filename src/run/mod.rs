//! `vocab run CONFIG`: the stages of a config as a chain of cached steps.
//!
//! ```text
//! dataset -> features (split + random patches of the training half) -> partition
//!         -> kmeans (per k) -> encode (per k) -> svm (per k and attribute) -> report
//! ```
//!
//! Each stage is a [`step::Stage`] (name, cache key, run into a temporary folder, output);
//! [`step::Runner`] skips the finished ones and renames the others into place when they finish.
//! Outputs pass to later stages in memory; the report is rebuilt on every run.

mod chain;
pub mod check;
pub mod clean;
mod dataset;
mod encodings;
mod interrupt;
mod protocol;
mod report;
mod stages;
pub mod step;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, ensure};

use self::chain::Chain;
use self::dataset::{Dataset, Overrides, Source};
use self::protocol::{Counted, Protocol};
use self::report::TrialResult;
use self::step::{Runner, WorkLock};
use crate::cli::RunArgs;
use crate::config::{self, Config};
use crate::progress::Ui;
use crate::settings::{Backend, OrFlag};
use vocab_cluster::net::transport::Kind as TransportKind;

/// `vocab run`.
pub fn run(args: &RunArgs, ui: &Ui, mpi: Option<&crate::ranks::Mpi<'_>>) -> anyhow::Result<()> {
    let started = Instant::now();
    let config = config::load(&args.experiment.config)?;
    let base = args.experiment.config.parent().unwrap_or(Path::new("."));
    let engine = engine(&config, base, args.cluster.as_deref(), args.engine, mpi)?;
    let overrides = Overrides::of(&args.experiment);
    let print_plan =
        |photos: crate::plan::Photos<'_>| crate::plan::print(&config, args, &engine, &photos);
    let source = match Source::resolve(&config, base, &overrides) {
        Ok(source) => source,
        // A plan of photos not at hand: `[plan] photos` says how many.
        Err(_) if args.plan && config.plan.photos.is_some() => {
            let (photos, training, protocol, classes) =
                plan_without_photos(&config, base, &overrides, &engine)?;
            let trials = config.classify.trials;
            let (protocol, sizes, here) = (protocol.as_str(), None, None);
            return print_plan(crate::plan::Photos {
                photos,
                training,
                protocol,
                trials,
                sizes,
                classes,
                here,
            });
        }
        Err(e) => return Err(e),
    };
    let protocol = Protocol::resolve(&config, base, &overrides, source.folder())?;
    let labels_text = source.labels_text()?;
    let Counted {
        attributes,
        split_by,
        photos,
        training,
    } = protocol::count(&config, &source, &labels_text, &protocol)?;
    // Refused before any stage runs: a vocabulary larger than its sample, or too large here.
    crate::plan::check_sizes(&config, &engine, training)?;
    if args.plan {
        let counted = (photos, training, attributes.as_slice(), split_by.as_str());
        let photos = (&source, &protocol, labels_text.as_str(), counted);
        return plan_here(&config, args, &engine, photos);
    }
    let work = work_folder(args, &source, &protocol)?;
    step::check_work_folder(&work)?;
    vocab_pipeline::output::create_dir_all(&work)
        .with_context(|| format!("cannot create work directory {}", work.display()))?;
    let _lock = WorkLock::acquire(&work)?;
    // Ctrl-C from here on: say where the run stopped, leave no temporary folder.
    let command: Vec<String> = std::env::args().collect();
    interrupt::watch(interrupt::resume_command(&command), work.clone());
    let mut runner = Runner::new(&work, args.force.as_deref())?;
    let mpi = mpi.map(|m| with_racks(m, args, &config));
    let mpi = mpi.as_ref();
    // The photo stages run where k-means does, sharded over the nodes.
    let on = crate::sharded::On {
        engine: &engine,
        mpi,
    };

    let dataset =
        Dataset::of_source(&source, &mut runner)?.reading(config.features.from.as_deref())?;
    let test = datasets_checked(&dataset, &protocol, &attributes)?;
    let parts = config.parts();
    let chain = Chain {
        joined: parts.get(1..).unwrap_or_default(),
        config: &config,
        dataset: &dataset,
        labels: &labels_text,
        split_by: &split_by,
        engine: &engine,
        on,
        mpi,
        ui,
        exit_after_iteration: args.exit_after_iteration,
        test: test.as_ref(),
    };
    let trials = trials(&chain, &mut runner, &work, &protocol, &attributes)?;
    let protocol_text = protocol.describe(&split_by, &dataset.photos);
    let report_dir = work.join("report");
    let config_path = &args.experiment.config;
    let what = (
        config_path.as_path(),
        protocol_text.as_str(),
        &attributes[..],
    );
    report(&chain, &mut runner, &report_dir, what, &trials)?;
    println!(
        "run: {} finished in {:.1} s; report in {}",
        args.experiment.config.display(),
        started.elapsed().as_secs_f64(),
        report_dir.join("report.md").display()
    );
    Ok(())
}

/// The MPI job with its rack map: `--racks` (read when the job started), else `[kmeans.racks]`.
fn with_racks<'a>(
    mpi: &crate::ranks::Mpi<'a>,
    args: &RunArgs,
    config: &Config,
) -> crate::ranks::Mpi<'a> {
    match (&args.racks, config.kmeans.racks.is_empty()) {
        (None, false) => crate::ranks::Mpi {
            racks: config.kmeans.racks.clone(),
            ..mpi.clone()
        },
        _ => mpi.clone(),
    }
}

/// Every trial of the protocol through `chain`: its sample and partitions, its dictionaries,
/// encodings and models.
fn trials(
    chain: &Chain<'_>,
    runner: &mut Runner,
    work: &Path,
    protocol: &Protocol,
    attributes: &[String],
) -> anyhow::Result<Vec<TrialResult>> {
    let mut trials = Vec::new();
    for trial in protocol.trials() {
        if trial.of > 1 {
            println!(
                "== trial {} of {} (split seed {})",
                trial.index + 1,
                trial.of,
                trial.seed
            );
        }
        let mut samples = chain.samples(runner, work, &trial)?;
        let (outcomes, vocabularies, mixtures) =
            chain.vocabularies(runner, &samples, attributes, &trial)?;
        let sampled = samples.swap_remove(0);
        trials.push(TrialResult {
            trial,
            sample: sampled.sample,
            outcomes,
            vocabularies,
            mixtures,
            split_csv: sampled.split_csv.clone(),
        });
    }
    Ok(trials)
}

/// The report, always rebuilt, in `dir` from the run's trials (`config`, `protocol` and
/// `attributes` as the report names them), and the run's one-screen summary.
fn report(
    chain: &Chain<'_>,
    runner: &mut Runner,
    dir: &Path,
    (config, protocol, attributes): (&Path, &str, &[String]),
    trials: &[TrialResult],
) -> anyhow::Result<()> {
    let started = Instant::now();
    let dictionaries = dictionaries(chain.config);
    let run = report::Run {
        config,
        dataset: chain.dataset,
        test: chain.test,
        protocol,
        attributes,
        trials,
        steps: &runner.steps,
        dictionaries,
        mirrored: chain.config.classify.mirror,
        words: &montage(chain.config),
    };
    report::write(dir, &run)?;
    let summarised = report::summarise(trials);
    let headline = report::headline(&run, &summarised)?;
    runner.steps.push(step::Step {
        stage: "report",
        label: "report".into(),
        key: String::new(),
        seconds: started.elapsed().as_secs_f64(),
        cached: false,
    });
    report::summary(&runner.steps, &summarised, &headline, dictionaries);
    Ok(())
}

/// What the run's dictionaries are: the mixtures of Fisher vectors, or vocabularies.
fn dictionaries(config: &Config) -> report::Dictionaries {
    if config.fisher() {
        report::Dictionaries::Mixtures
    } else {
        report::Dictionaries::Vocabularies
    }
}

/// How the report draws the words: the 16 most used, 8 patches each, from the sample's photos
/// as the features stage read them.
fn montage(config: &Config) -> vocab_pipeline::montage::MontageParams {
    vocab_pipeline::montage::MontageParams {
        words: 16,
        patches: 8,
        photos: 300,
        per_image: 50,
        seed: config.features.seed,
        zoom: 2,
        max_side: config.features.max_side,
        patch: config.features.patch,
        max_pixels: config.features.max_pixels.saturating_mul(1_000_000),
    }
}

/// What `--plan` says of photos that are not at hand (`[plan] photos` says how many): the
/// photos, those that train, the protocol, and the classes of each attribute.
/// Photos, training photos, the attributes learned and the one the split is by.
type Counts<'a> = (u64, u64, &'a [String], &'a str);

/// `--plan` of photos at hand: `source`, split by `protocol`, labelled by `labels`, of which
/// `training` of the `photos` train (attributes learned and the one split by).
fn plan_here(
    config: &Config,
    args: &RunArgs,
    engine: &Backend,
    (source, protocol, labels, counted): (&Source, &Protocol, &str, Counts<'_>),
) -> anyhow::Result<()> {
    let (photos, training, attributes, split_by) = counted;
    let folder = source.folder().unwrap_or(Path::new("the synthetic set"));
    let trials = protocol.trials().len();
    let (paths, classes) = dataset::paths_and_classes(labels, attributes)?;
    let sizes = (source.folder()).and_then(|f| crate::plan::photo_sizes(f, &paths));
    let protocol = &protocol.describe(split_by, folder);
    let here = source.folder().map(|f| (f, paths.as_slice()));
    let photos = crate::plan::Photos {
        photos,
        training,
        protocol,
        trials,
        sizes,
        classes,
        here,
    };
    crate::plan::print(config, args, engine, &photos)
}

fn plan_without_photos(
    config: &Config,
    base: &Path,
    overrides: &Overrides<'_>,
    engine: &Backend,
) -> anyhow::Result<(u64, u64, String, Vec<usize>)> {
    let photos = config.plan.photos.unwrap_or(0);
    let c = &config.classify;
    let split_by = c.split_by.as_deref().unwrap_or("the first attribute");
    // Without the labels the classes are known from `[plan] classes` or not at all: then
    // half the photos train, or fewer. With a test folder every photo trains; one that
    // is not here either is named as the config names it.
    let tested = config.dataset.test.is_some() || overrides.test.is_some();
    let (protocol, training) = match Protocol::resolve(config, base, overrides, None) {
        Ok(p @ Protocol::TestFolder { .. }) => {
            (p.describe(split_by, Path::new("the photo folder")), photos)
        }
        Ok(p) => {
            let training = match (c.train_per_class, config.plan.classes) {
                (Some(n), Some(classes)) => (n as u64).saturating_mul(classes).min(photos),
                _ => photos.div_ceil(2),
            };
            (
                p.describe(split_by, Path::new("the photo folder")),
                training,
            )
        }
        Err(_) if tested => (
            "every photo trains, the test folder is scored ([dataset] test)".to_string(),
            photos,
        ),
        Err(e) => return Err(e),
    };
    crate::plan::check_sizes(config, engine, training)?;
    let protocol = format!("{protocol} ([plan] photos; the photos are not here)");
    // Each attribute two classes, but `split_by`'s `[plan] classes`.
    let attributes = c.attributes.clone();
    let classes = if attributes.is_empty() {
        vec![config.plan.classes.map_or(2, |n| n as usize)]
    } else {
        (attributes.iter())
            .map(|a| match config.plan.classes {
                Some(n) if Some(a.as_str()) == c.split_by.as_deref() => n as usize,
                _ => 2,
            })
            .collect()
    };
    Ok((photos, training, protocol, classes))
}

/// The run's work folder (`--work`, or `work/<config name>`), refused inside the photos it
/// reads; the config's photos and labels become inputs no step writes to.
fn work_folder(args: &RunArgs, source: &Source, protocol: &Protocol) -> anyhow::Result<PathBuf> {
    let work = (args.work.clone()).unwrap_or_else(|| step::default_work(&args.experiment.config));
    // Steps written inside the photo folder would change its fingerprint on every run: nothing
    // would ever be cached, and old steps would pile up.
    for (photos, what) in [
        (source.folder(), "photo folder"),
        (protocol.test_folder().map(|(p, _)| p), "test folder"),
    ] {
        if let Some(photos) = photos {
            ensure!(
                !crate::settings::inside(&work, photos),
                "the work directory {} lies inside the {what} {}: every run would change the \
                 photos' fingerprint and redo every step; choose a work directory elsewhere \
                 (--work)",
                work.display(),
                photos.display()
            );
        }
    }
    // What the config names is an input like the command line's paths: no step writes there.
    if let Source::Folder { photos, labels } = source {
        crate::cli::guard::protect_config("[dataset] path", photos);
        crate::cli::guard::protect_config("[dataset] labels", labels);
    }
    if let Some((photos, labels)) = protocol.test_folder() {
        crate::cli::guard::protect_config("[dataset] test", photos);
        crate::cli::guard::protect_config("[dataset] test_labels", labels);
    }
    Ok(work)
}

/// The labels checked before any heavy stage (duplicate paths or an attribute with a single
/// class would otherwise surface only at the svm stage, after k-means and encoding ran), and
/// the test folder's photos, checked apart from the dataset's.
fn datasets_checked(
    dataset: &Dataset,
    protocol: &Protocol,
    attributes: &[String],
) -> anyhow::Result<Option<Dataset>> {
    for a in attributes {
        vocab_pipeline::classify::read_labels(&dataset.labels, a)
            .context("checking the labels before the first stage")?;
    }
    let Some((photos, labels)) = protocol.test_folder() else {
        return Ok(None);
    };
    protocol::check_test_labels(attributes, &dataset.labels, labels)?;
    let test = Dataset::of_folder(photos, labels)?.reading(protocol.test_descriptors())?;
    protocol::check_test_apart(dataset, &test)?;
    Ok(Some(test))
}

/// Where the run's distributed stages go ([`Backend::of`]): `--engine`, `--cluster` or
/// `[kmeans] cluster`, loopback workers (`[kmeans] nodes`, none under MPI), or this process;
/// `mpi`, the MPI job this process is rank 0 of.
fn engine(
    config: &Config,
    base: &Path,
    cluster: Option<&Path>,
    engine: Option<TransportKind>,
    mpi: Option<&crate::ranks::Mpi<'_>>,
) -> anyhow::Result<Backend> {
    let km = &config.kmeans;
    let cluster = cluster
        .map(Path::to_path_buf)
        .or_else(|| km.cluster.as_ref().map(|c| base.join(c)));
    let nodes = (engine != Some(TransportKind::Mpi) && km.nodes > 0).then_some(km.nodes);
    let engine = Backend::of(engine, cluster.as_deref(), nodes).or_flag()?;
    crate::nodes::check(&engine, mpi)?;
    Ok(engine)
}
