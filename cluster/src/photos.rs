//! The photo stages (features, encode) sharded over an SPMD team: every member decodes and
//! describes contiguous ranges of the collection with its own threads, the root writes the
//! results in picture-id order, so the files are byte for byte those of one machine.
//!
//! A job starts with [`PhotoRoot::start`]: the root broadcasts the stage's settings and the
//! collection's listing (relative paths, as every member sees the photo folder) and, for encode,
//! the vocabulary; each member rebuilds the collection, checks that photos the root sees are
//! there too, and answers. Then [`PhotoRoot::round`] deals a run of photos out in contiguous
//! ranges (rank order is photo order) and gathers each member's results: per photo its size and
//! patches, or the reason it was skipped. The root checks every piece (counts, lengths, positions
//! inside the photo, finite values) before anything is written.
//!
//! Rounds are small (a few dozen photos per member), so memory at the root is bounded and a
//! round lost with a member is cheap to redo: the TCP driver redoes it on a new team
//! (`crate::driver::PhotoDriver`); results already written stay written.

use std::ops::Range;
use std::path::{Component, Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use vocab_pipeline::encode::{EncodeParams, Encoder};
use vocab_pipeline::features::{self, Described, FeatureParams, FeaturesError, Outcome, Source};
use vocab_pipeline::hog::{DIMS, PATCH_SIDE};
use vocab_pipeline::image_io::Collection;
use vocab_pipeline::kmeans::Centroids;
use vocab_pipeline::patch::{MAX_PER_IMAGE, Sampling};

use crate::collective::{
    Algorithm, BroadcastPlan, MAX_CONTROL, Team, broadcast, broadcast_message, gather,
};
use crate::net::messages::BUILD;
use crate::net::transport::Transport;
use crate::spmd::{Command, EngineError, Members, decode, encode};

/// Largest piece of one round a member sends (bytes): far above a round of dense photos, it
/// only stops a corrupt size from allocating.
const MAX_PIECE: u64 = 1 << 34;

/// Photos the root checks are present at every member.
const PRESENT: usize = 16;

/// Which stage a photo job runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PhotoStage {
    /// Patches of every photo (the features stage).
    Features(FeatureParams),
    /// A histogram of every photo over the vocabulary sent with the job (encode).
    Encode(EncodeParams),
}

impl PhotoStage {
    /// Values of a result's histogram with a vocabulary of `k` words (0 for features).
    pub fn histogram_len(&self, k: usize) -> usize {
        match self {
            Self::Encode(p) => vocab_pipeline::encode::encoded_len(k, p.levels.max(1)),
            Self::Features(_) => 0,
        }
    }
}

/// What the members receive when a job starts (JSON).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Job {
    /// The photo folder, as every member sees it.
    root: String,
    /// Relative path and why unusable, in picture-id order.
    photos: Vec<(String, Option<String>)>,
    /// Photos the root found in its folder: each member checks it finds them too.
    present: Vec<u32>,
    stage: PhotoStage,
    /// Words of the vocabulary that follows (encode).
    k: u64,
    /// Features only: members keep the patches they describe (for [`crate::born`]) and send
    /// the root only each photo's size and patch count.
    #[serde(default)]
    keep: bool,
    /// With `keep`: the partition folder (as members see it, [`crate::born::member_dir`]) under
    /// which each member also saves its kept rounds, so that a job interrupted before its cut
    /// resumes without describing them again.
    #[serde(default)]
    keep_dir: Option<String>,
}

/// Where a member saves the rounds it keeps (`.kept-<job digest>-<rank>@<node>` in its partition
/// folder).
fn kept_journal(
    keep_dir: Option<&str>,
    digest: &str,
    me: usize,
    node: &str,
) -> Option<std::io::Result<Journal>> {
    let dir = keep_dir?;
    // One per member: members may share the folder (one filesystem, no `{node}` in it).
    let own = format!(".kept-{digest}-{me}@{}", node.replace('/', "_"));
    let folder = Path::new(&crate::born::member_dir(dir, me, node)).join(own);
    Some(Journal::open(&folder, digest, 0))
}

/// A kept features job's setting ([`PhotoRoot::start_keeping`]).
#[derive(Debug, Clone)]
struct Keep {
    /// The partition folder under which members save their kept rounds.
    dir: Option<String>,
}

/// A member's answer to a job.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ready {
    error: Option<String>,
}

/// A member's job: the collection and what to make of its photos.
#[derive(Debug)]
pub(crate) struct Work {
    pub(crate) collection: Collection,
    stage: Stage,
    /// Whether described photos are kept here rather than sent ([`Job::keep`]).
    keep: bool,
    /// The kept results, by the first photo of their range.
    pub(crate) held: std::sync::Mutex<std::collections::BTreeMap<usize, Vec<Outcome<Described>>>>,
    /// Where kept rounds are saved too (a job with a partition folder).
    pub(crate) journal: Option<Journal>,
}

#[derive(Debug)]
enum Stage {
    Features(FeatureParams),
    Encode(Box<Encoder>),
}

/// Bytes of `k` words of the descriptor's dims, if they can be counted.
fn vocabulary_bytes(k: u64) -> Option<u64> {
    k.checked_mul(DIMS as u64)?.checked_mul(4)
}

/// Checks settings that came over the network before any photo is touched.
pub(crate) fn check_stage(stage: &PhotoStage, k: u64) -> Result<(), String> {
    let check_features = |p: &FeatureParams| match p.sampling {
        Sampling::Random { per_image, .. } if !(1..=MAX_PER_IMAGE).contains(&per_image) => {
            Err(format!("{per_image} patches per photo"))
        }
        Sampling::Dense { stride: 0 } => Err("stride 0".to_string()),
        _ if p.max_side.is_some_and(|s| s < PATCH_SIDE) => Err("max_side below a patch".into()),
        _ if p.max_pixels == 0 => Err("max_pixels 0".into()),
        _ => Ok(()),
    };
    match stage {
        PhotoStage::Features(p) => check_features(p),
        PhotoStage::Encode(p) => {
            check_features(&p.features)?;
            if !matches!(p.features.sampling, Sampling::Dense { .. }) {
                return Err("encoding needs dense sampling".into());
            }
            if !(1..=8).contains(&p.levels) {
                return Err(format!("{} pyramid levels", p.levels));
            }
            if p.scales.len() > 8 {
                return Err(format!("{} patch scales", p.scales.len()));
            }
            if let Some(s) = p.soft
                && (s.words == 0 || s.words as u64 > k || !s.sharpness.is_finite())
            {
                return Err(format!("soft assignment over {} words", s.words));
            }
            if k == 0 || vocabulary_bytes(k).is_none_or(|b| b > MAX_CONTROL) {
                return Err(format!("a vocabulary of {k} words"));
            }
            Ok(())
        }
    }
}

