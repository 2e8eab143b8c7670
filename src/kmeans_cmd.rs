//! `vocab partition`, `vocab kmeans` and `vocab datasets synth`.

use std::cell::RefCell;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, ensure};
use vocab_pipeline::kmeans::engine::StepReport;
use vocab_pipeline::kmeans::files::{
    RunMeta, checkpoint_dir, load_checkpoint, read_vocabulary, write_toml, write_vocabulary,
};
use vocab_pipeline::kmeans::{self, Init, KMeansError, Params, State};
use vocab_pipeline::partition::{
    self, Manifest, Matrix, PartitionSet, Rows, Verify, read_manifest,
};
use vocab_pipeline::store::{Element, FeatureReader, Format, Record};
use vocab_pipeline::synth;

use crate::cli::SynthArgs;
use crate::kmeans_log::{Iterations, PerIteration};
use crate::progress::Ui;
use crate::ranks::Mpi;
use crate::settings::{KmeansSettings, OrFlag, PartitionSettings, TeamSettings, format_for};
use crate::teams::{self, At, RECALL_SAMPLE};
use vocab_pipeline::kmeans::InitMethod;

/// `vocab datasets synth`.
pub fn synth(args: &SynthArgs) -> anyhow::Result<()> {
    ensure!(args.dims > 0, "--dims must be at least 1");
    ensure!(args.clusters > 0, "--clusters must be at least 1");
    crate::settings::output("out", &args.out)
        .and_then(|()| crate::settings::apart("out", &args.out, crate::settings::Kind::File, &[]))
        .or_flag()?;
    let format = args
        .format
        .map_or_else(|| format_for(&args.out), Format::from);
    let started = Instant::now();
    let n = synth::generate_features(
        &args.out,
        format,
        args.n,
        args.dims,
        args.clusters,
        args.seed,
    )?;
    println!(
        "datasets synth: {n} vectors x {} dims around {} blobs -> {} in {:.1} s",
        args.dims,
        args.clusters,
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The partition stage, reporting to `out`.
pub fn partition(settings: &PartitionSettings, out: &mut dyn Write) -> anyhow::Result<()> {
    let args = settings;
    let started = Instant::now();
    let manifest = partition::split(&args.features, args.parts, &args.out, args.element)?;
    let sizes: Vec<u64> = manifest.partitions.iter().map(|p| p.count).collect();
    writeln!(
        out,
        "partition: {} records x {} dims ({}) into {} partitions of {}..{} records in {} ({:.1} s)",
        manifest.count,
        manifest.dims,
        manifest.element,
        sizes.len(),
        sizes.iter().min().unwrap_or(&0),
        sizes.iter().max().unwrap_or(&0),
        args.out.display(),
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

/// Rows per map-task slice of a feature file read into memory.
const LOADED_SLICE: usize = 16 * kmeans::UNIT_ROWS;

/// The vectors of a k-means or mixture run: a partition folder (mapped) or a feature file
/// (read into memory).
pub(crate) enum Input {
    Partitions(PartitionSet),
    /// Partitions that lie only at the nodes: the manifest here, the rows there.
    Placed(Manifest),
    Loaded {
        data: Vec<f32>,
        dims: usize,
        checksum: u32,
    },
}

impl Input {
    /// The vectors of `args`: partitions at the nodes (a manifest here), a partition folder
    /// (header-verified on a distributed engine: the members verify what they load, and this
    /// process reads only sampled rows), or a feature file read into memory.
    pub(crate) fn of(args: &TeamSettings) -> anyhow::Result<Self> {
        let distributed = args.engine.distributed();
        if let Some(here) = &args.placed {
            ensure!(
                distributed,
                "partitions that lie at the nodes need a distributed engine"
            );
            return Ok(Self::Placed(read_manifest(here)?));
        }
        let verify = if distributed {
            Verify::Header
        } else {
            Verify::Full
        };
        Self::open(&args.features, verify)
    }

    /// Opens `path`; a partition folder is checked as `verify` says (header-only on a cluster
    /// driver: the workers verify what they load, and the driver reads only sampled rows).
    fn open(path: &Path, verify: Verify) -> anyhow::Result<Self> {
        if path.is_dir() {
            return Ok(Self::Partitions(PartitionSet::open_subset(
                path, None, verify,
            )?));
        }
        let mut reader = FeatureReader::open(path)?;
        let mut record = Record::default();
        let mut data = Vec::new();
        let mut crc = crc32fast::Hasher::new();
        while reader.next_into(&mut record)? {
            record.hash_into(&mut crc);
            data.extend_from_slice(&record.values);
        }
        let dims = reader.dims().unwrap_or(0);
        ensure!(
            dims > 0 && !data.is_empty(),
            "{} holds no feature vectors",
            path.display()
        );
        Ok(Self::Loaded {
            data,
            dims,
            checksum: crc.finalize(),
        })
    }

    /// How the vectors are held: a partition set's element, f32 for a file read here.
    pub(crate) fn element(&self) -> Element {
        let of = |m: &Manifest| Element::from_name(&m.element).unwrap_or_default();
        match self {
            Self::Partitions(set) => of(&set.manifest),
            Self::Placed(m) => of(m),
            Self::Loaded { .. } => Element::F32,
        }
    }

    /// Map-task units: partitions, or slices of [`LOADED_SLICE`] rows of a loaded file (a
    /// layout that does not depend on the machine, so neither do the results).
    pub(crate) fn vectors(&self) -> Vec<Rows<'_>> {
        match self {
            Self::Partitions(set) => set.vectors(),
            Self::Placed(_) => Vec::new(),
            Self::Loaded { data, dims, .. } => {
                let all = Matrix::dense(data, *dims);
                (0..all.rows())
                    .step_by(LOADED_SLICE)
                    .map(|start| {
                        all.slice(start, (start + LOADED_SLICE).min(all.rows()))
                            .into()
                    })
                    .collect()
            }
        }
    }

    /// Vectors and values per vector (`parts`: its [`Input::vectors`]).
    pub(crate) fn shape(&self, parts: &[Rows<'_>]) -> (usize, usize) {
        match self {
            Self::Placed(m) => (m.count as usize, m.dims),
            _ => (
                parts.iter().map(Rows::rows).sum(),
                parts.first().map_or(0, Rows::dims),
            ),
        }
    }

    /// Where a distributed run's partitions are (none for a feature file read here).
    pub(crate) fn at(&self) -> Option<At<'_>> {
        match self {
            Self::Partitions(set) => Some(At::Here(set)),
            Self::Placed(m) => Some(At::Nodes(m)),
            Self::Loaded { .. } => None,
        }
    }

    pub(crate) fn checksum(&self) -> u32 {
        match self {
            Self::Partitions(set) => set.manifest.source_checksum,
            Self::Placed(m) => m.source_checksum,
            Self::Loaded { checksum, .. } => *checksum,
        }
    }
}

/// What a k-means run made, in memory: its record and what it recorded per iteration.
#[derive(Debug, Clone)]
pub struct Fitted {
    /// The run's record (also written beside the vocabulary, `<out>.meta.toml`).
    pub meta: RunMeta,
    /// Its iterations, as written beside the vocabulary.
    pub per_iteration: PerIteration,
}

impl Fitted {
    /// What the run of an earlier process that wrote `vocabulary` made.
    pub fn read(vocabulary: &Path) -> anyhow::Result<Self> {
        let path = vocab_pipeline::features::manifest_path(vocabulary, "meta.toml");
        let text = vocab_pipeline::input::read_text(&path, vocab_pipeline::input::MAX_RECORD_BYTES)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Self {
            meta: toml::from_str(&text).with_context(|| format!("invalid {}", path.display()))?,
            per_iteration: PerIteration::read(vocabulary),
        })
    }
}

/// A k-means run, reporting to `out`.
pub fn run(
    args: &KmeansSettings,
    ui: &Ui,
    mpi: Option<&Mpi<'_>>,
    out: &mut dyn Write,
) -> anyhow::Result<Fitted> {
    let distributed = args.team.engine.distributed();
    crate::nodes::check(&args.team.engine, mpi)?;
    // Shared by the iteration callback and the engines' own lines.
    let out = RefCell::new(out);
    let input = Input::of(&args.team)?;
    let parts = input.vectors();
    let (n, dims) = input.shape(&parts);
    let (params, init_name) = params_of(args)?;
    check_memory(args, n as u64, dims as u64, input.element())?;
    let shape = (n, dims, parts.len());
    let start = begin(args, &input, shape, &init_name, &mut **out.borrow_mut())?;
    let bar = ui.bar(args.iterations, "kmeans");
    let started = Instant::now();
    let mut log = Iterations::new(args, n, input.checksum(), start.as_ref(), &bar, &out);
    let mut on_state = |state: &State, report: Option<&StepReport>| log.record(state, report);
    let fitted = match input.at().filter(|_| distributed) {
        Some(at) => teams::start(
            &args.team,
            at,
            mpi,
            ("kmeans", (args.k * dims * 4) as f64),
            &out,
        )
        .and_then(|mut team| teams::fit(&mut team, args, at, &params, start, &out, &mut on_state)),
        None => kmeans::engine::fit::<anyhow::Error>(&parts, &params, start, &mut |state| {
            on_state(state, None)
        })
        .map(|state| (state, None)),
    };
    let (state, measured) = fitted.map_err(|e| match e.downcast::<KMeansError>() {
        Ok(k) => {
            anyhow::Error::new(k).context(format!("k-means on {}", args.team.features.display()))
        }
        Err(e) => e,
    })?;
    let per_iteration = log.finish();
    bar.finish();
    write_vocabulary(&args.team.out, &state.centroids, args.format)?;
    // Vectors at the nodes: measured there, from rows they sent (the same sample).
    let recall = measured.or_else(|| {
        args.team.assignment.approx(args.k).map(|(lists, probes)| {
            kmeans::approx::recall(
                &parts,
                &state.centroids,
                (lists, probes, args.team.assignment.kernel()),
                RECALL_SAMPLE,
                args.seed,
            )
        })
    });
    let final_inertia = state.history.last().map_or(f64::NAN, |h| h.inertia);
    let meta = RunMeta {
        k: args.k,
        dims,
        n: n as u64,
        iterations: state.iteration,
        converged: state.converged,
        final_inertia,
        seed: args.seed,
        init: init_name,
        input_checksum: input.checksum(),
        seconds: state.history.iter().map(|h| h.seconds).sum(),
        assignment: args.team.assignment.key(),
        recall,
    };
    let wall = started.elapsed().as_secs_f64();
    finish(args, &meta, state.history.len(), wall, out.into_inner())?;
    Ok(Fitted {
        meta,
        per_iteration,
    })
}

/// The run's first lines (`n` vectors of `dims` in `parts` map units here), and the state a
/// resumed run starts from.
fn begin(
    args: &KmeansSettings,
    input: &Input,
    (n, dims, parts): (usize, usize, usize),
    init_name: &str,
    out: &mut dyn Write,
) -> anyhow::Result<Option<State>> {
    let assignment = &args.team.assignment.key()[..];
    let start = if args.resume {
        let state = load_checkpoint(
            &args.team.out,
            args.k,
            args.seed,
            input.checksum(),
            assignment,
        )?;
        // What a checkpoint says is checked, not trusted: a run never resumes past its end.
        anyhow::ensure!(
            state.iteration <= args.iterations,
            "checkpoint {}: says {} iterations are done, more than the {} this run makes; remove \
             the folder (or run without --resume) to start over",
            checkpoint_dir(&args.team.out).display(),
            state.iteration,
            args.iterations
        );
        writeln!(
            out,
            "kmeans: resuming after iteration {} from {}",
            state.iteration,
            checkpoint_dir(&args.team.out).display()
        )?;
        Some(state)
    } else {
        None
    };
    let partitions = match input {
        Input::Placed(m) => format!("{} partitions at the nodes", m.partitions.len()),
        _ => format!("{parts} partitions"),
    };
    writeln!(
        out,
        "kmeans: {n} vectors x {dims} dims in {partitions}, k = {}, init {init_name}, \
         assignment {assignment}",
        args.k,
    )?;
    Ok(start)
}

/// Writes the run's record beside the vocabulary and its last lines: the approximate search's
/// recall, the iterations, the files.
fn finish(
    args: &KmeansSettings,
    meta: &RunMeta,
    ran: usize,
    wall: f64,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if let Some(r) = &meta.recall {
        writeln!(
            out,
            "kmeans: approximate assignment found the exact nearest word for {:.1}% of {} sampled \
             vectors; their inertia is {:+.2}% against exact assignment",
            100.0 * r.fraction(),
            r.sample,
            100.0 * r.inertia_gap()
        )?;
    }
    let meta_path = vocab_pipeline::features::manifest_path(&args.team.out, "meta.toml");
    write_toml(&meta_path, meta)?;
    writeln!(
        out,
        "kmeans: {} iterations{} in {:.1} s ({:.2} s per iteration here, {wall:.1} s wall), final inertia {:.6e}",
        meta.iterations,
        if meta.converged { " (converged)" } else { "" },
        meta.seconds,
        meta.seconds / ran.max(1) as f64,
        meta.final_inertia,
    )?;
    writeln!(
        out,
        "  wrote {} and {}",
        args.team.out.display(),
        meta_path.display()
    )?;
    crate::tables::how_to_read(out, &args.team.out, args.format)?;
    Ok(())
}

/// The run's parameters, and its initialisation for people (a file, `random`, `kmeans++`).
fn params_of(args: &KmeansSettings) -> anyhow::Result<(Params, String)> {
    let (init, name) = match (&args.init_centroids, args.init) {
        (Some(path), _) => (
            Init::Given(read_vocabulary(path).context("--init-centroids")?),
            path.display().to_string(),
        ),
        (None, InitMethod::Random) => (Init::Random, "random".into()),
        (None, InitMethod::PlusPlus) => (Init::PlusPlus { sample: None }, "kmeans++".into()),
    };
    let params = Params {
        k: args.k,
        max_iter: args.iterations,
        tol: args.tol,
        seed: args.seed,
        init,
        threads: 0,
        assignment: args.team.assignment,
    };
    Ok((params, name))
}

/// Refuses a run on this machine (one process, or loopback workers sharing it) whose largest
/// arrays would not fit in its memory.
fn check_memory(args: &KmeansSettings, n: u64, dims: u64, element: Element) -> anyhow::Result<()> {
    // Other machines: their memory is not known here.
    let Some(nodes) = args.team.engine.nodes_here() else {
        return Ok(());
    };
    let threads = rayon::current_num_threads() as u64;
    let plan = kmeans::Memory::estimate(
        n.div_ceil(nodes),
        args.k as u64,
        dims,
        element,
        threads,
        args.team.assignment,
        args.team.engine.distributed(),
    );
    match crate::memory::memory_here() {
        Some(total) => crate::memory::fits(&plan, nodes, total, args.k),
        None => Ok(()),
    }
}
