//! `vocab run CONFIG`: the stages of a config as a chain of cached steps.
//!
//! ```text
//! dataset -> features (split + random patches of the training half) -> partition
//!         -> kmeans (per k) -> encode (per k) -> svm (per k and attribute) -> report
//! ```
//!
//! Every step's output is a folder `WORK/<stage>/<label>-<key>/`, where `key` hashes the step's
//! own settings with the keys of its inputs (and, for a photo folder, the names, sizes and
//! modification times of its files; for a labels file, its bytes). A step runs in
//! `WORK/<stage>/.tmp-<label>-<key>/`, and only a finished step is renamed to its key: a folder
//! with a key is complete by construction, so a re-run skips it, a changed setting changes the
//! keys of exactly the steps that depend on it, and an interrupted step is redone (k-means resumes
//! from the checkpoint in its temporary folder). The report is rebuilt on every run.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::cli::{
    EncodeArgs, EngineArg, EvaluateArgs, FileFormat, KernelArg, KernelMapArg, KmeansArgs, Mode,
    PartitionArgs, PhotosArgs, RunArgs, TrainArgs,
};
use crate::config;
use crate::progress::Ui;
use crate::report::{self, Series};
use crate::stages::{self, FeatureSettings};

/// The stages, in order (the names `--force` takes).
pub const STAGES: [&str; 7] = [
    "dataset",
    "features",
    "partition",
    "kmeans",
    "encode",
    "svm",
    "report",
];

/// A step's record in the run summary.
#[derive(Debug, Clone)]
struct Step {
    stage: &'static str,
    label: String,
    key: String,
    seconds: f64,
    cached: bool,
}

/// One vocabulary's outcome.
#[derive(Debug, Clone)]
struct Outcome {
    k: usize,
    attribute: String,
    accuracy: f64,
    balanced_accuracy: f64,
    held_out: u64,
}

struct Runner {
    work: PathBuf,
    force_from: Option<usize>,
    steps: Vec<Step>,
}

/// The first 6 bytes of the SHA-256 of `bytes`, in hex: a step key or a fingerprint.
fn short_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn digest(value: &serde_json::Value) -> String {
    short_hash(value.to_string().as_bytes())
}