/// A relative path that stays inside the photo folder.
pub(crate) fn inside(rel: &str) -> bool {
    Path::new(rel)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Builds a member's work from the job (and the vocabulary), or says why it cannot.
/// `me` is the member's rank and node name and `digest` names the job's bytes (where a kept
/// job's rounds are saved).
fn open_work(
    job: Job,
    vocabulary: Vec<u8>,
    me: (usize, &str),
    digest: &str,
) -> Result<Work, String> {
    check_stage(&job.stage, job.k)?;
    if let Some((bad, _)) = job.photos.iter().find(|(p, _)| !inside(p)) {
        return Err(format!("photo path {bad:?} leaves the photo folder"));
    }
    let keep_dir = job.keep_dir.clone().filter(|_| job.keep);
    let root = Path::new(&job.root);
    let collection = Collection::listed(root, job.photos).map_err(|e| vocab_pipeline::chain(&e))?;
    for &id in &job.present {
        let photo = collection
            .photos()
            .get(id as usize)
            .ok_or_else(|| format!("photo {id} of {}", collection.photos().len()))?;
        let path = collection.path_of(photo);
        if !path.is_file() {
            return Err(format!(
                "{} is not there; the photo folder must hold the same photos on every node",
                path.display()
            ));
        }
    }
    let stage = match job.stage {
        PhotoStage::Features(p) => Stage::Features(p),
        PhotoStage::Encode(p) => {
            let values = vocabulary
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect::<Vec<_>>();
            if values.iter().any(|v| !v.is_finite()) {
                return Err("the vocabulary holds values that are not finite".into());
            }
            let encoder = Encoder::new(Centroids::new(values, DIMS), p, root)
                .map_err(|e| vocab_pipeline::chain(&e))?;
            Stage::Encode(Box::new(encoder))
        }
    };
    if job.keep && !matches!(stage, Stage::Features(_)) {
        return Err("only the features stage keeps its results at the members".into());
    }
    let journal = kept_journal(keep_dir.as_deref(), digest, me.0, me.1)
        .transpose()
        .map_err(|e| format!("cannot keep rounds under {keep_dir:?}: {e}"))?;
    Ok(Work {
        collection,
        stage,
        keep: job.keep,
        held: std::sync::Mutex::default(),
        journal,
    })
}

impl Work {
    /// The results of the photos `range`, as a piece: compute seconds, then the outcomes.
    fn piece(&self, range: Range<usize>) -> Vec<u8> {
        let started = Instant::now();
        // The seconds go first, written once the results are in.
        let mut piece = vec![0u8; 8];
        match &self.stage {
            Stage::Features(p) if self.keep => {
                let (start, photos) = (range.start, range.len());
                let total = self.collection.photos().len();
                // A round saved by an interrupted run of the job is taken as it is.
                let saved = (self.journal.as_ref())
                    .and_then(|j| j.load::<Described>(start, total))
                    .filter(|o| o.len() == photos);
                let outcomes = saved.unwrap_or_else(|| {
                    let described = features::describe_range(&self.collection, p, range);
                    if let Some(j) = &self.journal {
                        // Without it the round is described again if the job is interrupted.
                        let _ = j.save(start, &described);
                    }
                    described
                });
                let sizes: Vec<Outcome<()>> = outcomes.iter().map(Outcome::sized).collect();
                put_outcomes(&mut piece, &sizes);
                crate::share::lock(&self.held).insert(start, outcomes);
            }
            Stage::Features(p) => {
                let outcomes = features::describe_range(&self.collection, p, range);
                put_outcomes(&mut piece, &outcomes);
            }
            Stage::Encode(encoder) => {
                put_outcomes(&mut piece, &encoder.encode_range(&self.collection, range));
            }
        }
        piece[..8].copy_from_slice(&started.elapsed().as_secs_f64().to_le_bytes());
        piece
    }
}

/// A member's side of [`Command::Photos`]: the job and vocabulary broadcasts, then its answer.
/// Errors of the job itself go back to the root in the answer; the member keeps serving.
pub(crate) fn serve_job(
    transport: &dyn Transport,
    job_bytes: u64,
    vocabulary_bytes: u64,
    build: &str,
) -> Result<Option<std::sync::Arc<Work>>, EngineError> {
    let control = Team::ranks(transport);
    let (job, vocabulary) = receive_job(&control, job_bytes, vocabulary_bytes)?;
    let digest = format!("{:08x}", crc32fast::hash(&job));
    let node = transport.host();
    let work = if build != BUILD {
        Err(format!("it runs {BUILD}, the root runs {build}"))
    } else {
        decode::<Job>(0, &job)
            .map_err(|e| e.to_string())
            .and_then(|job| {
                let want = vocabulary_bytes_of(&job);
                if want != Some(vocabulary.len() as u64) {
                    return Err(format!(
                        "a vocabulary of {} bytes for {} words",
                        vocabulary.len(),
                        job.k
                    ));
                }
                open_work(job, vocabulary, (transport.rank(), &node), &digest)
            })
    };
    let (reply, work) = match work {
        Ok(w) => (Ready { error: None }, Some(std::sync::Arc::new(w))),
        Err(error) => (Ready { error: Some(error) }, None),
    };
    gather(&control, &encode(&reply), MAX_CONTROL)?;
    Ok(work)
}

/// Vocabulary bytes a job comes with.
fn vocabulary_bytes_of(job: &Job) -> Option<u64> {
    match job.stage {
        PhotoStage::Features(_) => Some(0),
        PhotoStage::Encode(_) => vocabulary_bytes(job.k),
    }
}

/// The plan of the job's broadcasts: the pipelined chain in rank order.
fn job_plan() -> BroadcastPlan {
    BroadcastPlan {
        algorithm: Algorithm::Chain,
        chunk: 1 << 20,
        chains: 1,
    }
}

/// Receives the job and vocabulary broadcasts (both lengths checked first).
fn receive_job(
    control: &Team<'_>,
    job_bytes: u64,
    vocabulary_bytes: u64,
) -> Result<(Vec<u8>, Vec<u8>), EngineError> {
    let mut bufs = Vec::new();
    for bytes in [job_bytes, vocabulary_bytes] {
        if bytes > MAX_CONTROL {
            return Err(EngineError::Shape {
                got: usize::try_from(bytes).unwrap_or(usize::MAX),
                want: MAX_CONTROL as usize,
            });
        }
        let mut data = vec![0u8; bytes as usize];
        broadcast(control, job_plan(), &mut data)?;
        bufs.push(data);
    }
    let vocabulary = bufs.pop().unwrap_or_default();
    let job = bufs.pop().unwrap_or_default();
    Ok((job, vocabulary))
}

/// A member's range of the next round, being computed on a thread of its own while this round's
/// piece travels.
#[derive(Debug)]
pub(crate) struct Ahead {
    range: (u64, u64),
    piece: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Ahead {
    /// Waits for the range to be done (and, for a kept job, kept).
    pub(crate) fn wait(self) -> Option<Vec<u8>> {
        self.piece.recv().ok()
    }
}

/// This member's range among `ranges`, checked against the collection.
fn my_range(work: &Work, ranges: &[(u64, u64)], me: usize) -> Result<(u64, u64), EngineError> {
    let &(start, end) = ranges.get(me).ok_or_else(|| EngineError::Malformed {
        rank: 0,
        reason: format!("{} ranges for rank {me}", ranges.len()),
    })?;
    let n = work.collection.photos().len() as u64;
    if start > end || end > n {
        return Err(EngineError::Malformed {
            rank: 0,
            reason: format!("photos {start}..{end} of a collection of {n}"),
        });
    }
    Ok((start, end))
}

/// A member's side of [`Command::Shard`]: its range of this round (taken from `ahead` when it
/// was computed there), then its range of the next round (`next`, if any) started on a thread
/// of its own, then this round's piece gathered at the root: computing the next round overlaps
/// sending this one.
pub(crate) fn serve_shard(
    transport: &dyn Transport,
    work: Option<&std::sync::Arc<Work>>,
    ahead: &mut Option<Ahead>,
    ranges: &[(u64, u64)],
    next: &[(u64, u64)],
) -> Result<(), EngineError> {
    let control = Team::ranks(transport);
    let me = transport.rank();
    let work = work.ok_or(EngineError::NotLoaded(me))?;
    let (start, end) = my_range(work, ranges, me)?;
    let done = match ahead.take() {
        Some(a) if a.range == (start, end) => a.piece.recv().ok(),
        _ => None,
    };
    let piece = done.unwrap_or_else(|| work.piece(start as usize..end as usize));
    if !next.is_empty() {
        let (s, e) = my_range(work, next, me)?;
        if s < e {
            let (tx, rx) = std::sync::mpsc::channel();
            let work = std::sync::Arc::clone(work);
            let spawned = std::thread::Builder::new()
                .name("photos-ahead".into())
                .spawn(move || {
                    // The receiver may be gone (the team ended): nothing to do then.
                    let _ = tx.send(work.piece(s as usize..e as usize));
                });
            // Without a thread the range is simply computed when its round comes.
            if spawned.is_ok() {
                *ahead = Some(Ahead {
                    range: (s, e),
                    piece: rx,
                });
            }
        }
    }
    gather(&control, &piece, MAX_PIECE)?;
    Ok(())
}

/// A member's time in a photo stage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemberTime {
    /// Its host (or node name).
    pub host: String,
    /// Seconds it spent decoding and describing.
    pub seconds: f64,
    /// Photos it did.
    pub photos: u64,
}

/// The root of a photo job on an SPMD team.
pub struct PhotoRoot<'t> {
    transport: Box<dyn Transport + 't>,
    /// The root does a share of the photos too (an MPI rank 0), else only the others.
    root_works: bool,
    own: Option<Work>,
    /// Values of a histogram (encode), for checking pieces.
    histogram: usize,
    /// Per rank.
    times: Vec<MemberTime>,
    /// Bytes of results gathered so far, and of the job's broadcasts.
    bytes: u64,
    /// Photos in the collection.
    photos: usize,
    /// What the members keep after [`PhotoRoot::kept_rounds`].
    kept: Option<crate::born::Kept>,
}

impl std::fmt::Debug for PhotoRoot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhotoRoot")
            .field("root_works", &self.root_works)
            .field("times", &self.times)
            .finish()
    }
}

impl<'t> PhotoRoot<'t> {
    /// Starts a photo job on every member of `transport` (whose hosts `members` gathered):
    /// `collection` as the members see it, `stage`, and for encode the `vocabulary`.
    pub fn start(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        collection: &Collection,
        stage: &PhotoStage,
        vocabulary: Option<&Centroids>,
        root_works: bool,
    ) -> Result<Self, EngineError> {
        Self::begin(
            transport, members, collection, stage, vocabulary, root_works, None,
        )
    }

