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

pub mod check;
mod dataset;
mod interrupt;
mod protocol;
mod report;
mod stages;
pub mod step;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, ensure};

use self::dataset::{Dataset, Overrides, Source};
use self::protocol::{Protocol, Trial};
use self::report::{Outcome, TrialResult, Vocabulary};
use self::step::{Runner, Stage, WorkLock};
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
    let print_plan = |photos, training, protocol: &str, trials, sizes, classes: Vec<usize>| {
        let photos = crate::plan::Photos {
            photos,
            training,
            protocol,
            trials,
            sizes,
            classes,
        };
        crate::plan::print(&config, args, &engine, &photos)
    };
    let source = match Source::resolve(&config, base, &overrides) {
        Ok(source) => source,
        // A plan of photos not at hand: `[plan] photos` says how many.
        Err(_) if args.plan && config.plan.photos.is_some() => {
            let photos = config.plan.photos.unwrap_or(0);
            let c = &config.classify;
            let split_by = c.split_by.as_deref().unwrap_or("the first attribute");
            // Without the labels the classes are known from `[plan] classes` or not at all: then
            // half the photos train, or fewer. With a test folder every photo trains; one that
            // is not here either is named as the config names it.
            let tested = config.dataset.test.is_some() || overrides.test.is_some();
            let (protocol, training) = match Protocol::resolve(&config, base, &overrides, None) {
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
            crate::plan::check_sizes(&config, &engine, training)?;
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
            return print_plan(photos, training, &protocol, c.trials, None, classes);
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
    } = count(&config, &source, &labels_text, &protocol)?;
    // Refused before any stage runs: a vocabulary larger than its sample, or too large here.
    crate::plan::check_sizes(&config, &engine, training)?;
    if args.plan {
        let folder = source.folder().unwrap_or(Path::new("the synthetic set"));
        let trials = protocol.trials().len();
        let (paths, classes) = dataset::paths_and_classes(&labels_text, &attributes)?;
        let sizes = source
            .folder()
            .and_then(|f| crate::plan::photo_sizes(f, &paths));
        return print_plan(
            photos,
            training,
            &protocol.describe(&split_by, folder),
            trials,
            sizes,
            classes,
        );
    }
    let work = args.work.clone().unwrap_or_else(|| {
        let stem = args
            .experiment
            .config
            .file_stem()
            .map_or("run".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("work").join(stem)
    });
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
    if let Source::Folder { photos, labels } = &source {
        crate::cli::guard::protect_config("[dataset] path", photos);
        crate::cli::guard::protect_config("[dataset] labels", labels);
    }
    if let Some((photos, labels)) = protocol.test_folder() {
        crate::cli::guard::protect_config("[dataset] test", photos);
        crate::cli::guard::protect_config("[dataset] test_labels", labels);
    }
    step::check_work_folder(&work)?;
    vocab_pipeline::output::create_dir_all(&work)
        .with_context(|| format!("cannot create work directory {}", work.display()))?;
    let _lock = WorkLock::acquire(&work)?;
    // Ctrl-C from here on: say where the run stopped, leave no temporary folder.
    let command: Vec<String> = std::env::args().collect();
    interrupt::watch(interrupt::resume_command(&command), work.clone());
    let mut runner = Runner::new(&work, args.force.as_deref())?;
    // The rack map: `--racks` (read when the MPI job started), else `[kmeans.racks]`.
    let mpi = mpi.map(|m| match (&args.racks, config.kmeans.racks.is_empty()) {
        (None, false) => crate::ranks::Mpi {
            racks: config.kmeans.racks.clone(),
            ..m.clone()
        },
        _ => m.clone(),
    });
    let mpi = mpi.as_ref();
    // The photo stages run where k-means does, sharded over the nodes.
    let on = crate::sharded::On {
        engine: &engine,
        mpi,
    };

    let dataset = match &source {
        Source::Synthetic(s) => {
            let generate = dataset::Generate(s.clone());
            let (dir, ()) = runner.run(&generate)?;
            Dataset::generated(&dir, generate.key())
        }
        Source::Folder { photos, labels } => Dataset::of_folder(photos, labels)?,
    };
    // Checked before any heavy stage: duplicate paths or an attribute with a single class would
    // otherwise surface only at the svm stage, after k-means and encoding ran.
    for a in &attributes {
        vocab_pipeline::classify::read_labels(&dataset.labels, a)
            .context("checking the labels before the first stage")?;
    }
    let test = match protocol.test_folder() {
        Some((photos, labels)) => {
            protocol::check_test_labels(&attributes, &dataset.labels, labels)?;
            let test = Dataset::of_folder(photos, labels)?;
            protocol::check_test_apart(&dataset, &test)?;
            Some(test)
        }
        None => None,
    };

    let chain = Chain {
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
        let sampled = chain.sample(&mut runner, &work, &trial)?;
        let (outcomes, vocabularies) =
            chain.vocabularies(&mut runner, &sampled, &attributes, &trial)?;
        trials.push(TrialResult {
            trial,
            sample: sampled.sample,
            outcomes,
            vocabularies,
            split_csv: sampled.split_csv.clone(),
        });
    }
    let protocol_text = protocol.describe(&split_by, &dataset.photos);

    // report (always rebuilt)
    let report_dir = work.join("report");
    let report_started = Instant::now();
    let dictionaries = if config.fisher() {
        report::Dictionaries::Mixtures
    } else {
        report::Dictionaries::Vocabularies
    };
    let report_run = report::Run {
        config: &args.experiment.config,
        dataset: &dataset,
        test: test.as_ref(),
        protocol: &protocol_text,
        attributes: &attributes,
        trials: &trials,
        steps: &runner.steps,
        dictionaries,
        mirrored: config.classify.mirror,
        words: &vocab_pipeline::montage::MontageParams {
            words: 16,
            patches: 8,
            photos: 300,
            per_image: 50,
            seed: config.features.seed,
            zoom: 2,
            max_side: config.features.max_side,
            max_pixels: config.features.max_pixels.saturating_mul(1_000_000),
        },
    };
    report::write(&report_dir, &report_run)?;
    let headline = report::headline(&report_run, &report::summarise(&trials))?;
    runner.steps.push(step::Step {
        stage: "report",
        label: "report".into(),
        key: String::new(),
        seconds: report_started.elapsed().as_secs_f64(),
        cached: false,
    });
    report::summary(
        &runner.steps,
        &report::summarise(&trials),
        &headline,
        dictionaries,
    );
    println!(
        "run: {} finished in {:.1} s; report in {}",
        args.experiment.config.display(),
        started.elapsed().as_secs_f64(),
        report_dir.join("report.md").display()
    );
    Ok(())
}

/// What every step of one run shares.
struct Chain<'a> {
    config: &'a Config,
    dataset: &'a Dataset,
    /// The labels' text.
    labels: &'a str,
    /// The attribute the split is stratified by.
    split_by: &'a str,
    engine: &'a Backend,
    /// Where the photo stages run.
    on: crate::sharded::On<'a>,
    mpi: Option<&'a crate::ranks::Mpi<'a>>,
    ui: &'a Ui,
    /// Fault injection (`--exit-after-iteration`).
    exit_after_iteration: Option<u64>,
    /// The test folder, when the run scores one.
    test: Option<&'a Dataset>,
}

/// What the sample's steps made: the keys later steps depend on, the split, the partitions.
struct Sampled {
    features_key: String,
    sample: stages::Sample,
    split_csv: PathBuf,
    partition_key: String,
    /// The partition folder (as the members see it when they lie at the nodes).
    parts: PathBuf,
    /// Partitions made on the nodes: their folder as they see it, and the manifest's copy here.
    placed: Option<(PathBuf, PathBuf)>,
}

impl Chain<'_> {
    /// The features and partition steps in `work`.
    fn sample(&self, runner: &mut Runner, work: &Path, trial: &Trial) -> anyhow::Result<Sampled> {
        // `[partition] at = "nodes"` on a distributed engine: the nodes keep their patches as
        // partitions under this folder (as every node sees it; the driver keeps the manifest there).
        let wants_born =
            self.config.partition.at == config::PartitionAt::Nodes && self.engine.distributed();
        let nodes = match &self.config.partition.folder {
            Some(f) if f.is_absolute() => f.clone(),
            Some(f) => work.join(f),
            None => work.join("nodes"),
        };
        // The nodes write there, in processes that know nothing of this run's inputs: the folder
        // (up to a per-node `{node}` part) is checked here, as any output of the run.
        if wants_born {
            let text = nodes.to_string_lossy();
            let fixed = text
                .find('{')
                .map_or(nodes.clone(), |at| Path::new(&text[..at]).to_path_buf());
            vocab_pipeline::output::check(&fixed).with_context(|| {
                format!(
                    "[partition] folder {}: where the nodes write",
                    nodes.display()
                )
            })?;
        }
        // A folder named per node (`{node}`) is made by each node.
        if wants_born && !nodes.to_string_lossy().contains('{') {
            vocab_pipeline::output::create_dir_all(&nodes)
                .with_context(|| format!("cannot create {}", nodes.display()))?;
        }
        let nodes = std::path::absolute(&nodes)
            .with_context(|| format!("cannot resolve {}", nodes.display()))?;
        let features = stages::Features {
            config: self.config,
            dataset: self.dataset,
            labels: self.labels,
            split_by: self.split_by,
            on: self.on,
            nodes: &nodes,
            born: wants_born,
            ui: self.ui,
            trial,
        };
        let features_key = features.key();
        let (features_dir, sample) = runner.run(&features)?;
        let sample_file = features_dir.join(features.file());
        let split_csv = features_dir.join("split.csv");

        // Where the step left the sample decides where the partitions are, whatever this run
        // wanted: a cached sample here is split here and read by the nodes from this folder.
        let made = features.made(&features_dir);
        if wants_born && made == Some(stages::Made::Here) {
            println!(
                "  the sample is here ({}): partitions are split here, and the nodes read them from \
                 this folder",
                features_dir.display()
            );
        }
        // Born on the nodes: their folder as they see it, and the manifest's copy here.
        let placed = (made == Some(stages::Made::AtNodes))
            .then(|| (features.nodes_dir(), features_dir.join("parts")));
        let suffix = trial.suffix();
        let partition = stages::Partition {
            config: self.config,
            suffix: &suffix,
            features_key: &features_key,
            sample: &sample_file,
            placed: placed.as_ref().map(|(n, h)| (n.as_path(), h.as_path())),
        };
        let partition_key = partition.key();
        let (parts_dir, ()) = runner.run(&partition)?;
        let parts =
            (placed.as_ref()).map_or_else(|| parts_dir.join("parts"), |(nodes, _)| nodes.clone());
        Ok(Sampled {
            features_key,
            sample,
            split_csv,
            partition_key,
            parts,
            placed,
        })
    }

    /// A vocabulary per `k`, each encoding every photo and training a model per attribute of
    /// `attributes`; returns the scores and the vocabularies.
    fn vocabularies(
        &self,
        runner: &mut Runner,
        sampled: &Sampled,
        attributes: &[String],
        trial: &Trial,
    ) -> anyhow::Result<(Vec<Outcome>, Vec<Vocabulary>)> {
        let mut outcomes = Vec::new();
        let mut vocabularies = Vec::new();
        let suffix = trial.suffix();
        // One process reads partitions made on the nodes in place (their folder is whole here,
        // or the features step would have been made again).
        let placed = (sampled.placed.as_ref())
            .filter(|_| self.engine.distributed())
            .map(|(_, here)| here.as_path());
        for &k in self.config.sizes() {
            let (kmeans_key, vocabulary) = if self.config.fisher() {
                let mixture = stages::Mixture {
                    config: self.config,
                    suffix: &suffix,
                    partition_key: &sampled.partition_key,
                    parts: &sampled.parts,
                    components: k,
                    engine: self.engine,
                    placed,
                    ui: self.ui,
                    mpi: self.mpi,
                };
                let (dir, _) = runner.run(&mixture)?;
                (mixture.key(), dir.join("mixture.json"))
            } else {
                let kmeans = stages::Kmeans {
                    config: self.config,
                    suffix: &suffix,
                    partition_key: &sampled.partition_key,
                    parts: &sampled.parts,
                    k,
                    engine: self.engine,
                    exit_after_iteration: self.exit_after_iteration,
                    placed,
                    ui: self.ui,
                    mpi: self.mpi,
                };
                let (kmeans_dir, fitted) = runner.run(&kmeans)?;
                let vocabulary = kmeans_dir.join("vocabulary.bin");
                vocabularies.push(Vocabulary {
                    k,
                    path: vocabulary.clone(),
                    meta: fitted.meta,
                    per_iteration: fitted.per_iteration,
                });
                (kmeans.key(), vocabulary)
            };
            let encode = stages::Encode {
                config: self.config,
                suffix: &suffix,
                dataset: self.dataset,
                kmeans_key: &kmeans_key,
                k,
                vocabulary: &vocabulary,
                on: self.on,
                ui: self.ui,
                mirrored: None,
            };
            let encode_key = encode.key();
            let (encode_dir, ()) = runner.run(&encode)?;
            let histograms = encode_dir.join("histograms.bin");
            // The training photos mirrored, to train beside them.
            let training = sampled.split_csv.with_file_name("train.csv");
            let mirrored = if self.config.classify.mirror {
                let encode = stages::Encode {
                    mirrored: Some((&sampled.features_key, &training)),
                    ..encode
                };
                let (dir, ()) = runner.run(&encode)?;
                Some((encode.key(), dir.join("histograms.bin")))
            } else {
                None
            };
            // The test folder's photos over the same vocabulary.
            let tested = match self.test {
                Some(test) => {
                    let encode = stages::Encode {
                        config: self.config,
                        suffix: "-test",
                        dataset: test,
                        kmeans_key: &kmeans_key,
                        k,
                        vocabulary: &vocabulary,
                        on: self.on,
                        ui: self.ui,
                        mirrored: None,
                    };
                    let (dir, ()) = runner.run(&encode)?;
                    Some((encode.key(), dir.join("histograms.bin")))
                }
                None => None,
            };
            let tables = stages::Tables::default();
            for attribute in attributes {
                let svm = stages::Svm {
                    config: self.config,
                    dataset: self.dataset,
                    encode_key: &encode_key,
                    features_key: &sampled.features_key,
                    k,
                    attribute,
                    histograms: &histograms,
                    mirrored: (mirrored.as_ref()).map(|(key, path)| (key.as_str(), path.as_path())),
                    split: &sampled.split_csv,
                    suffix: &suffix,
                    seed: trial.seed,
                    ui: self.ui,
                    tables: &tables,
                    test: self
                        .test
                        .zip(tested.as_ref())
                        .map(|(dataset, (key, histograms))| stages::Test {
                            dataset,
                            encode_key: key,
                            histograms,
                        }),
                };
                let (_, scores) = runner.run(&svm)?;
                outcomes.push(Outcome {
                    k,
                    attribute: attribute.clone(),
                    scores,
                });
            }
        }
        Ok((outcomes, vocabularies))
    }
}