impl Runner {
    /// Runs `body` in the step's temporary folder unless the step's folder exists; returns the
    /// step's folder.
    fn step(
        &mut self,
        stage: &'static str,
        label: &str,
        key: &str,
        body: impl FnOnce(&Path) -> anyhow::Result<()>,
    ) -> anyhow::Result<PathBuf> {
        let dir = self.work.join(stage);
        let done = dir.join(format!("{label}-{key}"));
        let index = STAGES.iter().position(|s| *s == stage).unwrap_or(0);
        let forced = self.force_from.is_some_and(|f| index >= f);
        if done.is_dir() && !forced {
            println!("== {stage} {label}: cached ({})", done.display());
            self.steps.push(Step {
                stage,
                label: label.to_string(),
                key: key.to_string(),
                seconds: 0.0,
                cached: true,
            });
            return Ok(done);
        }
        if done.is_dir() {
            std::fs::remove_dir_all(&done)
                .with_context(|| format!("cannot remove {} for --force", done.display()))?;
        }
        let tmp = dir.join(format!(".tmp-{label}-{key}"));
        if tmp.is_dir() {
            // A run was interrupted here. k-means resumes from the checkpoint it left; every
            // other stage starts over, so no half-written file of the killed run survives into
            // the finished step.
            if stage == "kmeans" {
                remove_partial_files(&tmp)?;
            } else {
                std::fs::remove_dir_all(&tmp)
                    .with_context(|| format!("cannot clear {}", tmp.display()))?;
            }
        }
        std::fs::create_dir_all(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        println!("== {stage} {label}");
        let started = Instant::now();
        body(&tmp).with_context(|| format!("stage {stage} ({label})"))?;
        let seconds = started.elapsed().as_secs_f64();
        let record = format!(
            "stage = \"{stage}\"\nlabel = \"{label}\"\nkey = \"{key}\"\nseconds = {seconds}\n"
        );
        vocab_pipeline::atomic::write(&tmp.join("step.toml"), record.as_bytes())
            .with_context(|| format!("cannot write the record of {}", tmp.display()))?;
        std::fs::rename(&tmp, &done)
            .with_context(|| format!("cannot rename {} to {}", tmp.display(), done.display()))?;
        self.steps.push(Step {
            stage,
            label: label.to_string(),
            key: key.to_string(),
            seconds,
            cached: false,
        });
        Ok(done)
    }
}

/// Removes the temporary files of interrupted atomic writes under `dir`.
fn remove_partial_files(dir: &Path) -> anyhow::Result<()> {
    for entry in walkdir::WalkDir::new(dir) {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy();
        if entry.file_type().is_file() && name.starts_with(vocab_pipeline::atomic::TEMP_PREFIX) {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// An exclusive lock on a work directory for one `vocab run` (`WORK/.lock`, `flock`): a second
/// run on the same directory is refused, naming the holder. The kernel releases the lock when
/// the holder exits, however it exits.
struct WorkLock {
    _file: std::fs::File,
}

impl WorkLock {
    fn acquire(work: &Path) -> anyhow::Result<Self> {
        let path = work.join(".lock");
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        #[cfg(unix)]
        {
            use std::io::{Read as _, Seek as _, Write as _};
            use std::os::unix::io::AsRawFd;
            // SAFETY: flock on a descriptor this function owns; no memory is shared.
            let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if locked != 0 {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                bail!(
                    "work directory {} is in use by another vocab run ({}); wait for it to end \
                     or pass another --work",
                    work.display(),
                    holder.trim()
                );
            }
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            file.set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| {
                    write!(
                        file,
                        "pid {} on {} since unix time {since}",
                        std::process::id(),
                        host.trim()
                    )
                })
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(Self { _file: file })
    }
}

/// Names, sizes and modification times of every file under `dir`, hashed.
fn folder_fingerprint(dir: &Path) -> anyhow::Result<String> {
    let mut entries = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        if entry.file_type().is_file() {
            let meta = entry
                .metadata()
                .with_context(|| format!("cannot stat {}", entry.path().display()))?;
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            let rel = entry.path().strip_prefix(dir).unwrap_or(entry.path());
            entries.push(json!([
                rel.to_string_lossy(),
                meta.len(),
                mtime.to_string()
            ]));
        }
    }
    ensure!(!entries.is_empty(), "{} holds no files", dir.display());
    Ok(digest(&json!(entries)))
}

fn file_fingerprint(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(short_hash(&bytes))
}

/// Attribute columns of a labels CSV (all but the first, `path`).
fn label_columns(labels: &Path) -> anyhow::Result<Vec<String>> {
    let mut reader = csv::Reader::from_path(labels)
        .with_context(|| format!("cannot read labels {}", labels.display()))?;
    let headers = reader
        .headers()
        .with_context(|| format!("cannot read the header of {}", labels.display()))?;
    Ok(headers.iter().skip(1).map(str::to_string).collect())
}

/// The seeded 50/50 split stratified by `column`: writes `split.csv` (path,split) and
/// `train.csv` (path) into `dir`. Photos with an empty cell form a stratum of their own.
fn write_split(labels: &Path, column: &str, seed: u64, dir: &Path) -> anyhow::Result<(u64, u64)> {
    let mut reader = csv::Reader::from_path(labels)
        .with_context(|| format!("cannot read labels {}", labels.display()))?;
    let headers = reader.headers()?.clone();
    let col = headers
        .iter()
        .position(|h| h == column)
        .filter(|&i| i > 0)
        .with_context(|| format!("{} has no column {column:?} to split by", labels.display()))?;
    let mut strata: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for row in reader.records() {
        let row = row.with_context(|| format!("cannot read {}", labels.display()))?;
        let path = row.get(0).unwrap_or("").trim().to_string();
        if path.is_empty() {
            continue;
        }
        strata
            .entry(row.get(col).unwrap_or("").trim().to_string())
            .or_default()
            .push(path);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut split, mut train) = (String::from("path,split\n"), String::from("path\n"));
    let (mut n_train, mut n_test) = (0, 0);
    for paths in strata.values_mut() {
        paths.sort();
        paths.shuffle(&mut rng);
        let cut = paths.len().div_ceil(2);
        for (i, p) in paths.iter().enumerate() {
            let side = if i < cut { "train" } else { "test" };
            let _ = writeln!(split, "{p},{side}");
            if i < cut {
                let _ = writeln!(train, "{p}");
                n_train += 1;
            } else {
                n_test += 1;
            }
        }
    }
    for (name, text) in [("split.csv", &split), ("train.csv", &train)] {
        let path = dir.join(name);
        vocab_pipeline::atomic::write(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok((n_train, n_test))
}

/// Reads `metric,value` rows of an evaluation's CSV.
fn read_metrics(path: &Path) -> anyhow::Result<(f64, f64, u64)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let get = |name: &str| -> anyhow::Result<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name},")))
            .and_then(|v| v.trim().parse().ok())
            .with_context(|| format!("{} has no {name}", path.display()))
    };
    Ok((
        get("accuracy")?,
        get("balanced_accuracy")?,
        get("held_out")? as u64,
    ))
}

/// Resolves the dataset: photo folder, labels file, and where they came from.
struct Dataset {
    photos: PathBuf,
    labels: PathBuf,
    key: String,
}

/// `vocab run`.
pub fn run(args: &RunArgs, ui: &Ui, mpi: Option<&crate::engine::Mpi<'_>>) -> anyhow::Result<()> {
    let started = Instant::now();
    let config = config::load(&args.config)?;
    let base = args.config.parent().unwrap_or(Path::new("."));
    if args.plan {
        return crate::plan::print(&config, base, args);
    }
    let work = args.work.clone().unwrap_or_else(|| {
        let stem = args
            .config
            .file_stem()
            .map_or("run".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from("work").join(stem)
    });
    std::fs::create_dir_all(&work)
        .with_context(|| format!("cannot create work directory {}", work.display()))?;
    let _lock = WorkLock::acquire(&work)?;
    let force_from = match &args.force {
        Some(name) => Some(STAGES.iter().position(|s| s == name).with_context(|| {
            format!(
                "--force {name}: not a stage (stages: {})",
                STAGES.join(", ")
            )
        })?),
        None => None,
    };
    let mut runner = Runner {
        work: work.clone(),
        force_from,
        steps: Vec::new(),
    };

    // dataset
    let dataset = match (
        &config.dataset.synthetic,
        &config.dataset.path,
        &args.dataset,
    ) {
        (Some(s), _, None) => {
            let key = digest(&json!(["synthetic", s.per_kind, s.seed]));
            let dir = runner.step("dataset", "synthetic", &key, |tmp| {
                stages::photos(&PhotosArgs {
                    out: tmp.join("photos"),
                    per_kind: s.per_kind,
                    seed: s.seed,
                })
            })?;
            Dataset {
                photos: dir.join("photos"),
                labels: dir.join("photos").join("labels.csv"),
                key,
            }
        }
        (_, path, given) => {
            let photos = match (given, path) {
                (Some(p), _) => p.clone(),
                (None, Some(p)) => base.join(p),
                (None, None) => bail!("the config names no photo folder: give --dataset DIR"),
            };
            ensure!(
                photos.is_dir(),
                "photo folder {} does not exist",
                photos.display()
            );
            let labels = match (&config.dataset.labels, &args.dataset) {
                (Some(l), None) => base.join(l),
                _ => photos.join("labels.csv"),
            };
            ensure!(
                labels.is_file(),
                "labels file {} does not exist (set [dataset] labels)",
                labels.display()
            );
            let key = digest(&json!([
                folder_fingerprint(&photos)?,
                file_fingerprint(&labels)?
            ]));
            println!("== dataset {}: fingerprint {key}", photos.display());
            Dataset {
                photos,
                labels,
                key,
            }
        }
    };
    let columns = label_columns(&dataset.labels)?;
    let attributes = if config.classify.attributes.is_empty() {
        columns.clone()
    } else {
        for a in &config.classify.attributes {
            ensure!(
                columns.contains(a),
                "[classify] attributes: {} has no column {a:?} (columns: {columns:?})",
                dataset.labels.display()
            );
        }
        config.classify.attributes.clone()
    };
    ensure!(
        !attributes.is_empty(),
        "{} has no attribute columns",
        dataset.labels.display()
    );
    // Checked before any heavy stage: duplicate paths or an attribute with a single class would
    // otherwise surface only at the svm stage, after k-means and encoding ran.
    for a in &attributes {
        vocab_pipeline::classify::read_labels(&dataset.labels, a)
            .context("checking the labels before the first stage")?;
    }
    let split_by = config
        .classify
        .split_by
        .clone()
        .unwrap_or_else(|| attributes[0].clone());

    // features: the split, then random patches of the training half only
    let f = &config.features;
    let features_key = digest(&json!([
        dataset.key,
        f,
        split_by,
        config.classify.split_seed
    ]));
    let features_dir = runner.step("features", "sample", &features_key, |tmp| {
        let (train, test) =
            write_split(&dataset.labels, &split_by, config.classify.split_seed, tmp)?;
        println!("  split by {split_by:?}: {train} training photos, {test} held out");
        let out = tmp.join(sample_name(f.format));
        let settings = FeatureSettings::new(
            &dataset.photos,
            Some(&tmp.join("train.csv")),
            &out,
            Some(f.format),
            Mode::Random,
            f.per_image,
            8,
            f.seed,
            f.max_side,
            f.max_pixels,
        )?;
        stages::features(&settings, ui).map(|_| ())
    })?;
    let sample = features_dir.join(sample_name(f.format));
    let split_csv = features_dir.join("split.csv");

    // partition
    let p = &config.partition;
    let partition_key = digest(&json!([features_key, p]));
    let parts_dir = runner.step("partition", "parts", &partition_key, |tmp| {
        crate::kmeans::partition(&PartitionArgs {
            features: sample.clone(),
            parts: Some(p.parts),
            out: tmp.join("parts"),
            element: p.element,
        })
    })?;
    let parts = parts_dir.join("parts");

    // kmeans, encode and svm per vocabulary size
    let km = &config.kmeans;
    let cluster = args
        .cluster
        .clone()
        .or_else(|| km.cluster.as_ref().map(|c| base.join(c)));
    ensure!(
        !(km.prune && cluster.is_some()),
        "[kmeans] prune runs on the single-process engine only; --cluster asks for a cluster"
    );
    let on_mpi = args.engine == Some(EngineArg::Mpi);
    ensure!(
        !(on_mpi && cluster.is_some()),
        "--engine mpi runs k-means on the MPI ranks; --cluster (or [kmeans] cluster) names TCP \
         workers"
    );
    ensure!(
        !(km.prune && on_mpi),
        "[kmeans] prune runs on the single-process engine only; --engine mpi asks for MPI ranks"
    );
    // The rack map: `--racks` (read when the MPI job started), else `[kmeans.racks]`.
    let mpi = mpi.map(|m| match (&args.racks, km.racks.is_empty()) {
        (None, false) => crate::engine::Mpi {
            racks: km.racks.clone(),
            ..m.clone()
        },
        _ => m.clone(),
    });
    let mpi = mpi.as_ref();
    let e = &config.encode;
    let mut outcomes = Vec::new();
    let mut vocabularies = Vec::new();
    for &k in &km.k {
        let label = format!("k{k}");
        // Where k-means runs does not change its result (bit-identical), so it is not in the key.
        // Pruning and the int8 kernel can break near-ties differently, so they are (only when
        // on: old keys stay valid).
        let mut kmeans_key_parts =
            json!([partition_key, k, km.iterations, km.tol, km.seed, km.init]);
        if let Some(parts) = kmeans_key_parts.as_array_mut() {
            if km.prune {
                parts.push(json!("prune"));
            }
            if km.kernel != KernelArg::F32 {
                parts.push(json!(km.kernel));
            }
        }
        let kmeans_key = digest(&kmeans_key_parts);
        let kmeans_dir = runner.step("kmeans", &label, &kmeans_key, |tmp| {
            let out = tmp.join("vocabulary.bin");
            let resume = vocab_pipeline::kmeans::files::checkpoint_dir(&out)
                .join("state.toml")
                .is_file();
            crate::kmeans::run(
                &KmeansArgs {
                    features: parts.clone(),
                    k,
                    iterations: km.iterations,
                    tol: km.tol,
                    seed: km.seed,
                    init: km.init,
                    init_centroids: None,
                    prune: km.prune,
                    kernel: km.kernel,
                    resume,
                    cluster: cluster.clone(),
                    // Under MPI the ranks are the nodes.
                    local_nodes: (cluster.is_none() && km.nodes > 0 && !on_mpi).then_some(km.nodes),
                    broadcast: km.broadcast,
                    no_local_aggregation: !km.local_aggregation,
                    exit_after_iteration: args.exit_after_iteration,
                    engine: args.engine,
                    racks: args.racks.clone(),
                    order: km.order,
                    chunk_size: 1 << 20,
                    exit_rank_at: None,
                    format: Some(FileFormat::Bin),
                    out,
                },
                ui,
                mpi,
            )
        })?;
        let vocabulary = kmeans_dir.join("vocabulary.bin");
        vocabularies.push((k, kmeans_dir.clone()));
        let encode_key = digest(&json!([kmeans_key, dataset.key, e]));
        let encode_dir = runner.step("encode", &label, &encode_key, |tmp| {
            stages::encode(
                &EncodeArgs {
                    vocabulary: vocabulary.clone(),
                    input: dataset.photos.clone(),
                    labels: Some(dataset.labels.clone()),
                    out: tmp.join("histograms.bin"),
                    stride: e.stride,
                    norm: e.norm,
                    pyramid: e.pyramid,
                    max_side: e.max_side,
                    max_pixels: e.max_pixels,
                    soft: e.soft,
                    sharpness: e.sharpness,
                },
                ui,
            )
        })?;
        let histograms = encode_dir.join("histograms.bin");
        for attribute in &attributes {
            let mut svm_key = json!([
                encode_key,
                features_key,
                attribute,
                config.classify.cv,
                config.classify.split_seed,
                config.classify.solver
            ]);
            // Keys of runs without a kernel map stay what they were.
            if config.classify.kernel_map != KernelMapArg::None {
                if let Some(key) = svm_key.as_array_mut() {
                    key.push(json!([
                        config.classify.kernel_map,
                        config.classify.map_order
                    ]));
                }
            }
            let svm_key = digest(&svm_key);
            let svm_dir = runner.step("svm", &format!("{label}-{attribute}"), &svm_key, |tmp| {
                let model = tmp.join("model.json");
                // The step's outcome is in its metrics files and the run's summary table.
                crate::classify_cmd::train_to(
                    &TrainArgs {
                        histograms: histograms.clone(),
                        labels: dataset.labels.clone(),
                        attribute: attribute.clone(),
                        c: None,
                        cv: config.classify.cv,
                        solver: config.classify.solver,
                        split: Some(split_csv.clone()),
                        holdout: None,
                        split_seed: config.classify.split_seed,
                        kernel_map: config.classify.kernel_map,
                        map_order: config.classify.map_order,
                        out: model.clone(),
                    },
                    &mut std::io::sink(),
                )?;
                crate::classify_cmd::evaluate_to(
                    &EvaluateArgs {
                        model,
                        histograms: histograms.clone(),
                        labels: dataset.labels.clone(),
                        held_out: true,
                    },
                    &mut std::io::sink(),
                )
            })?;
            let (accuracy, balanced_accuracy, held_out) =
                read_metrics(&svm_dir.join("model.json.metrics.csv"))?;
            outcomes.push(Outcome {
                k,
                attribute: attribute.clone(),
                accuracy,
                balanced_accuracy,
                held_out,
            });
        }
    }

    // report (always rebuilt)
    let report_dir = work.join("report");
    let report_started = Instant::now();
    write_report(
        &report_dir,
        &args.config,
        &dataset,
        &features_dir,
        &outcomes,
        &vocabularies,
        &runner.steps,
    )?;
    runner.steps.push(Step {
        stage: "report",
        label: "report".into(),
        key: String::new(),
        seconds: report_started.elapsed().as_secs_f64(),
        cached: false,
    });
    summary(&runner.steps, &outcomes);
    println!(
        "run: {} finished in {:.1} s; report in {}",
        args.config.display(),
        started.elapsed().as_secs_f64(),
        report_dir.join("report.md").display()
    );
    Ok(())
}

fn sample_name(format: FileFormat) -> &'static str {
    match format {
        FileFormat::Text => "sample.txt",
        FileFormat::Bin => "sample.bin",
    }
}

/// The one-screen end of a run: steps with their times, then accuracies.
fn summary(steps: &[Step], outcomes: &[Outcome]) {
    println!("\nstage       step                 seconds  status");
    for s in steps {
        println!(
            "{:<11} {:<20} {:>7.1}  {}",
            s.stage,
            s.label,
            s.seconds,
            if s.cached { "cached" } else { "ran" }
        );
    }
    if !outcomes.is_empty() {
        println!(
            "\n{:>7}  {:<14} {:>9} {:>9}",
            "k", "attribute", "accuracy", "balanced"
        );
        for o in outcomes {
            println!(
                "{:>7}  {:<14} {:>9.4} {:>9.4}",
                o.k, o.attribute, o.accuracy, o.balanced_accuracy
            );
        }
    }
}

/// The `*_seconds` columns of a cluster run's `<out>.stages.csv`, in the report's stage order.
const STAGE_SECONDS: [&str; 5] = [
    "broadcast_seconds",
    "map_seconds",
    "stage1_seconds",
    "stage2_seconds",
    "stage3_seconds",
];

/// Mean per-stage seconds of a k-means run (cluster runs have `<out>.stages.csv`), found by
/// column name.
fn kmeans_stage_means(dir: &Path) -> Option<Vec<f64>> {
    let text = std::fs::read_to_string(dir.join("vocabulary.bin.stages.csv")).ok()?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let columns: Vec<usize> = STAGE_SECONDS
        .iter()
        .map(|name| header.iter().position(|h| h == name))
        .collect::<Option<_>>()?;
    let mut sums = [0.0; STAGE_SECONDS.len()];
    let mut rows = 0.0;
    for line in lines {
        let cols: Vec<&str> = line.split(',').collect();
        for (s, &c) in sums.iter_mut().zip(&columns) {
            *s += cols.get(c)?.parse::<f64>().ok()?;
        }
        rows += 1.0;
    }
    (rows > 0.0).then(|| sums.iter().map(|s| s / rows).collect())
}

#[allow(clippy::too_many_arguments)]
fn write_report(
    dir: &Path,
    config_path: &Path,
    dataset: &Dataset,
    features_dir: &Path,
    outcomes: &[Outcome],
    vocabularies: &[(usize, PathBuf)],
    steps: &[Step],
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        let path = dir.join(name);
        vocab_pipeline::atomic::write(&path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))
    };
    // Accuracy per attribute and vocabulary size.
    let mut csv = String::from("k,attribute,accuracy,balanced_accuracy,held_out\n");
    for o in outcomes {
        let _ = writeln!(
            csv,
            "{},{},{},{},{}",
            o.k, o.attribute, o.accuracy, o.balanced_accuracy, o.held_out
        );
    }
    write("accuracy.csv", &csv)?;
    let mut attributes: Vec<&str> = outcomes.iter().map(|o| o.attribute.as_str()).collect();
    attributes.sort_unstable();
    attributes.dedup();
    let series: Vec<Series> = attributes
        .iter()
        .map(|a| Series {
            name: (*a).to_string(),
            points: outcomes
                .iter()
                .filter(|o| o.attribute == *a)
                .map(|o| (o.k as f64, o.accuracy))
                .collect(),
        })
        .collect();
    if !series.is_empty() {
        report::line_chart_log2(
            &dir.join("accuracy.png"),
            "Held-out accuracy against vocabulary size",
            "vocabulary size k",
            "accuracy",
            (0.0, 1.0),
            &series,
        )?;
    }
    // k-means per-stage breakdown.
    let mut kcsv = format!("k,{}\n", STAGE_SECONDS.join(","));
    let names = ["broadcast", "map", "stage 1", "stage 2", "stage 3"];
    let mut cats = Vec::new();
    let mut stacks: Vec<(String, Vec<f64>)> = names
        .iter()
        .map(|n| ((*n).to_string(), Vec::new()))
        .collect();
    for (k, kdir) in vocabularies {
        if let Some(means) = kmeans_stage_means(kdir) {
            let _ = writeln!(
                kcsv,
                "{k},{}",
                means
                    .iter()
                    .map(f64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            );
            cats.push(format!("k={k}"));
            for (s, m) in stacks.iter_mut().zip(&means) {
                s.1.push(*m);
            }
        }
    }
    write("kmeans.csv", &kcsv)?;
    // Vocabulary statistics and every iteration of every run.
    let mut vocab_md = String::from(
        "| k | vectors | iterations | converged | final inertia | seconds |\n|---|---|---|---|---|---|\n",
    );
    let mut iterations = String::new();
    for (k, kdir) in vocabularies {
        let meta = std::fs::read_to_string(kdir.join("vocabulary.bin.meta.toml"))
            .ok()
            .and_then(|t| toml::from_str::<vocab_pipeline::kmeans::files::RunMeta>(&t).ok());
        if let Some(m) = meta {
            let _ = writeln!(
                vocab_md,
                "| {k} | {} | {} | {} | {:.6e} | {:.1} |",
                m.n, m.iterations, m.converged, m.final_inertia, m.seconds
            );
        }
        let per_iteration = std::fs::read_to_string(kdir.join("vocabulary.bin.stages.csv"))
            .or_else(|_| std::fs::read_to_string(kdir.join("vocabulary.bin.iterations.csv")))
            .unwrap_or_default();
        let mut lines = per_iteration.lines();
        if let Some(header) = lines.next() {
            if iterations.is_empty() {
                let _ = writeln!(iterations, "k,{header}");
            }
            for line in lines {
                let _ = writeln!(iterations, "{k},{line}");
            }
        }
    }
    write("kmeans-iterations.csv", &iterations)?;
    if !cats.is_empty() {
        report::stacked_bars(
            &dir.join("kmeans.png"),
            "k-means: mean seconds per iteration by stage",
            "seconds",
            &cats,
            &stacks,
        )?;
    }
    // Steps.
    let mut scsv = String::from("stage,step,key,seconds,cached\n");
    for s in steps {
        let _ = writeln!(
            scsv,
            "{},{},{},{},{}",
            s.stage, s.label, s.key, s.seconds, s.cached
        );
    }
    write("steps.csv", &scsv)?;
    // Markdown.
    let images = std::fs::read_to_string(features_dir.join("sample.bin.images.csv"))
        .or_else(|_| std::fs::read_to_string(features_dir.join("sample.txt.images.csv")))
        .map_or(0, |t| t.lines().count().saturating_sub(1));
    let split = std::fs::read_to_string(features_dir.join("split.csv")).unwrap_or_default();
    let (train, test) = split.lines().skip(1).fold((0, 0), |(a, b), l| {
        if l.ends_with(",train") {
            (a + 1, b)
        } else {
            (a, b + 1)
        }
    });
    let mut md = format!(
        "# Run report: {}\n\n## Dataset\n\n- photos: {} (labels {})\n- split: {train} training, {test} held out\n- vocabulary sample: random patches of {images} training photos\n\n",
        config_path.display(),
        dataset.photos.display(),
        dataset.labels.display(),
    );
    md.push_str("## Accuracy (held-out half)\n\n| k | attribute | accuracy | balanced accuracy | held out |\n|---|---|---|---|---|\n");
    for o in outcomes {
        let _ = writeln!(
            md,
            "| {} | {} | {:.4} | {:.4} | {} |",
            o.k, o.attribute, o.accuracy, o.balanced_accuracy, o.held_out
        );
    }
    md.push_str("\n![accuracy](accuracy.png)\n\n## Vocabularies\n\n");
    md.push_str(&vocab_md);
    md.push_str("\n## k-means per iteration (mean seconds by stage; every iteration in kmeans-iterations.csv)\n\n| k | broadcast | map | stage 1 | stage 2 | stage 3 |\n|---|---|---|---|---|---|\n");
    for line in kcsv.lines().skip(1) {
        let cols: Vec<String> = line
            .split(',')
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    c.to_string()
                } else {
                    c.parse::<f64>()
                        .map_or(c.to_string(), |v| format!("{v:.3}"))
                }
            })
            .collect();
        let _ = writeln!(md, "| {} |", cols.join(" | "));
    }
    if !cats.is_empty() {
        md.push_str("\n![k-means stages](kmeans.png)\n");
    }
    md.push_str("\n## Steps\n\n| stage | step | seconds | status |\n|---|---|---|---|\n");
    for s in steps {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} |",
            s.stage,
            s.label,
            s.seconds,
            if s.cached { "cached" } else { "ran" }
        );
    }
    write("report.md", &md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_is_stratified_seeded_and_complete() {
        let dir = tempfile::tempdir().expect("tmp");
        let labels = dir.path().join("labels.csv");
        let mut text = String::from("path,class,x\n");
        for i in 0..7 {
            let _ = writeln!(text, "a{i}.jpg,a,");
        }
        for i in 0..4 {
            let _ = writeln!(text, "b{i}.jpg,b,1");
        }
        text.push_str("u.jpg,,\n");
        std::fs::write(&labels, text).expect("write");
        let (train, test) = write_split(&labels, "class", 3, dir.path()).expect("split");
        assert_eq!((train, test), (4 + 2 + 1, 3 + 2));
        let first = std::fs::read_to_string(dir.path().join("split.csv")).expect("read");
        write_split(&labels, "class", 3, dir.path()).expect("again");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("split.csv")).expect("read"),
            first
        );
        let err = write_split(&labels, "nope", 3, dir.path()).expect_err("no column");
        assert!(err.to_string().contains("\"nope\""), "{err}");
    }
}