    /// Starts a features job whose members keep the patches they describe
    /// ([`PhotoRoot::kept_rounds`], then [`PhotoRoot::cut`] makes them partitions). With
    /// `dir` (the partition folder the cut will write, as members see it), members also save
    /// each kept round there, so that the job run again after an interruption takes them back
    /// instead of describing the photos again.
    pub fn start_keeping(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        collection: &Collection,
        params: FeatureParams,
        root_works: bool,
        dir: Option<&str>,
    ) -> Result<Self, EngineError> {
        let stage = PhotoStage::Features(params);
        let keep = Keep {
            dir: dir.map(str::to_string),
        };
        Self::begin(
            transport,
            members,
            collection,
            &stage,
            None,
            root_works,
            Some(keep),
        )
    }

    fn begin(
        transport: Box<dyn Transport + 't>,
        members: &Members,
        collection: &Collection,
        stage: &PhotoStage,
        vocabulary: Option<&Centroids>,
        root_works: bool,
        keep: Option<Keep>,
    ) -> Result<Self, EngineError> {
        let k = vocabulary.map_or(0, |v| v.k() as u64);
        let histogram = stage.histogram_len(k as usize);
        let job = Job {
            root: collection.root().display().to_string(),
            photos: collection.listing(),
            present: present(collection),
            stage: stage.clone(),
            k,
            keep: keep.is_some(),
            keep_dir: keep.and_then(|k| k.dir),
        };
        let job = encode(&job);
        let mut vocabulary: Vec<u8> = vocabulary
            .map(|v| v.as_slice().iter().flat_map(|x| x.to_le_bytes()).collect())
            .unwrap_or_default();
        let control = Team::ranks(transport.as_ref());
        let command = Command::Photos {
            job_bytes: job.len() as u64,
            vocabulary_bytes: vocabulary.len() as u64,
            build: BUILD.into(),
        };
        broadcast_message(&control, Some(&encode(&command)))?;
        let mut job_copy = job.clone();
        broadcast(&control, job_plan(), &mut job_copy)?;
        broadcast(&control, job_plan(), &mut vocabulary)?;
        // The root's own work (when it does photos) is checked like a member's, and its
        // answer gathered with theirs, so that every member leaves the job's collectives alike.
        let own = if root_works {
            let digest = format!("{:08x}", crc32fast::hash(&job));
            let me = (transport.rank(), transport.host());
            decode::<Job>(0, &job)
                .map_err(|e| e.to_string())
                .and_then(|job| open_work(job, vocabulary.clone(), (me.0, &me.1), &digest))
                .map(Some)
        } else {
            Ok(None)
        };
        let mine = Ready {
            error: own.as_ref().err().cloned(),
        };
        let replies = gather(&control, &encode(&mine), MAX_CONTROL)?.unwrap_or_default();
        for (rank, bytes) in replies.iter().enumerate() {
            let ready: Ready = decode(rank, bytes)?;
            if let Some(reason) = ready.error {
                return Err(EngineError::Refused {
                    rank,
                    host: members.hosts.get(rank).cloned().unwrap_or_default(),
                    reason,
                });
            }
        }
        let own = own.map_err(|reason| EngineError::Refused {
            rank: 0,
            host: transport.host(),
            reason,
        })?;
        let size = transport.size();
        let times = (0..size)
            .map(|r| MemberTime {
                host: members.hosts.get(r).cloned().unwrap_or_default(),
                ..MemberTime::default()
            })
            .collect();
        let bytes = (job.len() + vocabulary.len()) as u64 * (size as u64 - 1);
        Ok(Self {
            transport,
            root_works,
            own,
            histogram,
            times,
            bytes,
            photos: collection.photos().len(),
            kept: None,
        })
    }

    /// Members that do photos.
    pub fn workers(&self) -> usize {
        let size = self.transport.size();
        if self.root_works { size } else { size - 1 }
    }

    /// The members' times so far (ranks that do no photos left out).
    pub fn times(&self) -> Vec<MemberTime> {
        let skip = usize::from(!self.root_works);
        self.times[skip..].to_vec()
    }

    /// [`PhotoRoot::times`], counted from zero again after.
    pub fn take_times(&mut self) -> Vec<MemberTime> {
        let times = self.times();
        for t in &mut self.times {
            t.seconds = 0.0;
            t.photos = 0;
        }
        times
    }

    /// Bytes the job moved so far: its broadcasts to every member and the results gathered.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// [`PhotoRoot::bytes`], counted from zero again after.
    pub fn take_bytes(&mut self) -> u64 {
        std::mem::take(&mut self.bytes)
    }

    /// The transport (to release the members with [`crate::spmd::exit`]).
    pub fn transport(&self) -> &dyn Transport {
        self.transport.as_ref()
    }

    /// Each rank's part of the photos `range`: contiguous, even ranges in rank order (empty for
    /// a root that does no photos).
    fn deal(&self, range: &Range<usize>) -> Vec<(u64, u64)> {
        let size = self.transport.size();
        let first = usize::from(!self.root_works);
        let workers = size - first;
        let n = range.len();
        (0..size)
            .map(|r| match r.checked_sub(first) {
                None => (range.start as u64, range.start as u64),
                Some(j) => (
                    (range.start + n * j / workers) as u64,
                    (range.start + n * (j + 1) / workers) as u64,
                ),
            })
            .collect()
    }

    /// Has the members do the photos `range` and returns their results in picture-id order,
    /// every piece checked. With `next`, the members start on their part of that range while
    /// this round's pieces travel (the next call should ask for it).
    pub fn round<T: Value>(
        &mut self,
        range: Range<usize>,
        next: Option<Range<usize>>,
    ) -> Result<Vec<Outcome<T>>, EngineError> {
        let ranges = self.deal(&range);
        let next = next.map(|r| self.deal(&r)).unwrap_or_default();
        Ok(self.shard(ranges, next)?.into_iter().flatten().collect())
    }

    /// Has every rank do its photos `ranges[rank]` (starting on `next[rank]` early) and returns
    /// each rank's results, every piece checked.
    fn shard<T: Value>(
        &mut self,
        ranges: Vec<(u64, u64)>,
        next: Vec<(u64, u64)>,
    ) -> Result<Vec<Vec<Outcome<T>>>, EngineError> {
        let first = usize::from(!self.root_works);
        let control = Team::ranks(self.transport.as_ref());
        let command = Command::Shard {
            ranges: ranges.clone(),
            next,
        };
        broadcast_message(&control, Some(&encode(&command)))?;
        let own = match &self.own {
            Some(work) => work.piece(ranges[0].0 as usize..ranges[0].1 as usize),
            None => Vec::new(),
        };
        let pieces = gather(&control, &own, MAX_PIECE)?.unwrap_or_default();
        let mut outcomes: Vec<Vec<Outcome<T>>> = (0..pieces.len()).map(|_| Vec::new()).collect();
        for (rank, piece) in pieces.iter().enumerate().skip(first) {
            let (start, end) = ranges.get(rank).copied().unwrap_or_default();
            let expect = Expect {
                photos: (end - start) as usize,
                histogram: self.histogram,
            };
            let (seconds, got) =
                take_piece::<T>(piece, &expect).map_err(|reason| EngineError::Malformed {
                    rank,
                    reason: format!("photos {start}..{end}: {reason}"),
                })?;
            let time = &mut self.times[rank];
            time.seconds += seconds;
            time.photos += end - start;
            self.bytes += piece.len() as u64;
            outcomes[rank] = got;
        }
        Ok(outcomes)
    }