/// A dataset's attributes, split column and sizes.
struct Counted {
    attributes: Vec<String>,
    split_by: String,
    photos: u64,
    training: u64,
}

/// The sizes of the protocol's first trial (every trial's are alike), with the test folder's
/// labelled photos among the photos.
fn count(
    config: &Config,
    source: &Source,
    labels_text: &str,
    protocol: &Protocol,
) -> anyhow::Result<Counted> {
    let source_path = source.labels_name();
    let (attributes, split_by) = columns(config, &source_path, labels_text)?;
    let first = protocol.trials()[0];
    let split = dataset::split(labels_text, &source_path, &split_by, first.seed, first.rule)?;
    let tested = match protocol.test_folder() {
        Some((_, labels)) => {
            let text =
                vocab_pipeline::input::read_text(labels, vocab_pipeline::input::MAX_LABELS_BYTES)
                    .with_context(|| format!("cannot read test labels {}", labels.display()))?;
            dataset::photo_count(&text, labels)?
        }
        None => 0,
    };
    Ok(Counted {
        attributes,
        split_by,
        photos: split.len() as u64 + tested,
        training: split.iter().filter(|(_, t)| *t).count() as u64,
    })
}

/// The attributes a run learns and the column its splits are stratified by.
fn columns(config: &Config, labels: &Path, text: &str) -> anyhow::Result<(Vec<String>, String)> {
    let attributes = dataset::attributes(config, text, labels)?;
    let split_by = config
        .classify
        .split_by
        .clone()
        .unwrap_or_else(|| attributes[0].clone());
    Ok((attributes, split_by))
}

