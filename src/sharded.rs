//! The photo stages across nodes: features and encode sharded over the TCP workers or the MPI
//! ranks (`vocab_cluster::jobs::photos`), written here in picture-id order, byte for byte what one
//! machine writes.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use vocab_cluster::engine::Nodes;
use vocab_cluster::engine::crew::DriverError;
use vocab_cluster::jobs::photos::{
    Journal, Journaled, MemberTime, PhotoStage, PhotoTeam, Rounds, Value, shard_photos,
};
use vocab_pipeline::encode::Words;
use vocab_pipeline::features::{FeatureSummary, FeaturesError, Source, manifest_path};
use vocab_pipeline::image_io::Collection;

use crate::ranks::Mpi;

/// The most bytes of results one round of a sharded encode brings to the driver: 256 MiB.
const ROUND_RESULT_BYTES: usize = 256 << 20;
use crate::settings::Backend;

/// Where a photo stage runs: here, or on the nodes of a distributed engine.
#[derive(Clone, Copy)]
pub struct On<'a> {
    /// The engine (`Local`: this process).
    pub engine: &'a Backend,
    /// The MPI job, under `--engine mpi`.
    pub mpi: Option<&'a Mpi<'a>>,
}

/// The engine of a photo command's `--cluster`, `--local-nodes` and `--engine` (`mpi`: rank 0's
/// handle under MPI).
pub fn engine(args: &crate::cli::NodesArgs, mpi: Option<&Mpi<'_>>) -> anyhow::Result<Backend> {
    use crate::settings::OrFlag;
    let engine =
        crate::settings::Backend::of(args.engine, args.cluster.as_deref(), args.local_nodes)
            .or_flag()?;
    crate::nodes::check(&engine, mpi)?;
    Ok(engine)
}

/// How a sharded stage went.
#[derive(Debug, Clone, Default)]
pub struct Spread {
    /// What the engine is (for the summary).
    pub what: String,
    /// Each node's compute time and photos.
    pub times: Vec<MemberTime>,
    /// Bytes moved: the job to every node, the results to this one.
    pub bytes: u64,
    /// Nodes lost on the way.
    pub dropped: Vec<String>,
    /// Photos whose results an interrupted earlier run had saved.
    pub resumed: usize,
}

impl Spread {
    /// The summary's lines: time per node, the slowest, bytes moved.
    pub fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let nodes: Vec<String> = (self.times.iter())
            .map(|t| format!("{} {:.1} s / {} photos", t.host, t.seconds, t.photos))
            .collect();
        writeln!(
            out,
            "  on {} ({} nodes): {}",
            self.what,
            self.times.len(),
            nodes.join(", ")
        )?;
        if let Some(slow) = (self.times.iter()).max_by(|a, b| a.seconds.total_cmp(&b.seconds)) {
            writeln!(
                out,
                "  slowest node {} ({:.1} s); {:.1} MB moved{}",
                slow.host,
                slow.seconds,
                self.bytes as f64 / 1e6,
                if self.dropped.is_empty() {
                    String::new()
                } else {
                    format!("; dropped {}", self.dropped.join(", "))
                }
            )?;
        }
        if self.resumed > 0 {
            writeln!(
                out,
                "  resumed: {} photos from the rounds an interrupted run saved",
                self.resumed
            )?;
        }
        Ok(())
    }
}

/// Runs a photo stage on the nodes of `on` (which must be distributed): `write` is the stage's
/// writer, fed the nodes' results round by round. Rounds are saved in `<out>.rounds/` as they
/// come and served from there when an interrupted run left them (removed when the stage ends).
/// Loopback workers log to `<out>.workers/`.
pub fn run<T: Value>(
    on: On<'_>,
    collection: &Collection,
    stage: PhotoStage,
    vocabulary: Option<&Words>,
    out: &Path,
    write: &mut dyn FnMut(&mut dyn Source<T>) -> Result<FeatureSummary, FeaturesError>,
) -> anyhow::Result<(FeatureSummary, Spread)> {
    let rounds = journal_dir(out);
    let journal = Journal::open(
        &rounds,
        &job_key(collection, &stage, vocabulary)?,
        stage.expect(vocabulary.map_or(0, |v| v.k())),
    )
    .with_context(|| format!("cannot create {}", rounds.display()))?;
    let done = sharded(on, collection, stage, vocabulary, out, &journal, write)?;
    journal
        .remove()
        .with_context(|| format!("cannot remove {}", rounds.display()))?;
    Ok(done)
}

/// [`run`] with its journal open.
fn sharded<T: Value>(
    on: On<'_>,
    collection: &Collection,
    stage: PhotoStage,
    vocabulary: Option<&Words>,
    out: &Path,
    journal: &Journal,
    write: &mut dyn FnMut(&mut dyn Source<T>) -> Result<FeatureSummary, FeaturesError>,
) -> anyhow::Result<(FeatureSummary, Spread)> {
    let n = collection.photos().len();
    let mut team = start(on, out, "the photo stage", |nodes| {
        PhotoTeam::start(nodes, collection, &stage, vocabulary)
    })?;
    let workers = team.crew.workers();
    // A round's results reach the driver together (and the next round's may start early):
    // photos of large results (VLAD's run to megabytes) go in smaller rounds.
    let result = vocabulary.map_or(0, |v| stage.histogram_len(v.k()).saturating_mul(4));
    let fit = (ROUND_RESULT_BYTES / result.max(1).saturating_mul(workers.max(1))).max(1);
    let per_round = shard_photos(n, workers).min(fit) * workers;
    let crew = &mut team.crew;
    let rounds = Rounds::new(|range, next| crew.round::<T>(range, next), per_round, n);
    let mut source = Journaled::new(rounds, journal, n);
    let summary = write(&mut source)?;
    let resumed = source.resumed;
    Ok((summary, team.spread(resumed)))
}