    /// The rounds of a job started with [`PhotoRoot::start_keeping`]: each member does one
    /// contiguous shard of the collection (rank order is photo order), a few dozen photos a
    /// round, and keeps the patches; the root gets each photo's size and patch count, returned
    /// in picture-id order. `progress` is told the photos done after each round.
    pub fn kept_rounds(
        &mut self,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Outcome<()>>, EngineError> {
        let total = self.photos;
        let shards = self.deal(&(0..total));
        let per = shard_photos(total, self.workers()) as u64;
        let rounds = (shards.iter())
            .map(|&(s, e)| (e - s).div_ceil(per))
            .max()
            .unwrap_or(0);
        let at = |r: u64| -> Vec<(u64, u64)> {
            (shards.iter())
                .map(|&(s, e)| {
                    let a = s.saturating_add(r.saturating_mul(per)).min(e);
                    (a, a.saturating_add(per).min(e))
                })
                .collect()
        };
        let mut results: Vec<Option<Outcome<()>>> = vec![None; total];
        let mut done = 0;
        for r in 0..rounds {
            let next = if r + 1 < rounds {
                at(r + 1)
            } else {
                Vec::new()
            };
            let ranges = at(r);
            for (rank, got) in self
                .shard::<()>(ranges.clone(), next)?
                .into_iter()
                .enumerate()
            {
                let start = ranges.get(rank).map_or(0, |r| r.0 as usize);
                done += got.len();
                for (i, outcome) in got.into_iter().enumerate() {
                    results[start + i] = Some(outcome);
                }
            }
            progress(done);
        }
        let records = (shards.iter())
            .map(|&(s, e)| {
                (results[s as usize..e as usize].iter())
                    .flatten()
                    .map(|o| o.patches() as u64)
                    .sum()
            })
            .collect();
        let results: Option<Vec<Outcome<()>>> = results.into_iter().collect();
        let results = results.ok_or_else(|| EngineError::Malformed {
            rank: 0,
            reason: "the shards left photos undone".into(),
        })?;
        self.kept = Some(crate::born::Kept { shards, records });
        Ok(results)
    }
}

impl PhotoRoot<'_> {
    /// After [`PhotoRoot::kept_rounds`]: has the members cut the patches they kept into the
    /// `parts` partitions one machine's `split` would make of the feature file, each written by
    /// the member holding most of its records into its partition folder (`dir`, as every
    /// member sees it; `{rank}` stands for the member's rank), only the records across shard
    /// boundaries travelling between members; returns the manifest (source named `source`),
    /// also written beside every member's partitions.
    pub fn cut(
        &mut self,
        dir: &str,
        parts: usize,
        element: vocab_pipeline::store::Element,
        source: &str,
    ) -> Result<crate::born::Born, EngineError> {
        let kept = self.kept.take().ok_or(EngineError::NotLoaded(0))?;
        let cut = crate::born::Cut {
            dir: dir.to_string(),
            parts: parts as u64,
            element: element.name().to_string(),
            shards: kept.shards,
            records: kept.records,
        };
        let hosts: Vec<String> = self.times.iter().map(|t| t.host.clone()).collect();
        let born = crate::born::root(
            self.transport.as_ref(),
            &hosts,
            self.own.as_ref(),
            &cut,
            source,
        )?;
        self.bytes += born.bytes;
        Ok(born)
    }
}

/// Up to [`PRESENT`] photos spread over the collection that the root finds in its folder.
fn present(collection: &Collection) -> Vec<u32> {
    let photos = collection.photos();
    let step = photos.len().div_ceil(PRESENT).max(1);
    (photos.iter().step_by(step))
        .filter(|p| p.unusable.is_none() && collection.path_of(p).is_file())
        .map(|p| p.picture_id)
        .collect()
}

/// Photos per member in one round: a few dozen, fewer when the collection is small so that every
/// member gets several rounds.
pub fn shard_photos(photos: usize, workers: usize) -> usize {
    (photos / (workers.max(1) * 4)).clamp(1, 32)
}

/// A photo stage's source of results fed by rounds on a team: `round` does the photos of a
/// range (on whichever members it has) and returns their results in order; it is told the
/// range of the round after, so that the members can start on it early.
pub struct Rounds<F> {
    round: F,
    /// Photos per round.
    per_round: usize,
    total: usize,
}

impl<F> std::fmt::Debug for Rounds<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rounds")
            .field("per_round", &self.per_round)
            .field("total", &self.total)
            .finish()
    }
}

impl<F> Rounds<F> {
    /// Rounds of `per_round` photos of a collection of `total`.
    pub fn new(round: F, per_round: usize, total: usize) -> Self {
        Self {
            round,
            per_round: per_round.max(1),
            total,
        }
    }
}

impl<T, E, F> Source<T> for Rounds<F>
where
    E: std::error::Error + Send + Sync + 'static,
    F: FnMut(Range<usize>, Option<Range<usize>>) -> Result<Vec<Outcome<T>>, E>,
{
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        if from >= self.total {
            return Ok(None);
        }
        let end = self.total.min(from.saturating_add(self.per_round));
        let after = end..self.total.min(end.saturating_add(self.per_round));
        (self.round)(from..end, (!after.is_empty()).then_some(after))
            .map(Some)
            .map_err(|e| FeaturesError::Source(Box::new(e)))
    }
}

/// Rounds already done, kept on disk beside the stage's output, so that a stage interrupted on the
/// way (a driver killed, a job ended with a rank) resumes where it stopped: [`Journaled`] serves
/// a saved round instead of asking the team again. A round is one file (`<start>.round`,
/// written whole or not at all): magic, the photo range, the CRC-32 of the body, and the body
/// in the pieces' layout, read back with the same checks.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    /// Values of a histogram (encode), for checking saved rounds.
    histogram: usize,
}

/// Opens a saved round's file.
const ROUND_MAGIC: [u8; 8] = *b"VOCABRND";

impl Journal {
    /// The journal in `dir` (created if absent) of the job named `key` (a digest of everything
    /// its results depend on: settings, photos, vocabulary), whose histograms hold `histogram`
    /// values (0 for features). Rounds saved under another key (an earlier run with other
    /// settings writing the same file) are removed.
    pub fn open(dir: &Path, key: &str, histogram: usize) -> std::io::Result<Self> {
        let key_file = dir.join("job.key");
        let same = std::fs::read_to_string(&key_file).is_ok_and(|k| k == key);
        if !same && dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir_all(dir)?;
        if !same {
            vocab_pipeline::atomic::write(&key_file, key.as_bytes())?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            histogram,
        })
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, start: usize) -> PathBuf {
        self.dir.join(format!("{start:010}.round"))
    }

    /// The round saved at `from` (photos `from..end` with `end <= total`), if there is a whole
    /// one; a file that is damaged or does not fit is named on stderr and the round redone.
    pub fn load<T: Value>(&self, from: usize, total: usize) -> Option<Vec<Outcome<T>>> {
        let path = self.path(from);
        let bytes = std::fs::read(&path).ok()?;
        let read = || -> Result<Vec<Outcome<T>>, String> {
            let mut input = Reader { bytes: &bytes };
            if input.take(8)? != ROUND_MAGIC {
                return Err("not a saved round".into());
            }
            let start = u64::from_le_bytes(input.take(8)?.try_into().map_err(|_| "short")?);
            let end = u64::from_le_bytes(input.take(8)?.try_into().map_err(|_| "short")?);
            let crc = input.u32()?;
            if start != from as u64 || end <= start || end > total as u64 {
                return Err(format!("photos {start}..{end} of {total}"));
            }
            if crc32fast::hash(input.bytes) != crc {
                return Err("checksum mismatch".into());
            }
            let expect = Expect {
                photos: (end - start) as usize,
                histogram: self.histogram,
            };
            take_piece::<T>(input.bytes, &expect).map(|(_, outcomes)| outcomes)
        };
        match read() {
            Ok(outcomes) => Some(outcomes),
            Err(reason) => {
                eprintln!("{}: {reason}; doing these photos again", path.display());
                None
            }
        }
    }

    /// Saves the round of `outcomes` that starts at `from` (atomically).
    pub fn save<T: Value>(&self, from: usize, outcomes: &[Outcome<T>]) -> std::io::Result<()> {
        let mut body = 0f64.to_le_bytes().to_vec();
        put_outcomes(&mut body, outcomes);
        let mut bytes = ROUND_MAGIC.to_vec();
        bytes.extend_from_slice(&(from as u64).to_le_bytes());
        bytes.extend_from_slice(&((from + outcomes.len()) as u64).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&body);
        vocab_pipeline::atomic::write(&self.path(from), &bytes)
    }

    /// Removes the journal (the stage finished).
    pub fn remove(self) -> std::io::Result<()> {
        std::fs::remove_dir_all(&self.dir)
    }
}

/// A source whose rounds are saved in a [`Journal`] as they come, and served from it when an
/// earlier run saved them.
#[derive(Debug)]
pub struct Journaled<'j, S> {
    inner: S,
    journal: &'j Journal,
    total: usize,
    /// Photos served from the journal.
    pub resumed: usize,
}

impl<'j, S> Journaled<'j, S> {
    /// `inner`'s rounds through `journal`, for a collection of `total` photos.
    pub fn new(inner: S, journal: &'j Journal, total: usize) -> Self {
        Self {
            inner,
            journal,
            total,
            resumed: 0,
        }
    }
}

impl<T: Value, S: Source<T>> Source<T> for Journaled<'_, S> {
    fn next(&mut self, from: usize) -> Result<Option<Vec<Outcome<T>>>, FeaturesError> {
        if let Some(saved) = self.journal.load::<T>(from, self.total) {
            self.resumed += saved.len();
            return Ok(Some(saved));
        }
        let batch = self.inner.next(from)?;
        if let Some(outcomes) = &batch {
            self.journal.save(from, outcomes).map_err(|source| {
                FeaturesError::Source(Box::new(vocab_pipeline::store::StoreError::Io {
                    path: self.journal.path(from),
                    source,
                }))
            })?;
        }
        Ok(batch)
    }
}

/// What a piece must hold.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// Photos in it.
    pub photos: usize,
    /// Values of a histogram (encode).
    pub histogram: usize,
}