/// `vocab config check`'s look at the data: the sizes of the config's dataset checked, when it
/// is at hand here; what was checked, for people.
pub fn check_dataset(overrides: &Overrides<'_>, config: &Config) -> anyhow::Result<String> {
    let base = overrides.config.parent().unwrap_or(Path::new("."));
    let source = match Source::resolve(config, base, overrides) {
        Ok(source) => source,
        // Photos named on the command line must be there; the config's may be elsewhere.
        Err(e)
            if overrides.dataset.is_some()
                || overrides.labels.is_some()
                || overrides.test.is_some() =>
        {
            return Err(e);
        }
        Err(e) => return Ok(format!("photos not checked: {e:#}")),
    };
    let protocol = Protocol::resolve(config, base, overrides, source.folder())?;
    let engine = engine(config, base, None, None, None)?;
    let labels_text = source.labels_text()?;
    let counted = count(config, &source, &labels_text, &protocol)?;
    if let (Some((test, test_labels)), Source::Folder { labels, .. }) =
        (protocol.test_folder(), &source)
    {
        protocol::check_test_labels(&counted.attributes, labels, test_labels)?;
        // Its photos as a run would find them: paths inside the test folder only.
        vocab_pipeline::image_io::Collection::open(test, Some(test_labels))
            .context("checking the test folder's labels before the first stage")?;
    }
    crate::plan::check_sizes(config, &engine, counted.training)?;
    Ok(format!(
        "{} photos, {} train the vocabulary; {}",
        counted.photos,
        counted.training,
        protocol.describe(
            &counted.split_by,
            source.folder().unwrap_or(Path::new("the synthetic set"))
        )
    ))
}

/// Fills in the defaults of `config` that its labels decide (`[classify] attributes`: every
/// column but `path`; `split_by`: the first attribute) as `vocab run` would; returns the labels
/// read, or `None` when the config's photos are not at hand.
pub fn fill_label_defaults(config: &mut Config, path: &Path) -> anyhow::Result<Option<PathBuf>> {
    let base = path.parent().unwrap_or(Path::new("."));
    let overrides = Overrides {
        config: path,
        dataset: None,
        labels: None,
        test: None,
        test_labels: None,
    };
    let Ok(source) = Source::resolve(config, base, &overrides) else {
        return Ok(None);
    };
    let (attributes, split_by) = columns(config, &source.labels_name(), &source.labels_text()?)?;
    config.classify.attributes = attributes;
    config.classify.split_by = Some(split_by);
    Ok(Some(match &source {
        Source::Folder { labels, .. } => labels.clone(),
        Source::Synthetic(_) => PathBuf::from("the synthetic set's labels.csv"),
    }))
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