/// A photo job started on the nodes of `on`, with what its summary says of where it ran.
struct Team<'a> {
    crew: PhotoTeam<'a>,
    /// Where (loopback workers started for the stage stop when it ends: after the crew lets
    /// them go, fields drop in order).
    place: crate::nodes::Place,
}

/// Starts a photo job (`job` names it in errors) on the nodes of `on` (which must be
/// distributed) with `begin`: the MPI ranks, or the TCP workers of the engine (loopback workers
/// started now, logging beside `out`).
fn start<'a>(
    on: On<'a>,
    out: &Path,
    job: &str,
    begin: impl FnOnce(Nodes<'a>) -> Result<PhotoTeam<'a>, DriverError>,
) -> anyhow::Result<Team<'a>> {
    let logs = manifest_path(out, "workers");
    let started = crate::nodes::start(on.engine, on.mpi, &logs)?;
    let place = started.place;
    let crew =
        begin(started.nodes).with_context(|| format!("starting {job} on {}", place.whence))?;
    Ok(Team { crew, place })
}

impl Team<'_> {
    /// How the job spread over the members: each one's time and photos (MPI ranks named
    /// `rank@host`), bytes moved, members dropped.
    fn spread(&self, resumed: usize) -> Spread {
        Spread {
            what: self.place.what.clone(),
            times: self.crew.times(),
            bytes: self.crew.bytes(),
            dropped: self.crew.dropped(),
            resumed,
        }
    }
}

/// Where the nodes keep the partitions of a features stage ([`born`]).
#[derive(Debug, Clone)]
pub struct Born {
    /// The folder, as every node sees it (the driver writes its copy of the manifest there).
    pub dir: std::path::PathBuf,
    /// Partitions.
    pub parts: usize,
    /// Value storage.
    pub element: vocab_pipeline::store::Element,
}

/// The features stage (`stage`, HOG or descriptors made elsewhere) with partitions born on the
/// nodes of `on` (which must be distributed): every node describes one contiguous shard of
/// `collection` and keeps its patches, the driver
/// writes the image and skip manifests of `out` (no feature file), then the nodes cut their
/// patches into `born.parts` partitions in `born.dir` (only records across shard boundaries
/// travel). Returns the summary, how it spread, and where the partitions are.
pub fn born(
    on: On<'_>,
    collection: &Collection,
    stage: PhotoStage,
    out: &Path,
    born: &Born,
    progress: &(dyn Fn(vocab_pipeline::features::Progress) + Sync),
) -> anyhow::Result<(FeatureSummary, Spread, Placed)> {
    use vocab_pipeline::features::{Given, Progress, manifests_from};
    let PhotoStage::Features(params, from) = &stage else {
        anyhow::bail!("partitions are born on the nodes of the features stage only");
    };
    let dir = born.dir.display().to_string();
    let source = out.display().to_string();
    let mut told = |photos: usize| {
        progress(Progress {
            images: photos,
            patches: None,
        });
    };
    let mut team = start(on, out, "the features stage", |nodes| {
        PhotoTeam::start_keeping(nodes, collection, &stage, &dir)
    })?;
    let (sized, placed) = (team.crew)
        .born(&dir, born.parts, born.element, &source, &mut told)
        .with_context(|| format!("the features stage on {}", team.place.whence))?;
    let spread = team.spread(0);
    let described = (*params, from.clone());
    let recipes =
        vocab_cluster::jobs::born::Recipes::of(collection, described, &sized, &placed.manifest);
    let summary = manifests_from(collection, out, &mut Given(Some(sized)), progress)?;
    let placed = Placed {
        manifest: placed.manifest,
        recipes,
    };
    Ok((summary, spread, placed))
}

/// Partitions born on the nodes: their manifest and how each is made again from its photos.
pub struct Placed {
    /// The manifest (each node keeps a copy beside its partitions).
    pub manifest: vocab_pipeline::partition::Manifest,
    /// The recipes.
    pub recipes: vocab_cluster::jobs::born::Recipes,
}

/// The digest of everything a photo job's results depend on: the stage's settings, the photos
/// (folder and listing), the decoders, the vocabulary's bytes, and the files of descriptors
/// made elsewhere (names, sizes, times).
fn job_key(
    collection: &Collection,
    stage: &PhotoStage,
    vocabulary: Option<&Words>,
) -> anyhow::Result<String> {
    let mut bytes = serde_json::to_vec(&(
        stage,
        collection.root(),
        collection.listing(),
        vocab_pipeline::image_io::DECODING,
    ))?;
    bytes.extend(vocabulary.map(Words::to_bytes).unwrap_or_default());
    if let Some(from) = stage.elsewhere() {
        let files = crate::run::step::folder_fingerprint(Path::new(&from.dir))?;
        bytes.extend(files.as_bytes());
    }
    Ok(crate::run::step::short_hash(&bytes))
}

/// Where a photo stage writing `out` keeps its rounds: `<out>.rounds/`.
pub fn journal_dir(out: &Path) -> std::path::PathBuf {
    manifest_path(out, "rounds")
}