/// A stage's result for one photo, as it travels.
pub trait Value: Sized {
    /// Appends it.
    fn put(&self, out: &mut Vec<u8>);
    /// Bytes [`Value::put`] appends.
    fn wire_len(&self) -> usize;
    /// Reads one, checked against the photo's size and `expect`.
    fn take(
        input: &mut Reader<'_>,
        width: usize,
        height: usize,
        patches: usize,
        expect: &Expect,
    ) -> Result<Self, String>;
}

/// Reads a piece from the front, every length checked against what is left.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err(format!("{n} bytes wanted, {} left", self.bytes.len()));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn f32s(&mut self, n: usize) -> Result<Vec<f32>, String> {
        let len = n.checked_mul(4).ok_or("a length that overflows")?;
        let values: Vec<f32> = self
            .take(len)?
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("value {i} is not finite"));
        }
        Ok(values)
    }
}

fn put_u32(out: &mut Vec<u8>, v: usize) {
    // Sizes of one photo (sides below 65,536, counts far below 2^32).
    out.extend_from_slice(&u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_f32s(out: &mut Vec<u8>, values: &[f32]) {
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

impl Value for Described {
    fn wire_len(&self) -> usize {
        4 + 4 * self.positions.len() + 4 * self.values.len()
    }

    fn put(&self, out: &mut Vec<u8>) {
        put_u32(out, self.positions.len());
        for &(r, c) in &self.positions {
            // `describe` skips photos with a side above u16::MAX.
            out.extend_from_slice(&(r as u16).to_le_bytes());
            out.extend_from_slice(&(c as u16).to_le_bytes());
        }
        put_f32s(out, &self.values);
    }

    fn take(
        input: &mut Reader<'_>,
        width: usize,
        height: usize,
        patches: usize,
        _: &Expect,
    ) -> Result<Self, String> {
        let n = input.u32()? as usize;
        if n != patches {
            return Err(format!("{n} positions for {patches} patches"));
        }
        let mut positions = Vec::with_capacity(n.min(input.bytes.len() / 4));
        for _ in 0..n {
            let (r, c) = (usize::from(input.u16()?), usize::from(input.u16()?));
            if r + PATCH_SIDE > height || c + PATCH_SIDE > width {
                return Err(format!(
                    "a patch at ({r}, {c}) of a {width} x {height} photo"
                ));
            }
            positions.push((r, c));
        }
        let values = input.f32s(n.checked_mul(DIMS).ok_or("too many patches")?)?;
        Ok(Self {
            width,
            height,
            positions,
            values,
        })
    }
}

/// Nothing travels with a photo's size and patch count (features kept at the members).
impl Value for () {
    fn wire_len(&self) -> usize {
        0
    }

    fn put(&self, _: &mut Vec<u8>) {}

    fn take(_: &mut Reader<'_>, _: usize, _: usize, _: usize, _: &Expect) -> Result<(), String> {
        Ok(())
    }
}

impl Value for Vec<f32> {
    fn wire_len(&self) -> usize {
        4 + 4 * self.len()
    }

    fn put(&self, out: &mut Vec<u8>) {
        put_u32(out, self.len());
        put_f32s(out, self);
    }

    fn take(
        input: &mut Reader<'_>,
        _: usize,
        _: usize,
        _: usize,
        expect: &Expect,
    ) -> Result<Self, String> {
        let n = input.u32()? as usize;
        if n != expect.histogram {
            return Err(format!(
                "a histogram of {n} values, {} expected",
                expect.histogram
            ));
        }
        input.f32s(n)
    }
}

fn put_outcomes<T: Value>(out: &mut Vec<u8>, outcomes: &[Outcome<T>]) {
    let len: usize = (outcomes.iter())
        .map(|o| match o {
            Outcome::Done { value, .. } => 13 + value.wire_len(),
            Outcome::Skipped(reason) => 5 + reason.len(),
        })
        .sum();
    out.reserve(4 + len);
    put_u32(out, outcomes.len());
    for outcome in outcomes {
        match outcome {
            Outcome::Done {
                width,
                height,
                patches,
                value,
            } => {
                out.push(1);
                put_u32(out, *width);
                put_u32(out, *height);
                put_u32(out, *patches);
                value.put(out);
            }
            Outcome::Skipped(reason) => {
                out.push(0);
                put_u32(out, reason.len());
                out.extend_from_slice(reason.as_bytes());
            }
        }
    }
}

/// Reads a piece: the member's seconds, then exactly `expect.photos` outcomes and nothing more.
pub fn take_piece<T: Value>(
    piece: &[u8],
    expect: &Expect,
) -> Result<(f64, Vec<Outcome<T>>), String> {
    let mut input = Reader { bytes: piece };
    let head = input.take(8)?;
    let seconds = f64::from_le_bytes(head.try_into().map_err(|_| "a short piece")?);
    let n = input.u32()? as usize;
    if n != expect.photos {
        return Err(format!("{n} results for {} photos", expect.photos));
    }
    let mut outcomes = Vec::with_capacity(n);
    for _ in 0..n {
        let tag = input.take(1)?[0];
        let outcome = match tag {
            1 => {
                let (width, height) = (input.u32()? as usize, input.u32()? as usize);
                if width > usize::from(u16::MAX) || height > usize::from(u16::MAX) {
                    return Err(format!("a photo of {width} x {height}"));
                }
                let patches = input.u32()? as usize;
                let value = T::take(&mut input, width, height, patches, expect)?;
                Outcome::Done {
                    width,
                    height,
                    patches,
                    value,
                }
            }
            0 => {
                let len = input.u32()? as usize;
                let reason = std::str::from_utf8(input.take(len)?)
                    .map_err(|_| "a skip reason that is not UTF-8")?;
                Outcome::Skipped(reason.to_string())
            }
            t => return Err(format!("result tag {t}")),
        };
        outcomes.push(outcome);
    }
    if !input.bytes.is_empty() {
        return Err(format!("{} bytes after the last result", input.bytes.len()));
    }
    Ok((seconds.max(0.0), outcomes))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use vocab_pipeline::encode::{Norm, Soft};
    use vocab_pipeline::features::FeatureSummary;
    use vocab_pipeline::kmeans::Kernel;
    use vocab_pipeline::store::Format;

    use super::*;
    use crate::net::transport::memory::MemoryTransport;
    use crate::spmd::{exit, hello, serve};

    /// Synthetic photos plus two that are skipped (not an image; too small for a patch).
    fn photos(dir: &Path) -> PathBuf {
        let root = dir.join("photos");
        vocab_pipeline::synth::generate_photos(&root, 2, 5).expect("photos");
        std::fs::write(root.join("broken.jpg"), b"not a jpeg").expect("write");
        image::GrayImage::from_pixel(20, 30, image::Luma([90u8]))
            .save(root.join("tiny.png"))
            .expect("tiny");
        root
    }

    fn feature_params() -> FeatureParams {
        FeatureParams {
            sampling: Sampling::Random {
                per_image: 7,
                seed: 11,
            },
            max_side: Some(160),
            max_pixels: vocab_pipeline::image_io::MAX_PIXELS,
        }
    }

    fn encode_params() -> EncodeParams {
        EncodeParams {
            features: FeatureParams {
                sampling: Sampling::Dense { stride: 16 },
                max_side: Some(160),
                max_pixels: vocab_pipeline::image_io::MAX_PIXELS,
            },
            norm: Norm::Hellinger,
            levels: 2,
            soft: Some(Soft {
                words: 3,
                sharpness: 10.0,
            }),
            kernel: Kernel::Int8,
            scales: vec![40, 64],
            approx: None,
        }
    }

    /// Runs a photo stage on an in-memory team of `size` (rank 0 drives, and does photos when
    /// `root_works`), writing through `write` with the team's rounds as the source.
    fn sharded<T: Value>(
        size: usize,
        root_works: bool,
        collection: &Collection,
        stage: &PhotoStage,
        vocabulary: Option<&Centroids>,
        write: &mut dyn FnMut(&mut dyn Source<T>) -> Result<FeatureSummary, FeaturesError>,
    ) -> Result<(FeatureSummary, Vec<MemberTime>), EngineError> {
        let hosts: Vec<String> = (0..size).map(|r| format!("node{r}")).collect();
        let team = MemoryTransport::team_on(&hosts);
        std::thread::scope(|s| {
            let (root, members) = team.split_first().expect("a root");
            for m in members {
                s.spawn(move || serve(m, crate::spmd::Faults::default()));
            }
            let driven = (|| {
                let members = hello(root)?;
                let mut job = PhotoRoot::start(
                    Box::new(root),
                    &members,
                    collection,
                    stage,
                    vocabulary,
                    root_works,
                )?;
                let per_round =
                    shard_photos(collection.photos().len(), job.workers()) * job.workers();
                let mut source = Rounds::new(
                    |range, next| job.round::<T>(range, next),
                    per_round,
                    collection.photos().len(),
                );
                let summary = write(&mut source).map_err(|e| EngineError::Malformed {
                    rank: 0,
                    reason: vocab_pipeline::chain(&e),
                })?;
                Ok((summary, job.times()))
            })();
            let _ = exit(root);
            driven
        })
    }

    fn files(out: &Path) -> Vec<Vec<u8>> {
        [
            out.to_path_buf(),
            features::manifest_path(out, "images.csv"),
            features::manifest_path(out, "skipped.csv"),
        ]
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect()
    }

    /// Runs `drive` at the root of an in-memory team of `size` (members `node0`..) while the
    /// others serve; members must serve to the end (told to exit afterwards).
    fn on_team<R>(
        size: usize,
        drive: impl FnOnce(&MemoryTransport, &Members) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let hosts: Vec<String> = (0..size).map(|r| format!("node{r}")).collect();
        let team = MemoryTransport::team_on(&hosts);
        std::thread::scope(|s| {
            let (first, members) = team.split_first().expect("a root");
            let served: Vec<_> = (members.iter())
                .map(|m| s.spawn(move || serve(m, crate::spmd::Faults::default())))
                .collect();
            let driven = hello(first).and_then(|members| drive(first, &members));
            let _ = exit(first);
            for m in served {
                m.join().expect("member").expect("served to the end");
            }
            driven
        })
    }

    /// The files of a partition folder, by name.
    fn folder(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| {
                        let p = e.expect("entry").path();
                        let name = p.file_name().expect("name").to_string_lossy().into_owned();
                        (name, std::fs::read(&p).expect("read"))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn partitions_born_on_the_nodes_are_the_single_machine_partitions() {
        use vocab_pipeline::kmeans::{self, Assignment, Init, KMeansError, Params, State};
        use vocab_pipeline::partition::{MANIFEST, PartitionSet, split};
        use vocab_pipeline::store::Element;

        use crate::spmd::{Options, Root, assert_same_run};

        let tmp = tempfile::tempdir().expect("tmp");
        let root = photos(tmp.path());
        let collection = Collection::open(&root, None).expect("collection");
        let none = |_| {};
        let params = feature_params();
        // One machine: the feature file, split into 5 partitions, and k-means over them.
        let local = tmp.path().join("local.bin");
        features::extract(&collection, &params, &local, Format::Bin, &none).expect("features");
        let want = files(&local);
        let parts = tmp.path().join("parts");
        let manifest = split(&local, 5, &parts, Element::F32).expect("split");
        let set = PartitionSet::open(&parts).expect("open");
        let kparams = Params {
            k: 4,
            max_iter: 4,
            tol: 0.0,
            seed: 3,
            init: Init::Random,
            threads: 2,
            assignment: Assignment::Full(Kernel::F32),
        };
        let start = State {
            iteration: 0,
            centroids: kmeans::initial_centroids(&set.matrices(), 4, &Init::Random, 3)
                .expect("init"),
            history: Vec::new(),
            converged: false,
        };
        let alone =
            kmeans::fit::<KMeansError>(&set.matrices(), &kparams, Some(start.clone()), &mut |_| {
                Ok(())
            })
            .expect("local");
        let payload = |bytes: &[u8]| bytes.len() - vocab_pipeline::store::HEADER_LEN;
        for (size, root_works) in [(2, false), (3, false), (3, true), (4, false), (2, true)] {
            let what = format!("{size} ranks, root works: {root_works}");
            let base = tmp.path().join(format!("born-{size}-{root_works}"));
            let dir = base.join("{rank}").display().to_string();
            let out = base.join("kept.bin");
            let hosts: Vec<String> = (0..size).map(|r| format!("node{r}")).collect();
            let (born, state) = on_team(size, |first, members| {
                {
                    let mut job = PhotoRoot::start_keeping(
                        Box::new(first),
                        members,
                        &collection,
                        params,
                        root_works,
                        Some(&dir),
                    )?;
                    let sized = job.kept_rounds(&mut |_| {})?;
                    let kept_sizes = sized.clone();
                    std::fs::create_dir_all(&base).expect("mkdir");
                    features::manifests_from(
                        &collection,
                        &out,
                        &mut features::Given(Some(sized)),
                        &none,
                    )
                    .expect("manifests");
                    let born = job.cut(&dir, 5, Element::F32, "kept")?;
                    let options = Options {
                        dir: dir.clone(),
                        plan: crate::collective::BroadcastPlan {
                            algorithm: crate::collective::Algorithm::Chain,
                            chunk: 256,
                            chains: 1,
                        },
                        stage1: true,
                        assignment: kparams.assignment,
                        racks: std::collections::BTreeMap::new(),
                        root_maps: root_works,
                        auto: None,
                        known: None,
                        // Dealt as the cut placed them, or found where they are.
                        deal: if size % 2 == 0 {
                            crate::spmd::Deal::ByRank(born.by_rank(size))
                        } else {
                            crate::spmd::Deal::Found
                        },
                        remake: None,
                    };
                    let engine_options = options.clone();
                    let mut engine =
                        Root::start(Box::new(first), members, options, born.manifest.clone(), 9)?;
                    // The first centroids from rows the members send: the single machine's.
                    let (n, dims) = engine.shape();
                    let seeded = kmeans::initial_centroids_by::<EngineError>(
                        n as usize,
                        dims,
                        4,
                        &Init::Random,
                        3,
                        &mut |indices| engine.rows(indices),
                    )?;
                    assert_eq!(seeded, start.centroids, "{what}: first centroids");
                    let state = vocab_pipeline::kmeans::fit_with::<_, EngineError>(
                        &mut engine,
                        &kparams,
                        start.clone(),
                        &mut |_, _| Ok(()),
                    )?;
                    if size == 3 {
                        // A partition gone from its member is on no member: named, not skipped.
                        let owner = born.owners[1].to_string();
                        let gone = base
                            .join(owner)
                            .join(vocab_pipeline::partition::part_file(1));
                        std::fs::remove_file(&gone).expect("remove");
                        let options = Options {
                            deal: crate::spmd::Deal::Found,
                            ..engine_options.clone()
                        };
                        let err = Root::start(
                            Box::new(first),
                            members,
                            options,
                            born.manifest.clone(),
                            10,
                        )
                        .map(|_| ())
                        .expect_err("a partition on no member");
                        assert!(
                            err.to_string().contains("no member holds part-0001.bin"),
                            "{err}"
                        );
                        // With its recipe, a member makes it again from the photos: split's
                        // file, and the same run.
                        let recipes = crate::born::Recipes::of(
                            &collection,
                            params,
                            &kept_sizes,
                            &born.manifest,
                        );
                        let options = Options {
                            deal: crate::spmd::Deal::Found,
                            remake: Some(std::sync::Arc::new(recipes)),
                            ..engine_options.clone()
                        };
                        let mut again = Root::start(
                            Box::new(first),
                            members,
                            options,
                            born.manifest.clone(),
                            11,
                        )?;
                        let remade = again.remade().to_vec();
                        assert_eq!(remade.len(), 1, "{remade:?}");
                        assert_eq!(remade[0].0, 1, "{remade:?}");
                        let at = base
                            .join(
                                hosts
                                    .iter()
                                    .position(|h| *h == remade[0].1)
                                    .expect("host")
                                    .to_string(),
                            )
                            .join(vocab_pipeline::partition::part_file(1));
                        assert!(
                            std::fs::read(&at).expect("made again")
                                == std::fs::read(
                                    parts.join(vocab_pipeline::partition::part_file(1))
                                )
                                .expect("split's"),
                            "{what}"
                        );
                        let rerun = vocab_pipeline::kmeans::fit_with::<_, EngineError>(
                            &mut again,
                            &kparams,
                            start.clone(),
                            &mut |_, _| Ok(()),
                        )?;
                        assert_same_run(&rerun, &alone, kparams.assignment, &what);
                        // Back where the cut put it, for the checks of the folders below.
                        std::fs::remove_file(&at).expect("remove");
                        std::fs::copy(parts.join(vocab_pipeline::partition::part_file(1)), &gone)
                            .expect("restore");
                    }
                    Ok::<_, EngineError>((born, state))
                }
            })
            .expect(&what);
            // The manifests of the features stage are the single machine's.
            for (i, suffix) in ["images.csv", "skipped.csv"].iter().enumerate() {
                let got = std::fs::read(features::manifest_path(&out, suffix)).expect("manifest");
                assert_eq!(got, want[i + 1], "{what}: {suffix}");
            }
            assert!(!out.exists(), "{what}: no feature file at the root");
            // The partitions are split's, each at its owner only, with the manifest beside.
            assert_eq!(born.manifest.digest(), manifest.digest(), "{what}");
            assert_eq!(born.manifest.partitions, manifest.partitions, "{what}");
            assert_eq!(
                born.manifest.source_checksum, manifest.source_checksum,
                "{what}"
            );
            let alike = folder(&parts);
            for rank in 0..size {
                let held = folder(&base.join(rank.to_string()));
                let mine: Vec<String> = (born.owners.iter().enumerate())
                    .filter(|&(_, &o)| o == rank)
                    .map(|(p, _)| vocab_pipeline::partition::part_file(p))
                    .collect();
                let names: Vec<&String> = held.keys().filter(|n| *n != MANIFEST).collect();
                assert_eq!(
                    names,
                    mine.iter().collect::<Vec<_>>(),
                    "{what}: rank {rank}"
                );
                for name in &mine {
                    assert_eq!(held[name], alike[name], "{what}: {name}");
                }
                let m = vocab_pipeline::partition::read_manifest(&base.join(rank.to_string()))
                    .expect("member manifest");
                assert_eq!(m.digest(), manifest.digest(), "{what}: rank {rank}");
            }
            if !root_works {
                assert!(!born.owners.contains(&0), "{what}: the root holds nothing");
            }
            // Only boundary records travelled: less than the sample (and, with three shards
            // or more here, some).
            assert!(
                born.bytes < payload(&want[0]) as u64,
                "{what}: {} bytes",
                born.bytes
            );
            assert_eq!(
                born.bytes > 0,
                size >= 3 || root_works,
                "{what}: {:?}",
                born.owners
            );
            // k-means on the partitions where they lie is the single-machine run.
            assert_same_run(&state, &alone, kparams.assignment, &what);
        }
    }

    #[test]
    fn a_kept_job_run_again_takes_back_the_rounds_its_members_saved() {
        use vocab_pipeline::partition::split;
        use vocab_pipeline::store::Element;

        let tmp = tempfile::tempdir().expect("tmp");
        let root = photos(tmp.path());
        let collection = Collection::open(&root, None).expect("collection");
        let none = |_| {};
        let local = tmp.path().join("local.bin");
        features::extract(&collection, &feature_params(), &local, Format::Bin, &none)
            .expect("features");
        let want = split(&local, 3, &tmp.path().join("parts"), Element::F32).expect("split");
        let dir = tmp.path().join("{rank}").display().to_string();
        // The job on a team of 3; cut or interrupted before the cut.
        let run = |cut: bool| {
            on_team(3, |first, members| {
                let mut job = PhotoRoot::start_keeping(
                    Box::new(first),
                    members,
                    &collection,
                    feature_params(),
                    false,
                    Some(&dir),
                )?;
                job.kept_rounds(&mut |_| {})?;
                cut.then(|| job.cut(&dir, 3, Element::F32, "kept"))
                    .transpose()
            })
            .expect("team")
        };
        let kept = |rank: usize| -> Vec<PathBuf> {
            std::fs::read_dir(tmp.path().join(rank.to_string()))
                .map(|d| d.map(|e| e.expect("entry").path()).collect())
                .unwrap_or_default()
        };
        assert!(run(false).is_none());
        for rank in [1, 2] {
            let saved = kept(rank);
            assert!(
                saved.len() == 1 && saved[0].to_string_lossy().contains(".kept-"),
                "{saved:?}"
            );
        }
        // A photo damaged since: described again it would be skipped; taken back, it is what
        // it was, and the partitions are split's.
        let damaged = (collection.photos().iter())
            .map(|p| collection.path_of(p))
            .find(|p| p.extension().is_some_and(|e| e == "png") && !p.ends_with("tiny.png"))
            .expect("a photo");
        std::fs::write(&damaged, b"damaged").expect("damage");
        let born = run(true).expect("cut");
        assert_eq!(born.manifest.digest(), want.digest());
        // The saved rounds go once the partitions are cut.
        for rank in [1, 2] {
            assert!(
                kept(rank)
                    .iter()
                    .all(|p| !p.to_string_lossy().contains(".kept-")),
                "{:?}",
                kept(rank)
            );
        }
    }

    #[test]
    fn a_cut_unlike_what_the_members_kept_is_refused_naming_the_member() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = photos(tmp.path());
        let collection = Collection::open(&root, None).expect("collection");
        let dir = tmp.path().join("{rank}").display().to_string();
        // Members answer the refused cut and go on serving until told to exit.
        let refused = on_team(3, |first, members| {
            let mut job = PhotoRoot::start_keeping(
                Box::new(first),
                members,
                &collection,
                feature_params(),
                false,
                None,
            )?;
            // Before the rounds there is nothing to cut.
            let early = job.cut(&dir, 2, vocab_pipeline::store::Element::F32, "kept");
            assert!(matches!(early, Err(EngineError::NotLoaded(0))), "{early:?}");
            job.kept_rounds(&mut |_| {})?;
            if let Some(kept) = job.kept.as_mut() {
                kept.records[2] += 1;
            }
            let refused = job
                .cut(&dir, 2, vocab_pipeline::store::Element::F32, "kept")
                .expect_err("records unlike the kept ones");
            Ok(refused)
        })
        .expect("team");
        let text = refused.to_string() + &vocab_pipeline::chain(&refused);
        assert!(
            matches!(&refused, EngineError::Refused { rank: 2, host, .. } if host == "node2"),
            "{refused:?}"
        );
        assert!(text.contains("the root counted"), "{text}");
        // Nothing was written anywhere.
        assert!(folder(&tmp.path().join("1")).is_empty());
        assert!(folder(&tmp.path().join("2")).is_empty());
    }

    #[test]
    fn sharded_features_and_encode_write_the_single_machine_bytes() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = photos(tmp.path());
        let collection = Collection::open(&root, None).expect("collection");
        let n = collection.photos().len();
        let none = |_| {};
        // One machine.
        let local = tmp.path().join("local.bin");
        let params = feature_params();
        let summary =
            features::extract(&collection, &params, &local, Format::Bin, &none).expect("features");
        assert_eq!(summary.skipped, 2, "the broken and the tiny photo");
        let want = files(&local);
        let vocabulary = {
            // Twelve of the sample's patches as words.
            let bytes = &want[0][vocab_pipeline::store::HEADER_LEN..];
            let record = 8 + 4 * DIMS;
            let values: Vec<f32> = (0..12)
                .flat_map(|i| {
                    bytes[i * 5 * record + 8..(i * 5 + 1) * record]
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                })
                .collect();
            Centroids::new(values, DIMS)
        };
        let encoded = tmp.path().join("local.csv");
        let ep = encode_params();
        vocab_pipeline::encode::encode(&collection, &vocabulary, &ep, &encoded, &none)
            .expect("encode");
        let want_encoded = files(&encoded);
        let encoder = Encoder::new(vocabulary.clone(), ep.clone(), &encoded).expect("encoder");
        for (size, root_works) in [(2, false), (1, true), (2, true), (3, true), (4, false)] {
            let out = tmp.path().join(format!("f-{size}-{root_works}.bin"));
            let (s, times) = sharded::<Described>(
                size,
                root_works,
                &collection,
                &PhotoStage::Features(params),
                None,
                &mut |source| features::extract_from(&collection, &out, Format::Bin, source, &none),
            )
            .expect("sharded features");
            assert_eq!(s, summary, "{size} members");
            assert_eq!(
                files(&out),
                want,
                "{size} members, root works: {root_works}"
            );
            assert_eq!(times.iter().map(|t| t.photos).sum::<u64>(), n as u64);
            assert!(
                times.iter().all(|t| t.photos > 0),
                "every member did photos"
            );
            let out = tmp.path().join(format!("e-{size}-{root_works}.csv"));
            sharded::<Vec<f32>>(
                size,
                root_works,
                &collection,
                &PhotoStage::Encode(ep.clone()),
                Some(&vocabulary),
                &mut |source| {
                    vocab_pipeline::encode::encode_from(
                        &collection,
                        encoder.len(),
                        &out,
                        source,
                        &none,
                    )
                },
            )
            .expect("sharded encode");
            assert!(files(&out) == want_encoded, "{size} members encode");
        }
        // The approximate word search: every member indexes the vocabulary it was sent alike.
        let ap = EncodeParams {
            soft: None,
            kernel: Kernel::F32,
            approx: Some(vocab_pipeline::kmeans::approx::Search {
                lists: 3,
                probes: 1,
            }),
            ..encode_params()
        };
        let local = tmp.path().join("approx.csv");
        vocab_pipeline::encode::encode(&collection, &vocabulary, &ap, &local, &none)
            .expect("approximate encode");
        let out = tmp.path().join("approx-3.csv");
        sharded::<Vec<f32>>(
            3,
            true,
            &collection,
            &PhotoStage::Encode(ap.clone()),
            Some(&vocabulary),
            &mut |source| {
                vocab_pipeline::encode::encode_from(&collection, encoder.len(), &out, source, &none)
            },
        )
        .expect("sharded approximate encode");
        assert!(
            files(&out) == files(&local),
            "approximate encode on 3 members"
        );
        // It did search approximately: the exact hard assignment gives other histograms.
        let exact = tmp.path().join("exact.csv");
        let ep = EncodeParams { approx: None, ..ap };
        vocab_pipeline::encode::encode(&collection, &vocabulary, &ep, &exact, &none)
            .expect("exact encode");
        assert!(files(&local) != files(&exact));
    }

    #[test]
    fn members_without_the_photos_or_with_bad_settings_refuse_the_job() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = photos(tmp.path());
        let collection = Collection::open(&root, None).expect("collection");
        // A member that sees another folder: the root's photos are not there.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).expect("mkdir");
        let job = Job {
            root: elsewhere.display().to_string(),
            photos: collection.listing(),
            present: present(&collection),
            stage: PhotoStage::Features(feature_params()),
            k: 0,
            keep: false,
            keep_dir: None,
        };
        let err = open_work(job, Vec::new(), (0, "node0"), "digest").expect_err("absent photos");
        assert!(err.contains("must hold the same photos"), "{err}");
        for (stage, k, what) in [
            (
                PhotoStage::Features(FeatureParams {
                    sampling: Sampling::Dense { stride: 0 },
                    ..feature_params()
                }),
                0,
                "stride 0",
            ),
            (
                PhotoStage::Features(FeatureParams {
                    sampling: Sampling::Random {
                        per_image: MAX_PER_IMAGE + 1,
                        seed: 0,
                    },
                    ..feature_params()
                }),
                0,
                "patches per photo",
            ),
            (
                PhotoStage::Encode(encode_params()),
                2,
                "soft assignment over 3 words",
            ),
            (
                PhotoStage::Encode(EncodeParams {
                    levels: 40,
                    ..encode_params()
                }),
                12,
                "pyramid",
            ),
        ] {
            let job = Job {
                root: root.display().to_string(),
                photos: collection.listing(),
                present: Vec::new(),
                stage,
                k,
                keep: false,
                keep_dir: None,
            };
            let err = open_work(job, vec![0; 4 * DIMS * k as usize], (0, "node0"), "digest")
                .expect_err(what);
            assert!(err.contains(what), "{err}");
        }
        let job = Job {
            root: root.display().to_string(),
            photos: vec![("../outside.jpg".into(), None)],
            present: Vec::new(),
            stage: PhotoStage::Features(feature_params()),
            k: 0,
            keep: false,
            keep_dir: None,
        };
        assert!(
            open_work(job, Vec::new(), (0, "node0"), "digest")
                .expect_err("..")
                .contains("leaves")
        );
        let job = Job {
            root: root.display().to_string(),
            photos: collection.listing(),
            present: Vec::new(),
            stage: PhotoStage::Encode(encode_params()),
            k: 12,
            keep: true,
            keep_dir: None,
        };
        let err = open_work(job, vec![0; 4 * DIMS * 12], (0, "node0"), "digest").expect_err("keep");
        assert!(err.contains("only the features stage keeps"), "{err}");
        // On a team, a refusal names the member (the root, which does no photos, sends a
        // listing it did not check).
        let hosts = vec!["root".to_string(), "far".to_string()];
        let team = MemoryTransport::team_on(&hosts);
        let outside = Collection::listed(&root, vec![("../x.jpg".into(), None)]).expect("listed");
        std::thread::scope(|s| {
            let (root, members) = team.split_first().expect("a root");
            s.spawn(move || serve(&members[0], crate::spmd::Faults::default()));
            let members = hello(root).expect("hello");
            let stage = PhotoStage::Features(feature_params());
            let refused = PhotoRoot::start(Box::new(root), &members, &outside, &stage, None, false)
                .expect_err("refused");
            let text = refused.to_string();
            assert!(
                text.contains("rank 1 on far") && text.contains("leaves"),
                "{text}"
            );
            exit(root).expect("exit");
        });
    }

    #[test]
    fn hostile_pieces_are_errors() {
        let expect = Expect {
            photos: 2,
            histogram: 3,
        };
        let good: Vec<Outcome<Vec<f32>>> = vec![
            Outcome::Done {
                width: 100,
                height: 80,
                patches: 12,
                value: vec![0.5, 0.25, 0.25],
            },
            Outcome::Skipped("cannot decode".into()),
        ];
        let mut piece = 1.5f64.to_le_bytes().to_vec();
        put_outcomes(&mut piece, &good);
        let (seconds, back) = take_piece::<Vec<f32>>(&piece, &expect).expect("good");
        assert_eq!((seconds, &back), (1.5, &good));
        // Every truncation fails, as do trailing bytes, other counts, a NaN and a bad tag.
        for cut in 0..piece.len() {
            assert!(
                take_piece::<Vec<f32>>(&piece[..cut], &expect).is_err(),
                "cut {cut}"
            );
        }
        let mut long = piece.clone();
        long.push(0);
        assert!(
            take_piece::<Vec<f32>>(&long, &expect)
                .expect_err("an error")
                .contains("after")
        );
        let three = Expect {
            photos: 3,
            ..expect
        };
        assert!(
            take_piece::<Vec<f32>>(&piece, &three)
                .expect_err("an error")
                .contains("results")
        );
        let wider = Expect {
            histogram: 4,
            ..expect
        };
        assert!(
            take_piece::<Vec<f32>>(&piece, &wider)
                .expect_err("an error")
                .contains("histogram")
        );
        let mut nan = piece.clone();
        nan[8 + 4 + 1 + 12 + 4..8 + 4 + 1 + 12 + 8].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(
            take_piece::<Vec<f32>>(&nan, &expect)
                .expect_err("an error")
                .contains("finite")
        );
        let mut tag = piece.clone();
        tag[12] = 7;
        assert!(
            take_piece::<Vec<f32>>(&tag, &expect)
                .expect_err("an error")
                .contains("tag")
        );
        // Patches must lie inside their photo, and as many as announced.
        let d = Described {
            width: 50,
            height: 45,
            positions: vec![(0, 10)],
            values: vec![0.1; DIMS],
        };
        let one = Expect {
            photos: 1,
            histogram: 0,
        };
        for (patches, d, what) in [
            (1, d.clone(), None),
            (2, d.clone(), Some("positions")),
            (
                1,
                Described {
                    positions: vec![(6, 0)],
                    ..d.clone()
                },
                Some("patch at"),
            ),
        ] {
            let mut piece = 0f64.to_le_bytes().to_vec();
            put_outcomes(
                &mut piece,
                &[Outcome::Done {
                    width: 50,
                    height: 45,
                    patches,
                    value: d,
                }],
            );
            match (take_piece::<Described>(&piece, &one), what) {
                (Ok(_), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{e}"),
                (r, w) => panic!("{w:?}: {r:?}"),
            }
        }
    }

    #[test]
    fn saved_rounds_come_back_whole_or_are_done_again() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("j.rounds");
        let journal = Journal::open(&dir, "job-a", 2).expect("journal");
        let round: Vec<Outcome<Vec<f32>>> = vec![
            Outcome::Skipped("cannot decode".into()),
            Outcome::Done {
                width: 60,
                height: 50,
                patches: 4,
                value: vec![0.75, 0.25],
            },
        ];
        journal.save(6, &round).expect("save");
        assert_eq!(journal.load::<Vec<f32>>(6, 10), Some(round.clone()));
        // Reopened for the same job the round is there; for another job it is gone.
        let same = Journal::open(&dir, "job-a", 2).expect("journal");
        assert_eq!(same.load::<Vec<f32>>(6, 10), Some(round.clone()));
        let other = Journal::open(&dir, "job-b", 2).expect("journal");
        assert_eq!(other.load::<Vec<f32>>(6, 10), None);
        journal.save(6, &round).expect("save");
        // Nothing saved there; a round past the collection's end; a damaged file.
        assert_eq!(journal.load::<Vec<f32>>(0, 10), None);
        assert_eq!(journal.load::<Vec<f32>>(6, 7), None);
        let path = journal.path(6);
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(journal.load::<Vec<f32>>(6, 10), None);
        // A source through the journal saves what it computes and serves it the next time.
        let mut computed = 0;
        let rounds = Rounds::new(
            |range: Range<usize>, _| {
                computed += range.len();
                Ok::<_, std::io::Error>(range.map(|_| Outcome::Skipped("x".into())).collect())
            },
            3,
            5,
        );
        let mut source = Journaled::new(rounds, &journal, 5);
        let first: Vec<Outcome<Vec<f32>>> = source.next(0).expect("next").expect("a round");
        assert_eq!((first.len(), source.resumed), (3, 0));
        let _ = source;
        assert_eq!(computed, 3);
        let mut again = Journaled::new(
            Rounds::new(
                |_: Range<usize>, _| -> Result<Vec<Outcome<Vec<f32>>>, std::io::Error> {
                    panic!("served from the journal")
                },
                3,
                5,
            ),
            &journal,
            5,
        );
        assert_eq!(again.next(0).expect("next"), Some(first));
        assert_eq!(again.resumed, 3);
        journal.remove().expect("remove");
    }
}
